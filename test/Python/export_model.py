#!/usr/bin/env python3
"""Exports a model of Inputs/models.py: export_model.py --model gpt OUT_DIR"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs"))
import models  # noqa: E402
import stepc  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--model", default="gpt")
p.add_argument("out")
a = p.parse_args()
torch.manual_seed(0)
model, batches = models.make(a.model, 1)
e = stepc.export(model, batches[0], a.out)
print(f"exported {len(e.params)} parameters, inputs {e.input_names or e.inputs}")
