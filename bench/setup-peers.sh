#!/bin/sh
# Makes the optional environment bench/cpu_step/bench.py's peers run in:
# PyTorch 2.x (eager and torch.compile) and JAX on the CPU, from the package
# index, in bench/.peers (ignored by git). Not part of make test: the
# benchmark runs without it and reports the peers as missing.
#   bench/setup-peers.sh [DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/.peers}
torch_version=${STEPC_PEER_TORCH:-2.5.1}
jax_version=${STEPC_PEER_JAX:-}

if ! /usr/bin/python3 -m venv --help >/dev/null 2>&1 || ! /usr/bin/python3 -c "import ensurepip" 2>/dev/null; then
  echo "setup-peers: installing python3-venv"
  apt-get install -y -q python3-venv >/dev/null
fi
[ -x "$dir/bin/python" ] || /usr/bin/python3 -m venv "$dir"
pip="$dir/bin/python -m pip install -q --disable-pip-version-check"
# The index's Linux torch wheel is the CUDA build: it needs its nvidia-*
# wheels (about 3 GB) to import, even on a machine without a GPU.
echo "setup-peers: torch==$torch_version into $dir (with its CUDA wheels: about 3 GB)"
$pip "torch==$torch_version" numpy
echo "setup-peers: jax[cpu]${jax_version:+==$jax_version}"
$pip "jax[cpu]${jax_version:+==$jax_version}"
"$dir/bin/python" - <<'PY'
import jax, torch
x = torch.randn(8, 8, requires_grad=True)
torch.compile(lambda t: (t @ t).sum())(x).backward()
print(f"setup-peers: ok: torch {torch.__version__} (torch.compile works), jax {jax.__version__}")
PY
