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

def Step_ScalarMathOpInterface : OpInterface<"ScalarMathOpInterface"> {
  let cppNamespace = "::stepc::step";
  let description = [{
    An elementwise op whose math on one element is a helper of
    runtime/kernels/elementwise_math.h, templated on the scalar type and
    named in the op's ODS (`Step_ScalarMath`): `stepc_<op>(operands...,
    flags...)`. The interpreter evaluates it in double through
    `evalScalar`; both back ends print a call to it in float; the FLOP
    rules, fusion and the emitters key off this interface, never a list of
    op names. Adding an elementwise op is its ODS def and its helper.
  }];
  let methods = [
    StaticInterfaceMethod<[{
        The helper's name in elementwise_math.h.
      }],
      "::llvm::StringRef", "getScalarHelper">,
    InterfaceMethod<[{
        Arguments the helper takes after the operands (the op's attributes,
        such as gelu's tanh form or pow's exponent), as doubles.
      }],
      "::llvm::SmallVector<double>", "getScalarFlags">,
    InterfaceMethod<[{
        Computes `result[i] = helper(operands[0][i], ..., flags...)` for
        `i < n` in double (the reference interpreter).
      }],
      "void", "evalScalar",
      (ins "::llvm::ArrayRef<const double *>":$operands, "double *":$result,
           "int64_t":$n)>
  ];
}

#endif // STEPC_DIALECT_STEP_IR_STEPINTERFACES_TD
