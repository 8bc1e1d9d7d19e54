"""stepc::moe given what it cannot lower: each an ExportError naming it
(check_export trains the module stepc.nn.MoE builds; this calls the op
itself with an activation, a top_k and a w3 the module would refuse).

    check_moe_errors.py OUT_DIR
"""
import sys, torch, stepc, stepc.nn
class M(torch.nn.Module):
    def __init__(self, act, k, w3, capacity=0.0):
        super().__init__()
        self.r = torch.nn.Parameter(torch.randn(4, 8)); self.w1 = torch.nn.Parameter(torch.randn(4, 6, 8))
        self.w2 = torch.nn.Parameter(torch.randn(4, 8, 6)); self.w3 = torch.nn.Parameter(torch.randn(4, 6, 8)) if w3 else None
        self.act, self.k, self.capacity = act, k, capacity
    def forward(self, x):
        return torch.ops.stepc.moe(x, self.r, self.w1, self.w2, self.w3, self.k, self.act,
                                   self.capacity).pow(2).mean()
for act, k, w3 in (("relu", 2, False), ("gelu", 5, False), ("swiglu", 2, False), ("gelu", 0, False)):
    try:
        stepc.export(M(act, k, w3), (torch.randn(3, 8),), sys.argv[1])
        print("NO ERROR", act, k, w3)
    except stepc.ExportError as e:
        print("ok:", str(e).rsplit(": ", 1)[-1] if "MoE" not in str(e) else str(e)[str(e).index("MoE"):])
# Experts whose w2 is laid out [E, hidden, dim] (not an nn.Linear's [E, dim, hidden]).
bad = M("gelu", 2, False)
bad.w2 = torch.nn.Parameter(torch.randn(4, 6, 8))
try:
    stepc.export(bad, (torch.randn(3, 8),), sys.argv[1])
    print("NO ERROR transposed w2")
except stepc.ExportError as e:
    print("ok:", str(e)[str(e).index("MoE"):])
# A capacity factor that is no number of pairs: refused at export, and by
# the module itself.
for capacity in (-1.0, float("inf"), float("nan")):
    try:
        stepc.export(M("gelu", 2, False, capacity), (torch.randn(3, 8),), sys.argv[1])
        print("NO ERROR capacity", capacity)
    except stepc.ExportError as e:
        print("ok:", str(e)[str(e).index("MoE"):])
    try:
        stepc.nn.MoE(8, 6, 4, capacity_factor=capacity)
        print("NO ERROR module capacity", capacity)
    except ValueError as e:
        print("ok:", e)
