"""stepc.nn.MoE loads a state dict with one tensor per expert, as other MoE
code writes it: Mixtral's names (experts.E.w1/w2/w3, the router as gate)
and DeepSeek's (gate_proj, down_proj, up_proj). Each loads into the stacked
weights in expert order and the module computes what the stacked original
does; a checkpoint missing an expert is refused by load_state_dict.

    check_moe_state_dict.py
"""
import torch
import stepc.nn

torch.manual_seed(0)
x = torch.randn(5, 8)
for activation in ("gelu", "swiglu"):
    source = stepc.nn.MoE(8, 6, experts=4, top_k=2, activation=activation)
    want = source(x)
    for layout in ("mixtral", "deepseek"):
        names = {"w1": "w1", "w2": "w2", "w3": "w3"} if layout == "mixtral" else \
                {"w1": "gate_proj", "w2": "down_proj", "w3": "up_proj"}
        per_expert = {("gate.weight" if layout == "mixtral" else "router.weight"): source.router.weight}
        for stacked in ("w1", "w2", "w3"):
            weight = getattr(source, stacked)
            if weight is None:
                continue
            for e in range(weight.shape[0]):
                per_expert[f"experts.{e}.{names[stacked]}.weight"] = weight[e].clone()
        # Inside a model too: the keys carry the module's prefix.
        model = torch.nn.Sequential(stepc.nn.MoE(8, 6, experts=4, top_k=2, activation=activation))
        model.load_state_dict({"0." + k: v for k, v in per_expert.items()})
        moe = model[0]
        same = all(torch.equal(getattr(moe, n), getattr(source, n))
                   for n in ("w1", "w2", "w3") if getattr(source, n) is not None)
        same = same and torch.equal(moe.router.weight, source.router.weight)
        print(f"{activation} {layout}: weights equal {same}, output equal {torch.equal(moe(x), want)}")
    del per_expert["experts.3.%s.weight" % names["w2"]]
    try:
        stepc.nn.MoE(8, 6, experts=4, top_k=2, activation=activation).load_state_dict(per_expert)
        print("NO ERROR")
    except RuntimeError as e:
        print("missing expert refused:", "size mismatch" in str(e) or "Missing key" in str(e))
