//===- Passes.td - stepc passes ----------------------------*- tablegen -*-===//

#ifndef STEPC_TRANSFORMS_PASSES_TD
#define STEPC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def StepReport : Pass<"step-report", "mlir::ModuleOp"> {
  let summary = "Print the model report of each loss function as JSON";
  let description = [{
    For every function marked `step.loss`, prints one JSON object:

    - `params`, `param_tensors`, `param_bytes`: the parameters;
    - `matmul_params`: parameters used as a matmul operand (possibly through
      convert/reshape/transpose), the `P_matmul` of the FLOP formula: it
      includes a tied head and excludes positional tables, biases and norms;
    - `forward_flops`, `model_flops_per_step`: summed per-op cost rules
      (passes/lib/FlopCount.cpp): a matmul is 2·M·N·K forward and twice that
      backward; attention is QKᵀ and AV over the full T×T score matrix;
      elementwise ops, norms and the loss are not counted. Recomputation is
      not counted (model FLOPs, as in MFU).

    The IR is unchanged. An op without a cost rule is an error at its
    location.

    ```
    $ stepc-opt --step-report examples/gpt-capstone/model.mlir -o /dev/null
    {"function": "loss", "params": 875264, "matmul_params": 851968, ...,
     "model_flops_per_step": 24159191040, ...}
    ```
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "File to write the JSON to ('-' for standard output)">
  ];
}

#endif // STEPC_TRANSFORMS_PASSES_TD
