"""stepc.Session given bad values: each an error naming the input or
tensor, never a silent conversion or a NaN carried into training."""
import sys

import stepc
import numpy as np

session = stepc.Session(sys.argv[1])
batch, seq = session._inputs["tokens"][1]
ids = np.zeros((batch, seq), np.int32)
name = session.parameter_names[0]
shape = session.read(name).shape
nan = np.zeros(shape, np.float32)
nan.flat[5] = np.nan
negative = np.zeros(shape, np.float32)
negative.flat[3] = -1.0
cases = [
    ("float ids", lambda: session.step(1e-3, tokens=ids + 0.7, targets=ids),
     "input 'tokens' is float64; the step takes integer ids"),
    ("NaN parameter", lambda: session.write(name, nan),
     f"'{name}' would hold nan at element 5: its values must be finite"),
    ("negative second moment", lambda: session.write("exp_avg_sq." + name, negative),
     f"'exp_avg_sq.{name}' would hold -1 at element 3: a second moment is finite and >= 0"),
]
for label, call, expected in cases:
    try:
        call()
    except (TypeError, ValueError, stepc.StepcError) as e:
        if expected not in str(e):
            sys.exit(f"FAIL {label}: {e}")
        print(f"{label}: {e}")
    else:
        sys.exit(f"FAIL {label}: accepted")
# The session still trains from what it held.
loss, norm = session.step(1e-3, tokens=ids, targets=ids)
assert np.isfinite(loss) and np.isfinite(norm), (loss, norm)
print("ok")
