"""stepc.Session.metrics() on an MoE model: each layer's expert loads are
shares of the routed (token, expert) pairs (a count over N·K each, summing
to 1) and the balance loss is a finite positive number."""
import sys

import numpy as np
import stepc

session = stepc.Session(sys.argv[1])

batch, seq = session._inputs["tokens"][1]
pairs = batch * seq * 2  # top-2
before = session.metrics()
print(f"before: h0.expert_load {before['h0.expert_load']}, moe_aux_loss {before['moe_aux_loss']}")
rng = np.random.default_rng(0)
tokens = rng.integers(0, 512, (batch, seq))
session.step(1e-3, tokens=tokens, targets=np.roll(tokens, -1, axis=1))
metrics = session.metrics()
assert sorted(metrics) == ["h0.expert_load", "h1.expert_load", "moe_aux_loss"], sorted(metrics)
for name in ("h0.expert_load", "h1.expert_load"):
    load = metrics[name]
    assert load.shape == (4,), load.shape
    counts = load * pairs
    if abs(load.sum() - 1) > 1e-6 or np.max(np.abs(counts - np.round(counts))) > 1e-3:
        sys.exit(f"FAIL {name}: {load} are not shares of {pairs} pairs")
    print(f"step 1: {name} sums to 1 in multiples of 1/{pairs}")
aux = metrics["moe_aux_loss"]
assert isinstance(aux, float) and np.isfinite(aux) and aux > 0, aux
print(f"step 1: moe_aux_loss {aux:.6f}")
print("ok")
