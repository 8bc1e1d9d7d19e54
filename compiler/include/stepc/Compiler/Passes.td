//===- Passes.td - target lowering passes of stepc ---------*- tablegen -*-===//
//
// Passes that depend on the target (what its kernels can compute), from the
// `step` training step towards `stepk` kernels. Target-independent
// transforms live in passes/.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_PASSES_TD
#define STEPC_COMPILER_PASSES_TD

include "mlir/Pass/PassBase.td"

def StepFuseElementwise : Pass<"step-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Fuse runs of elementwise ops into stepk.fused kernels";
  let description = [{
    In each training step (`step.train_step`), a run of consecutive
    elementwise ops (`ScalarMathOpInterface`, `step.convert`) over the same
    number of elements becomes one `stepk.fused` op: one loop on the CPU,
    one kernel on CUDA. Reshapes between members do not break a run (a
    reshape is the same elements). Values used only inside the run stay in
    registers; the op's results are the values used after it.

      fused(f_1 ... f_k) = (v_j for each v_j used after the run),
      v_i = f_i(inputs, v_<i) elementwise

    A run ends at an op that cannot join: not elementwise, another element
    count, `max-ops` members or `max-inputs` inputs reached, or (target
    cuda) an op cuBLASLt computes in a GEMM's epilogue (a bias add, a tanh
    GELU, its gradient, a widening convert). Runs of one op stay as they
    are. The fused op sits where the run's last member was; reshapes of its
    results used later move after it.

    ```mlir
    // before
    %h = step.add %x, %b : tensor<8x256xf32>
    %g = step.gelu %h : tensor<8x256xf32>
    // after (both %h and %g used later)
    %h, %g = stepk.fused %x, %b : (tensor<8x256xf32>, tensor<8x256xf32>) -> (tensor<8x256xf32>, tensor<8x256xf32>) {
    ^bb0(%a0: tensor<8x256xf32>, %a1: tensor<8x256xf32>):
      %0 = step.add %a0, %a1 : tensor<8x256xf32>
      %1 = step.gelu %0 : tensor<8x256xf32>
      stepk.yield %0, %1 : tensor<8x256xf32>, tensor<8x256xf32>
    }
    ```
  }];
  let dependentDialects = ["::stepc::stepk::StepKDialect"];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu or cuda (whose GEMM epilogues take some ops first)">,
    Option<"maxOps", "max-ops", "unsigned", /*default=*/"32",
           "most ops one kernel computes">,
    Option<"maxInputs", "max-inputs", "unsigned", /*default=*/"12",
           "most inputs one kernel reads">
  ];
}

#endif // STEPC_COMPILER_PASSES_TD
