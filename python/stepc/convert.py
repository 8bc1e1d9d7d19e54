"""A stepc checkpoint (stepc-run --checkpoint-dir, Session.save_checkpoint) as
one safetensors file of its parameters, by name:

    python3 -m stepc.convert CHECKPOINT_DIR STEP.so OUT.safetensors [--moments]

CHECKPOINT_DIR is a checkpoint or a --checkpoint-dir (its newest step).

STEP.so is a single-rank step.so of the model (the checkpoint reshards on
load, so a checkpoint written under fsdp:N or pp:P converts with it: compile
one with `stepc MODEL.mlir --target=cpu -o one.so` if the job's is sharded). --moments also
writes the AdamW moments (exp_avg.<p>, exp_avg_sq.<p>).
"""

import argparse
import os
import sys

from . import safetensors
from .errors import StepcError
from .session import Session


def latest(directory):
    """A checkpoint, or the newest step-NNNNNNNN of a --checkpoint-dir."""
    if os.path.exists(os.path.join(directory, "checkpoint.json")):
        return directory
    steps = sorted(d for d in os.listdir(directory) if d.startswith("step-")) \
        if os.path.isdir(directory) else []
    return os.path.join(directory, steps[-1]) if steps else directory


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m stepc.convert",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint")
    p.add_argument("step_so")
    p.add_argument("output")
    p.add_argument("--moments", action="store_true")
    a = p.parse_args(argv)
    try:
        try:
            session = Session(a.step_so)
        except StepcError as e:
            # This process is one rank: a sharded step.so cannot open here.
            if "was compiled for" not in str(e):
                raise
            raise StepcError(f"{e}: convert with a single-rank step.so of the same model "
                             "(stepc MODEL.mlir --target=cpu -o one.so); the checkpoint "
                             "reshards on load") from None
        step, _ = session.load_checkpoint(latest(a.checkpoint))
        names = session.tensor_names if a.moments else session.parameter_names
        safetensors.save({n: session.read(n) for n in names}, a.output,
                         metadata={"step": step, "source": a.checkpoint})
    except (StepcError, OSError, ValueError) as e:
        print(f"stepc.convert: error: {e}", file=sys.stderr)
        return 1
    print(f"{a.output}: {len(names)} tensors of step {step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
