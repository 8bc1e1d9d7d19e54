# lit configuration for stepc.
import os

import lit.formats

config.name = "stepc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.stepc_obj_root, "test")

# Tools: ours first, then FileCheck / not / count from LLVM 19.
config.environment["PATH"] = os.pathsep.join(
    [config.stepc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])

config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%stepc_src", config.stepc_src_root))
config.substitutions.append(("%stepc_obj", config.stepc_obj_root))
# The host compiler and MLIR's TableGen sources (stepc-tblgen's tests).
config.substitutions.append(("%cxx", config.cxx_compiler))
config.substitutions.append(("%mlir_include", config.mlir_include_dir))
config.substitutions.append(("%examples", os.path.join(config.stepc_src_root, "examples")))

# The numerical oracle: Debian's python3-torch under /usr/bin/python3
# (installed by scripts/install-deps.sh; a missing torch fails the tests).
torch_python = "/usr/bin/python3"
config.substitutions.append(("%torch_python", torch_python))
config.environment["STEPC_BIN"] = config.stepc_tools_dir
# stepc-run's MFU probe caches the machine's GEMM rate: in the build tree,
# not the home directory.
config.environment["STEPC_CACHE_DIR"] = os.path.join(config.stepc_obj_root, "test", "cache")
# Tests run two at a time: their probes are cached even when the other
# test keeps the machine busy (test/Runtime/probe-busy.test checks the
# default, which caches only a quiet machine's probes).
config.environment["STEPC_PROBE_CACHE"] = "always"
# Two tests run at once on as many cores: an OpenMP thread that spins at a
# barrier while its partner is descheduled burns the core the other test
# needs (gpt-capstone beside one busy core: 24 s spinning, 15 s passive;
# alone, spinning is as fast or faster, so step.so keeps libgomp's default).
config.environment["OMP_WAIT_POLICY"] = "passive"
# The Python package as built (build/python/stepc).
config.environment["PYTHONPATH"] = os.path.join(config.stepc_obj_root, "python")

# Multi-rank runs on loopback, as root in CI; one OpenMP
# thread per rank so that 4 ranks do not oversubscribe 2 cores 4-fold.
config.substitutions.append(("%mpirun",
    "env OMP_NUM_THREADS=1 timeout 300 mpirun --allow-run-as-root --oversubscribe "
    "--mca pml ob1 --mca btl self,vader --mca oob_tcp_if_include lo"))

# `nvcc`: the CUDA target builds here (CUDA step.so files compile and link).
# `gpu`: a GPU is present (scripts/gpu-check.sh's machine); tests that need
# one say REQUIRES: gpu, tests of running without one UNSUPPORTED: gpu.
if config.stepc_have_cuda:
    config.available_features.add("nvcc")
if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
    config.available_features.add("gpu")

# PyTorch's CPU autocast is a bf16 reference only where the CPU computes bf16
# products natively (AVX512-BF16 or AMX): elsewhere PyTorch 1.13's emulated
# bf16 GEMMs move its gradients 5-40% (measured on an AVX2-only host, where
# stepc's bf16 step stays within 1.1% of PyTorch fp32): there the reference
# is PyTorch in fp32.
def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return set(next(l for l in f if l.startswith("flags")).split())
    except (OSError, StopIteration):
        return set()
native_bf16 = bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})
if native_bf16:
    config.available_features.add("cpu-bf16")
config.substitutions.append(("%torch_bf16_reference",
                              "" if native_bf16 else "--torch-precision fp32"))

# PyTorch 2.x, where bench/setup-peers.sh installed it (not on a fresh
# machine: those tests are then unsupported): stepc.export against a second
# PyTorch (scaled_dot_product_attention, symbolic shapes).
torch2_python = os.path.join(config.stepc_src_root, "bench", ".peers", "bin", "python")
if os.path.exists(torch2_python):
    config.available_features.add("torch2")
    config.substitutions.append(("%torch2_python", torch2_python))
