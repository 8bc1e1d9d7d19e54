//===- StepInterfaces.td - step dialect interfaces ---------*- tablegen -*-===//

#ifndef STEPC_DIALECT_STEP_IR_STEPINTERFACES_TD
#define STEPC_DIALECT_STEP_IR_STEPINTERFACES_TD

include "mlir/IR/OpBase.td"

def Step_AutodiffOpInterface : OpInterface<"AutodiffOpInterface"> {
  let cppNamespace = "::stepc::step";
  let description = [{
    An op with a reverse-mode rule. `buildVjp` receives the cotangent of each
    result (a null Value for a result nothing depends on) and appends one
    cotangent per operand: the vector-Jacobian product, or a null Value for
    operands with no gradient (integer ids, constants). Rules live in
    dialects/lib/Step/Autodiff/, one file per op family, each under its math.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the cotangents of the operands at the builder's insertion
        point. Fails (with a diagnostic at the op) only for configurations the
        rule does not cover.
      }],
      "::llvm::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // STEPC_DIALECT_STEP_IR_STEPINTERFACES_TD
