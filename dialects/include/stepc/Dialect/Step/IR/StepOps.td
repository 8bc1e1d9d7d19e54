//===- StepOps.td - step dialect operations ----------------*- tablegen -*-===//
//
// Every op works on statically shaped builtin tensors. Ops whose result type
// follows from their operands and attributes implement InferTypeOpInterface;
// their shape rules live in `inferReturnTypes` (StepOps.cpp), so a builder
// never needs a result type and a declared result type is checked against
// the inferred one. `broadcast`, `reshape` and `convert` take their result
// type from the IR: it is what they are asked to produce.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEP_IR_STEPOPS_TD
#define STEPC_DIALECT_STEP_IR_STEPOPS_TD

include "stepc/Dialect/Step/IR/StepDialect.td"
include "stepc/Dialect/Step/IR/StepAttrs.td"
include "stepc/Dialect/Step/IR/StepInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Step_FloatElement : AnyTypeOf<[F32, BF16, F16, F64]>;
/// A statically shaped tensor stepc compiles: every dim >= 1, at most 2^40
/// elements (isSupportedShape), so no size or FLOP count overflows.
class Step_TensorOf<list<Type> types>
    : ConfinedType<StaticShapeTensorOf<types>,
                   [CPred<"::stepc::step::isSupportedShape($_self)">],
                   StaticShapeTensorOf<types>.summary #
                   " with every dim >= 1 and at most 2^40 elements",
                   "::mlir::RankedTensorType">;
def Step_FloatTensor : Step_TensorOf<[F32, BF16, F16, F64]>;
def Step_IndexTensor : Step_TensorOf<[I32, I64]>;
/// A mask (comparisons' results, select's condition).
def Step_MaskTensor : Step_TensorOf<[I1]>;
/// Floats and integers: what comparisons, iota and argmax read or make.
def Step_NumberTensor : Step_TensorOf<[F32, BF16, F16, F64, I32, I64]>;
def Step_Tensor : Step_TensorOf<[F32, BF16, F16, F64, I32, I64, I1]>;

class Step_Op<string mnemonic, list<Trait> traits = []>
    : Op<Step_Dialect, mnemonic, !listconcat(traits, [Pure])>;

/// A forward op with a reverse-mode rule (dialects/lib/Step/Autodiff/).
def Step_Differentiable : DeclareOpInterfaceMethods<Step_AutodiffOpInterface>;

/// Computes no matrix product: by the FLOP convention (products only) it
/// counts zero, model and executed (stepc/Dialect/Step/IR/StepTraits.h).
/// An op without it needs a rule in passes/lib/FlopCount.cpp.
def Step_NoProductFlops : NativeOpTrait<"NoProductFlops"> {
  let cppNamespace = "::stepc";
}

/// Computes each row of its result from the same row of its first operand
/// and whole per-feature operands (a norm's weights): sequence parallelism
/// runs it on a rank's positions (stepc/Dialect/Step/IR/StepTraits.h).
def Step_RowWise : NativeOpTrait<"RowWise"> {
  let cppNamespace = "::stepc";
}

/// An op whose result type `inferReturnTypes` computes. Its verifier runs
/// the same rules, so a bad op gets one precise error instead of the
/// interface's generic "failed to infer returned types".
class Step_InferredOp<string mnemonic, list<Trait> traits = []>
    : Step_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptor])> {
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return verifyInferredResultType(*this);
    }
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// The ScalarMathOpInterface methods of an elementwise op whose element math
/// is `stepc_<mnemonic>` of runtime/kernels/elementwise_math.h, called with
/// the `arity` operands and then `flags` (C++ int expressions of the op's
/// attributes, comma-separated).
class Step_ScalarMathDecl<string mnemonic, string flags = ""> {
  string value = [{
    /// The helper of runtime/kernels/elementwise_math.h for one element.
    static ::llvm::StringRef getScalarHelper() { return "stepc_}] # mnemonic # [{"; }
    ::llvm::SmallVector<double> getScalarFlags() { return {}] # flags # [{}; }
    void evalScalar(::llvm::ArrayRef<const double *> operands, double *result,
                    int64_t n);
  }];
}
class Step_ScalarMathDef<string mnemonic, int arity, string flags = ""> {
  string value = [{
    void $cppClass::evalScalar(::llvm::ArrayRef<const double *> x, double *result,
                               int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        result[i] = ::stepc_}] # mnemonic # [{<double>(}]
      # !if(!eq(arity, 1), "x[0][i]",
            !if(!eq(arity, 2), "x[0][i], x[1][i]", "x[0][i], x[1][i], x[2][i]"))
      # !if(!empty(flags), "", ", " # flags) # [{);
    }
  }];
}

/// An elementwise op computed by its scalar helper.
class Step_ScalarMathOp<string mnemonic, int arity, list<Trait> traits = [],
                        string flags = "">
    : Step_Op<mnemonic, !listconcat(traits,
        [SameOperandsAndResultType, Elementwise, InferTypeOpInterface,
         Step_ScalarMathOpInterface])> {
  let extraClassDeclaration = Step_ScalarMathDecl<mnemonic, flags>.value;
  let extraClassDefinition = Step_ScalarMathDef<mnemonic, arity, flags>.value;
}

class Step_UnaryOp<string mnemonic, string math, list<Trait> traits = []>
    : Step_ScalarMathOp<mnemonic, 1, !listconcat(traits, [Step_Differentiable])> {
  let summary = "elementwise " # math;
  let description = "Computes `" # math # "` elementwise.\n\n"
    "```mlir\n%y = step." # mnemonic # " %x : tensor<8x64xf32>\n```";
  let arguments = (ins Step_FloatTensor:$input);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Step_NegOp : Step_UnaryOp<"neg", "y = -x">;

def Step_RoundFp8Op : Step_ScalarMathOp<"round_fp8", 1, [Step_Differentiable],
                                        "static_cast<double>(getFormat())"> {
  let summary = "elementwise rounding to an 8-bit float, kept in the input's type";
  let description = [{
    Each element becomes the nearest value of the 8-bit format (ties to the
    even mantissa), as Hopper's `cvt.rn.satfinite` rounds: `e4m3` (OCP's
    E4M3FN: 4 exponent bits, bias 7, 3 mantissa bits, subnormals down to
    2⁻⁹, largest 448, no infinity) or `e5m2` (bias 15, 2 mantissa bits,
    subnormals down to 2⁻¹⁶, largest 57344). Beyond the largest finite
    value (and ±inf) it saturates to ±largest; NaN stays NaN; the sign of
    zero is kept. The result keeps the input's element type: fp8 training
    emulated exactly (a tensor rounded before the product its scaled values
    feed). The gradient passes straight through (`dx = dy`).

    ```mlir
    %q = step.round_fp8 %x format e4m3 : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, Step_Fp8FormatAttr:$format);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `format` $format attr-dict `:` type($input)";
}
def Step_ExpOp : Step_UnaryOp<"exp", "y = exp(x)">;
def Step_LogOp : Step_UnaryOp<"log", "y = log(x)">;
def Step_TanhOp : Step_UnaryOp<"tanh", "y = tanh(x)">;
def Step_ErfOp : Step_UnaryOp<"erf", "y = erf(x)">;
def Step_SqrtOp : Step_UnaryOp<"sqrt", "y = sqrt(x)">;
def Step_RsqrtOp : Step_UnaryOp<"rsqrt", "y = 1 / sqrt(x)">;
def Step_SiluOp : Step_UnaryOp<"silu", "y = x * sigmoid(x)">;
def Step_ReluOp : Step_UnaryOp<"relu", "y = max(x, 0)">;
def Step_SigmoidOp : Step_UnaryOp<"sigmoid", "y = 1 / (1 + exp(-x))">;
def Step_SoftplusOp : Step_UnaryOp<"softplus", "y = log(1 + exp(x))">;
def Step_AbsOp : Step_UnaryOp<"abs", "y = |x|">;
def Step_StopGradientOp : Step_UnaryOp<"stop_gradient", "y = x"> {
  let summary = "the identity, through which no gradient flows";
  let description = [{
    `y = x`, but the reverse pass sends nothing back to `x` (PyTorch's
    `detach()` and values computed under `torch.no_grad()`, JAX's
    `stop_gradient`): a straight-through estimator `x + stop_gradient(q - x)`,
    a baseline or a target that must not be trained through. It stays an
    elementwise identity after autodiff and fuses with its neighbours.

    ```mlir
    %t = step.stop_gradient %v : tensor<8x64xf32>
    ```
  }];
}

def Step_PowOp : Step_ScalarMathOp<"pow", 1, [Step_Differentiable],
                                   "getExponent().convertToDouble()"> {
  let summary = "elementwise power by a constant exponent";
  let description = [{
    `y = x^p` for a constant `p` (`torch.pow(x, p)`): `x·x` for p = 2 (as
    PyTorch squares), `powf(x, p)` otherwise; a negative `x` to a
    non-integer power is NaN, as in PyTorch.

    ```mlir
    %y = step.pow %x exponent 2.000000e+00 : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, F64Attr:$exponent);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `exponent` $exponent attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Step_GeluOp : Step_ScalarMathOp<"gelu", 1, [Step_Differentiable],
                                    "isTanhApproximation() ? 1.0 : 0.0"> {
  let summary = "elementwise GELU, exact or tanh-approximated";
  let description = [{
    Exact (the default, PyTorch's `approximate='none'`):
    `y = x/2 · (1 + erf(x/√2))`. With `approximate tanh` (GPT-2's):
    `y = x/2 · (1 + tanh(√(2/π) · (x + 0.044715·x³)))`.

    ```mlir
    %y = step.gelu %x : tensor<8x64x256xf32>
    %z = step.gelu %x approximate tanh : tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input,
                       OptionalAttr<Step_GeluApproximationAttr>:$approximate);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
    "$input (`approximate` $approximate^)? attr-dict `:` type($input)";
  let extraClassDeclaration = [{
    /// True for the tanh approximation, false for the exact erf form.
    bool isTanhApproximation() {
      return getApproximate() == GeluApproximation::Tanh;
    }
  }] # Step_ScalarMathDecl<"gelu", "isTanhApproximation() ? 1.0 : 0.0">.value;
}

class Step_BinaryOp<string mnemonic, string math, list<Trait> traits = []>
    : Step_ScalarMathOp<mnemonic, 2, !listconcat(traits, [Step_Differentiable])> {
  let summary = "elementwise " # math;
  let description = "Computes `" # math # "` elementwise on operands of one "
    "type. Broadcasting is explicit: use `step.broadcast`.\n\n"
    "```mlir\n%z = step." # mnemonic # " %x, %y : tensor<8x64xf32>\n```";
  let arguments = (ins Step_FloatTensor:$lhs, Step_FloatTensor:$rhs);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Step_AddOp : Step_BinaryOp<"add", "z = x + y", [Commutative]>;
def Step_SubOp : Step_BinaryOp<"sub", "z = x - y">;
def Step_MulOp : Step_BinaryOp<"mul", "z = x * y", [Commutative]>;
def Step_DivOp : Step_BinaryOp<"div", "z = x / y">;
def Step_MaximumOp : Step_BinaryOp<"maximum", "z = max(x, y)", [Commutative]>;
def Step_MinimumOp : Step_BinaryOp<"minimum", "z = min(x, y)", [Commutative]>;

def Step_CompareOp : Step_InferredOp<"compare",
    [Step_Differentiable, Elementwise, SameTypeOperands, Step_ScalarMathOpInterface]> {
  let summary = "elementwise comparison, a mask";
  let description = [{
    `m = x <predicate> y` elementwise (`lt`, `le`, `gt`, `ge`, `eq`, `ne`;
    `torch.lt` ... `torch.ne`), an `i1` mask of the operands' shape. A NaN
    compares false except under `ne`. Masks feed `step.select` or a
    `step.convert` to numbers; they have no gradient.

    ```mlir
    %m = step.compare lt, %x, %y : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Step_ComparePredicateAttr:$predicate, Step_NumberTensor:$lhs,
                       Step_NumberTensor:$rhs);
  let results = (outs Step_MaskTensor:$result);
  let assemblyFormat = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs)";
  let extraClassDeclaration =
    Step_ScalarMathDecl<"compare", "static_cast<double>(getPredicate())">.value;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return verifyInferredResultType(*this);
    }
  }] # Step_ScalarMathDef<"compare", 2, "static_cast<double>(getPredicate())">.value;
}

def Step_SelectOp : Step_Op<"select",
    [Step_Differentiable, Elementwise, SameOperandsAndResultShape,
     AllTypesMatch<["on_true", "on_false"]>, InferTypeOpAdaptor, Step_ScalarMathOpInterface]> {
  let summary = "elementwise choice by a mask";
  let description = [{
    `z = m ? x : y` elementwise (`torch.where(m, x, y)`). The gradient flows
    to `x` where the mask holds and to `y` where it does not; the mask has
    none.

    ```mlir
    %z = step.select %m, %x, %y : tensor<8x64xi1>, tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Step_MaskTensor:$condition, Step_Tensor:$on_true,
                       Step_Tensor:$on_false);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$condition `,` $on_true `,` $on_false attr-dict `:` "
                       "type($condition) `,` type($on_true)";
  let extraClassDeclaration = Step_ScalarMathDecl<"select">.value;
  let extraClassDefinition = Step_ScalarMathDef<"select", 3>.value;
}

def Step_IotaOp : Step_Op<"iota", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "each element's index along one dimension";
  let description = [{
    `y[i_0, ..., i_n] = i_dim` (`torch.arange` broadcast along the other
    dimensions), as floats or integers. Its shape is its own: a loss's batch
    split or micro-batches leave it whole (broadcast it to a batch shape).
    The back ends fold it into a constant.

    ```mlir
    %pos = step.iota dim 1 : tensor<64x64xi32>
    ```
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs Step_NumberTensor:$result);
  let assemblyFormat = "`dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Step_ArgmaxOp : Step_InferredOp<"argmax", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "index of the largest element along one dimension";
  let description = [{
    Reduces `dim` to the index (i32) of its largest element, the first on
    ties (`torch.argmax(x, dim)`); NaN counts as largest, as in PyTorch.
    No gradient: an eval-time op (predictions, accuracy).

    ```mlir
    %pred = step.argmax %logits dim 2 : (tensor<8x64x512xf32>) -> tensor<8x64xi32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Step_IndexTensor:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` functional-type(operands, results)";
}

def Step_GatherOp : Step_InferredOp<"gather", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "elements picked along one dimension by an index tensor";
  let description = [{
    `torch.gather(x, dim, index)`: `y[..., k, ...] = x[..., index[..., k,
    ...], ...]` with `k` along `dim`. `index` has `x`'s rank and shape except
    along `dim`; the result has `index`'s shape. An index outside
    `[0, x.shape[dim])` reads 0 and takes no gradient. The gradient is
    `step.gather_grad` (a scatter-add, deterministic).

    ```mlir
    %y = step.gather %x, %idx dim 1
        : (tensor<8x512xf32>, tensor<8x4xi32>) -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, Step_IndexTensor:$index, I64Attr:$dim);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `,` $index `dim` $dim attr-dict `:` "
                       "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Mixture of experts: routing, dispatch, grouped products, combine
//===----------------------------------------------------------------------===//

def Step_TopKOp : Step_InferredOp<"top_k", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "the k largest elements along the last dimension, and their indices";
  let description = [{
    `torch.topk(x, k, dim=-1)` with a fixed order: values descending, ties
    broken toward the lower index (NaN counts as largest, as in
    `step.argmax`). The indices are i32. The values' gradient is scattered
    back to the chosen positions (`step.gather_grad`); the indices get none.
    An MoE router's choice of experts.

    ```mlir
    %gate, %expert = step.top_k %probs k 2
        : (tensor<512x8xf32>) -> (tensor<512x2xf32>, tensor<512x2xi32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, ConfinedAttr<I64Attr, [IntPositive]>:$k);
  let results = (outs Step_FloatTensor:$values, Step_IndexTensor:$indices);
  let assemblyFormat = "$input `k` $k attr-dict `:` functional-type(operands, results)";
}

def Step_MoeDispatchOp : Step_InferredOp<"moe_dispatch",
    [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "token rows grouped by the experts they are routed to";
  let description = [{
    `input` is `[N, D]` (N tokens), `experts` `[N, K]` (each token's K
    experts, from `step.top_k`). The result `rows` is `[N·K, D]`: token `n`'s
    row copied once for each of its experts, the copies sorted by expert and,
    within an expert, by `(n, k)` (a stable counting sort: deterministic);
    `counts` (`[E]`, i32) is how many rows each expert got. Dropless: every
    (token, expert) pair has its row, and the buffer's size is static
    (N·K) however the tokens split. An expert index outside `[0, E)` takes no
    row (its slot at the end stays zero). The gradient of `input` is
    `step.moe_combine` of the rows' gradient with gates of 1.

    With `groups G` (expert parallelism: G ranks of E/G experts each) the
    rows are `[G·N·K, D]`: G blocks of N·K rows, block g holding the pairs
    of experts `[g·E/G, (g+1)·E/G)` in the same order, then zeros; block g
    is what goes to the g-th rank.

    With `capacity C per S` (a capacity factor: a fixed envelope instead of
    dropless), each expert keeps at most C pairs of each run of S tokens
    (a sequence), the first in `(n, k)` order; the others are dropped (no
    row, not counted: their combine term is 0). A block then has
    `min(N·K, (N/S)·(E/G)·C)` rows. Per sequence, so splitting the batch
    between ranks or micro-batches drops the same pairs.

    ```mlir
    %rows, %counts = step.moe_dispatch %x, %expert experts 8
        : (tensor<512x64xf32>, tensor<512x2xi32>) -> (tensor<1024x64xf32>, tensor<8xi32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, Step_IndexTensor:$experts,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$groups,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$capacity,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$segment);
  let results = (outs Step_FloatTensor:$rows, Step_IndexTensor:$counts);
  let assemblyFormat = "$input `,` $experts `experts` $num_experts (`groups` $groups^)? "
                       "(`capacity` $capacity^ `per` $segment)? attr-dict "
                       "`:` functional-type(operands, results)";
}

def Step_MoeCombineOp : Step_InferredOp<"moe_combine",
    [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "each token's expert outputs, weighted by its gates and summed";
  let description = [{
    The inverse of `step.moe_dispatch` on the same `experts`: `rows` is
    `[N·K, D]` in dispatch order, `gates` `[N, K]`; the result is `[N, D]`
    with `out[n] = Σ_k gates[n, k] · rows[slot(n, k)]`, `slot` the row
    `step.moe_dispatch` gave the pair (a pair with an expert outside
    `[0, E)` adds nothing). The gradient is `step.moe_combine_grad`.
    With `groups G`, `rows` is `[G·N·K, D]` in the grouped dispatch's order;
    with `capacity C per S`, the capacity dispatch's rows (a dropped pair
    adds nothing).

    ```mlir
    %y = step.moe_combine %out_rows, %gate, %expert experts 8
        : (tensor<1024x64xf32>, tensor<512x2xf32>, tensor<512x2xi32>) -> tensor<512x64xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$rows, Step_FloatTensor:$gates,
                       Step_IndexTensor:$experts,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$groups,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$capacity,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$segment);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$rows `,` $gates `,` $experts `experts` $num_experts "
                       "(`groups` $groups^)? (`capacity` $capacity^ `per` $segment)? "
                       "attr-dict `:` functional-type(operands, results)";
}

def Step_GroupedMatmulOp : Step_InferredOp<"grouped_matmul", [Step_Differentiable]> {
  let summary = "each expert's rows times that expert's matrix";
  let description = [{
    `lhs` is `[M, K]`, rows grouped by expert as `step.moe_dispatch` leaves
    them: the first `counts[0]` rows are expert 0's, the next `counts[1]`
    expert 1's, and so on (rows past the sum of the counts give 0). `rhs` is
    `[E, K, N]`, or `[E, N, K]` with `transpose_b` (each expert an
    `nn.Linear` weight). The result is `[M, N]`: expert `e`'s rows times its
    matrix. Its FLOPs are `2·M·N·K` however the rows split: the size of the
    product is static, as the dispatched rows are.

    With counts `[B, E]` (expert parallelism: the rows received from B
    ranks), `lhs` is B equal blocks of M/B rows, block b's rows grouped by
    `counts[b]` (rows past them give 0); its FLOPs are counted for M/B
    rows, a rank's share on average.

    ```mlir
    %h = step.grouped_matmul %rows, %w1, %counts transpose_b
        : (tensor<1024x64xf32>, tensor<8x256x64xf32>, tensor<8xi32>) -> tensor<1024x256xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$lhs, Step_FloatTensor:$rhs, Step_IndexTensor:$counts,
                       UnitAttr:$transpose_b);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs `,` $counts (`transpose_b` $transpose_b^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// fp8 emulation: tile-scaled rounding
//===----------------------------------------------------------------------===//

def Step_QuantizeFp8Op : Step_InferredOp<"quantize_fp8",
    [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "fp8 rounding of each tile at its own scale, kept in the input's type";
  let description = [{
    Cuts the last two dimensions into tiles of `tile` = [r, c] (edge tiles
    smaller; leading dimensions are separate matrices); each tile is scaled
    by `s = 2^k`, the largest power of two with `s · amax ≤` the format's
    largest value (`s = 1` for a tile of zeros or with a non-finite value),
    rounded as `step.round_fp8` and scaled back: `y = round_fp8(s·x) / s`.
    Powers of two keep the scaling exact (MXFP8's E8M0 scales), so the only
    rounding is the fp8 one. DeepSeek-V3's recipe: [1, 128] tiles for
    activations and gradients, [128, 128] blocks for weights. The gradient
    passes straight through.

    ```mlir
    %xq = step.quantize_fp8 %x format e4m3 tile [1, 128] : tensor<512x768xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, Step_Fp8FormatAttr:$format,
                       DenseI64ArrayAttr:$tile);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `format` $format `tile` $tile attr-dict `:` type($input)";
}

def Step_QuantizeGradFp8Op : Step_InferredOp<"quantize_grad_fp8",
    [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "the identity, whose gradient is fp8-rounded by tiles";
  let description = [{
    Forward `y = x`; backward `dx = quantize_fp8(dy)` with this op's format
    and tile: what an fp8 linear layer does to its output's gradient before
    the products that make its input's and weight's (e5m2 in [1, 128]
    tiles, DeepSeek-V3's recipe). step-autodiff builds the rounding and
    removes the op.

    ```mlir
    %y2 = step.quantize_grad_fp8 %y format e5m2 tile [1, 128] : tensor<512x768xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, Step_Fp8FormatAttr:$format,
                       DenseI64ArrayAttr:$tile);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `format` $format `tile` $tile attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Constants, dtype, shape
//===----------------------------------------------------------------------===//

def Step_ConstantOp : Step_InferredOp<"constant",
    [ConstantLike, Step_Differentiable, Step_NoProductFlops]> {
  let summary = "a constant tensor";
  let description = [{
    ```mlir
    %half = step.constant dense<0.5> : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Step_ConvertOp : Step_Op<"convert",
    [Step_Differentiable, SameOperandsAndResultShape, Step_NoProductFlops]> {
  let summary = "element type conversion";
  let description = [{
    Converts each element to the result's element type: float to float
    rounds to nearest even; integer to float is exact where representable;
    float to integer truncates toward zero (`.long()`, values beyond i32
    undefined); to `i1` tests `!= 0`, from `i1` gives 0 or 1. Only
    float-to-float conversions have a gradient.

    ```mlir
    %h = step.convert %x : tensor<8x64xf32> -> tensor<8x64xbf16>
    ```
  }];
  let arguments = (ins Step_Tensor:$input);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Step_BroadcastOp : Step_Op<"broadcast", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "broadcast to a larger shape, NumPy style";
  let description = [{
    Aligns the operand's dimensions with the trailing dimensions of the
    result; each operand dimension is either 1 or equal to the result's.

    ```mlir
    %b = step.broadcast %bias : tensor<64xf32> -> tensor<8x128x64xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$input);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Step_ReshapeOp : Step_Op<"reshape", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "reshape to a shape with as many elements";
  let description = [{
    Row-major reinterpretation of the operand's elements.

    ```mlir
    %y = step.reshape %x : tensor<8x128x64xf32> -> tensor<1024x64xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$input);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Step_TransposeOp : Step_InferredOp<"transpose", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "permute dimensions";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`.

    ```mlir
    %y = step.transpose %x [0, 2, 1] : (tensor<8x128x64xf32>) -> tensor<8x64x128xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat =
    "$input $permutation attr-dict `:` functional-type(operands, results)";
}

def Step_SliceOp : Step_InferredOp<"slice", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "a contiguous box of the operand";
  let description = [{
    Takes `sizes[i]` elements starting at `offsets[i]` along every dimension
    `i` (unit stride).

    ```mlir
    %q = step.slice %qkv offsets [0, 0, 64] sizes [8, 128, 64]
        : (tensor<8x128x192xf32>) -> tensor<8x128x64xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$input `offsets` $offsets `sizes` $sizes attr-dict "
                       "`:` functional-type(operands, results)";
}

def Step_PadOp : Step_InferredOp<"pad", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "pad with zeros";
  let description = [{
    Adds `low[i]` zeros before and `high[i]` zeros after dimension `i`: the
    transpose of `step.slice`, hence its gradient.

    ```mlir
    %d = step.pad %dq low [0, 0, 64] high [0, 0, 64]
        : (tensor<8x128x64xf32>) -> tensor<8x128x192xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `low` $low `high` $high attr-dict "
                       "`:` functional-type(operands, results)";
}

def Step_ConcatOp : Step_InferredOp<"concat", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "concatenate along one dimension";
  let description = [{
    ```mlir
    %y = step.concat %a, %b dim 1
        : (tensor<8x64xf32>, tensor<8x32xf32>) -> tensor<8x96xf32>
    ```
  }];
  let arguments = (ins Variadic<Step_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat =
    "$inputs `dim` $dim attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Step_ReduceOp<string mnemonic, string math>
    : Step_InferredOp<mnemonic, [Step_Differentiable, Step_NoProductFlops]> {
  let summary = math # " over the given dimensions";
  let description = "Reduces `dims` (sorted, distinct) with " # math # "; with "
    "`keep_dims` the reduced dimensions stay as size 1.\n\n"
    "```mlir\n%y = step." # mnemonic # " %x dims [2] keep_dims\n"
    "    : (tensor<8x128x64xf32>) -> tensor<8x128x1xf32>\n```";
  let arguments = (ins Step_FloatTensor:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keep_dims);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `dims` $dims (`keep_dims` $keep_dims^)? "
                       "attr-dict `:` functional-type(operands, results)";
}

def Step_ReduceSumOp : Step_ReduceOp<"reduce_sum", "sum">;
def Step_ReduceMaxOp : Step_ReduceOp<"reduce_max", "maximum">;
def Step_ReduceMeanOp : Step_ReduceOp<"reduce_mean", "arithmetic mean">;

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Step_MatmulOp : Step_InferredOp<"matmul", [Step_Differentiable]> {
  let summary = "matrix product of a batch of rows and a matrix";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_a`), `rhs` is
    `[K, N]` (`[N, K]` with `transpose_b`, the layout of PyTorch's
    `nn.Linear.weight`); the result is `[..., M, N]`. Leading dimensions of
    `lhs` are batch dimensions sharing the one `rhs`.

    ```mlir
    %y = step.matmul %x, %w transpose_b
        : (tensor<8x128x64xf32>, tensor<256x64xf32>) -> tensor<8x128x256xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$lhs, Step_FloatTensor:$rhs,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs (`transpose_a` $transpose_a^)? "
    "(`transpose_b` $transpose_b^)? attr-dict `:` "
    "functional-type(operands, results)";
}

def Step_BatchMatmulOp : Step_InferredOp<"batch_matmul", [Step_Differentiable]> {
  let summary = "batched matrix product";
  let description = [{
    `lhs` is `[B..., M, K]`, `rhs` is `[B..., K, N]` with the same batch
    dimensions; `transpose_a` / `transpose_b` swap the last two dimensions of
    the operand. The result is `[B..., M, N]`.

    ```mlir
    %s = step.batch_matmul %q, %k transpose_b
        : (tensor<8x4x128x16xf32>, tensor<8x4x128x16xf32>) -> tensor<8x4x128x128xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$lhs, Step_FloatTensor:$rhs,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs (`transpose_a` $transpose_a^)? "
    "(`transpose_b` $transpose_b^)? attr-dict `:` "
    "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Composite ops
//===----------------------------------------------------------------------===//

def Step_EmbeddingOp : Step_InferredOp<"embedding", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "gather rows of a table";
  let description = [{
    `result[i..., :] = table[ids[i...], :]` for a `[V, D]` table. An id
    outside `[0, V)` is a runtime error.

    With `shard %first of N` (vocabulary parallelism) the table holds rows
    `[first, first + V)` of an `N`-row table: ids are checked against `N`,
    and an id outside this rank's rows gives a zero row, so the sum over
    the ranks holding the shards is the whole lookup. `first` is a scalar
    i32 (step-shard-tensor takes it from `mesh.all_slice`).

    ```mlir
    %x = step.embedding %wte, %tokens
        : (tensor<512x64xf32>, tensor<8x128xi32>) -> tensor<8x128x64xf32>
    %part = step.embedding %wte_shard, %tokens shard %first of 512
        : (tensor<256x64xf32>, tensor<8x128xi32>, tensor<i32>) -> tensor<8x128x64xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$table, Step_IndexTensor:$ids,
                       Optional<0DTensorOf<[I32]>>:$first_row,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$num_ids);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
    "$table `,` $ids (`shard` $first_row^ `of` $num_ids)? attr-dict `:` "
    "functional-type(operands, results)";
}

def Step_LayerNormOp : Step_InferredOp<"layer_norm", [Step_Differentiable, Step_NoProductFlops, Step_RowWise]> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    `y = (x - mean(x)) / sqrt(var(x) + epsilon) · weight + bias` over the last
    dimension `D`, with the biased variance (PyTorch's `nn.LayerNorm`).
    `weight` and `bias` are `[D]`.

    ```mlir
    %y = step.layer_norm %x, %w, %b
        : (tensor<8x128x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x128x64xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, Step_FloatTensor:$weight,
                       Step_FloatTensor:$bias,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight `,` $bias attr-dict `:` "
                       "functional-type(operands, results)";
}

def Step_RmsNormOp : Step_InferredOp<"rms_norm", [Step_Differentiable, Step_NoProductFlops, Step_RowWise]> {
  let summary = "RMS normalisation over the last dimension";
  let description = [{
    `y = x / sqrt(mean(x²) + epsilon) · weight` over the last dimension `D`
    (Llama's `RMSNorm`). `weight` is `[D]`.

    ```mlir
    %y = step.rms_norm %x, %w {epsilon = 1.0e-06 : f64}
        : (tensor<8x256x128xf32>, tensor<128xf32>) -> tensor<8x256x128xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, Step_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` "
                       "functional-type(operands, results)";
}

/// Lets step-lower-library-calls call the kernel library once for the op:
/// `stepc_<target>_<mnemonic>(operands..., outer, n, inner, result)`, with
/// `n` the length of `dim`, `outer` the lines before it and `inner` after
/// (stepc/Dialect/Step/IR/StepTraits.h).
def Step_LineKernel : NativeOpTrait<"LineKernel"> {
  let cppNamespace = "::stepc";
}

/// An op that computes each line along `dim` (the elements that differ
/// only in their `dim` index) from the same line of each operand. Operands
/// and result are of one type (the last operand's; an earlier one is a
/// gradient). The shape rule, verifier, FLOP rule and kernel call are all
/// declared here: such an op's own code is its math (VJP, interpreter,
/// kernels).
class Step_LineOp<string mnemonic, list<Trait> traits = []>
    : Step_InferredOp<mnemonic, !listconcat(traits, [Step_LineKernel, Step_NoProductFlops])> {
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return verifyInferredResultType(*this);
    }
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferLineType<$cppClass>(loc, adaptor.getOperands(), adaptor.getDim(), types);
    }
  }];
}

def Step_SoftmaxOp : Step_LineOp<"softmax", [Step_Differentiable]> {
  let summary = "softmax along one dimension";
  let description = [{
    `y = exp(x - max(x)) / sum(exp(x - max(x)))` along `dim`.

    ```mlir
    %p = step.softmax %x dim 2 : (tensor<8x128x512xf32>) -> tensor<8x128x512xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
    "$input `dim` $dim attr-dict `:` functional-type(operands, results)";
}

def Step_LogSoftmaxOp : Step_LineOp<"log_softmax", [Step_Differentiable]> {
  let summary = "log of softmax along one dimension";
  let description = [{
    `y = x - max(x) - log(sum(exp(x - max(x))))` along `dim`: the log-
    probabilities of a policy or a distillation loss, without the
    cancellation of `log(softmax(x))` where a probability underflows.

    ```mlir
    %lp = step.log_softmax %logits dim 2 : (tensor<8x128x512xf32>) -> tensor<8x128x512xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
    "$input `dim` $dim attr-dict `:` functional-type(operands, results)";
}

def Step_CumsumOp : Step_LineOp<"cumsum", [Step_Differentiable]> {
  let summary = "inclusive cumulative sum along one dimension";
  let description = [{
    `y_i = x_0 + ... + x_i` along `dim` (`torch.cumsum`): position ids from a
    padding mask, discounted returns, running totals.

    ```mlir
    %y = step.cumsum %x dim 1 : (tensor<8x128xf32>) -> tensor<8x128xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
    "$input `dim` $dim attr-dict `:` functional-type(operands, results)";
}

def Step_DropoutOp : Step_InferredOp<"dropout",
                                      [Step_Differentiable, AttrSizedOperandSegments,
                                       Step_NoProductFlops]> {
  let summary = "inverted dropout whose mask depends only on (seed, step, stream, element)";
  let description = [{
    `y = x · keep / (1 - rate)`, where `keep` is drawn per element by
    Philox-4x32-10 (runtime/kernels/philox.h) under key `(seed, stream)` and
    counter `(global index, step)`. The global index is the element's
    row-major position in the whole tensor: with `rows from %first` the
    operand holds rows `[first, first + dim0)` of it, so a data-parallel rank
    or a micro-batch draws exactly its slice of the one-rank mask. The mask
    is a function, never a tensor: the gradient draws it again (the VJP is
    the same dropout of `dy`), remat recomputes it, and no rank, target or
    schedule changes it.

    A model writes it unkeyed; the training step binds `seed` (the run's
    `--seed`, a `#step.hyper<seed>` argument) and `step` (the step number),
    and the evaluation step removes it. An unkeyed dropout draws with seed 0
    at step 0. `stream` tells a model's dropouts apart: unique per op.

    ```mlir
    %y = step.dropout %x rate 1.000000e-01 stream 2 : (tensor<8x64x128xf32>) -> tensor<8x64x128xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, Optional<0DTensorOf<[I32]>>:$seed,
                       Optional<0DTensorOf<[F32, F64]>>:$step,
                       Optional<0DTensorOf<[I32]>>:$first_row,
                       F64Attr:$rate, I64Attr:$stream);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
    "$input (`seed` $seed^ `step` $step)? (`rows` `from` $first_row^)? `rate` $rate "
    "`stream` $stream attr-dict `:` functional-type(operands, results)";
}

def Step_AttentionOp : Step_InferredOp<"attention", [Step_Differentiable]> {
  let summary = "scaled dot-product attention with grouped-query heads";
  let description = [{
    Layout (llm.c's): `query` is `[B, T, Hq·Dh]`, `key` and `value` are
    `[B, T, Hkv·Dh]`, heads side by side along the last dimension (head `h`
    owns channels `[h·Dh, (h+1)·Dh)`). Query head `h` attends with key/value
    head `h / (Hq/Hkv)`, so `Hq` must be a multiple of `Hkv` (`Hkv = Hq` is
    multi-head attention, `Hkv = 1` multi-query). For each head:

    `out = softmax(scale · Q Kᵀ + mask) V`

    with `scale = 1/sqrt(Dh)` unless given, and with `causal` the mask hides
    key positions after the query position. The result is `[B, T, Hq·Dh]`.

    An optional `mask` (f32, `[Bm, Hm, Tqm, Tk]` with `Bm` 1 or B, `Hm` 1 or
    Hq, `Tqm` 1 or Tq: broadcast as PyTorch broadcasts an `attn_mask`) is
    added to the scaled scores: 0 where a key is seen, -inf where it is
    hidden, any other value a bias. A query row whose every key is hidden
    gives 0 (as PyTorch 2.5's SDPA does), not NaN. The mask is a constant of
    the step: no gradient flows to it, and step-autodiff refuses one
    computed from a parameter.

    ```mlir
    %o = step.attention %q, %k, %v heads 4 kv_heads 2 head_dim 32 causal
        : (tensor<8x256x128xf32>, tensor<8x256x64xf32>, tensor<8x256x64xf32>)
        -> tensor<8x256x128xf32>
    %p = step.attention %q, %k, %v mask %pad heads 4 kv_heads 2 head_dim 32
        : (tensor<8x256x128xf32>, tensor<8x256x64xf32>, tensor<8x256x64xf32>,
           tensor<8x1x1x256xf32>) -> tensor<8x256x128xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$query, Step_FloatTensor:$key,
                       Step_FloatTensor:$value, Optional<Step_FloatTensor>:$mask,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$query `,` $key `,` $value (`mask` $mask^)? `heads` $num_heads "
    "`kv_heads` $num_kv_heads `head_dim` $head_dim (`causal` $causal^)? "
    "attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// The softmax scale: `scale` if set, else 1/sqrt(head_dim).
    double getEffectiveScale();
  }];
}

def Step_RotaryOp : Step_InferredOp<"rotary", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "rotary position embedding";
  let description = [{
    Rotates each head of a `[B, T, H·Dh]` tensor by its position `t` along
    dimension 1 (Meta's Llama convention, adjacent pairs):

    ```
    θ_i = theta^(-2i/Dh),   i = 0 .. Dh/2 - 1
    y[2i]   = x[2i] · cos(t·θ_i) - x[2i+1] · sin(t·θ_i)
    y[2i+1] = x[2i] · sin(t·θ_i) + x[2i+1] · cos(t·θ_i)
    ```

    `head_dim` must be even. With `inverse` the rotation is by `-t·θ_i`: the
    transpose of the forward rotation, hence its gradient.

    ```mlir
    %q2 = step.rotary %q head_dim 32 : (tensor<8x256x128xf32>) -> tensor<8x256x128xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       DefaultValuedAttr<F64Attr, "10000.0">:$theta,
                       UnitAttr:$inverse);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `head_dim` $head_dim (`inverse` $inverse^)? "
                       "attr-dict `:` functional-type(operands, results)";
}

def Step_CrossEntropyOp : Step_InferredOp<"cross_entropy",
    [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "softmax cross-entropy, mean over the counted positions";
  let description = [{
    For `logits` `[..., V]` and integer `targets` `[...]`, each position `i`
    whose target is not `ignore_index` is counted and adds

    `(1 - ε)·(lse_i - x_i[t_i]) + ε·(lse_i - mean_j x_i[j]) + z·lse_i²`

    where `lse_i = logsumexp(x_i)`, `ε` is `label_smoothing` (PyTorch's:
    the smoothed target puts `ε/V` on every class) and `z` is `z_loss`
    (PaLM's auxiliary `z·log²Z`, 1e-4 there). The loss is that sum over
    the denominator `count` when given, else over the number of counted
    positions; a zero denominator (nothing counted) gives a zero loss and
    gradient rather than PyTorch's NaN. A target outside `[0, V)` that is
    not `ignore_index` is a runtime error. The loss is a scalar, f32 for
    f32/bf16/f16 logits (the loss is always accumulated in at least f32),
    f64 for f64.

    `count` is how a batch split keeps the loss exact: a data-parallel rank
    or a micro-batch sees only its rows, so the step passes the counted
    positions of the whole batch (a `step.token_count` summed over ranks)
    divided by the number of parts, and the mean over the parts is the
    whole batch's mean over its counted tokens.

    ```mlir
    %loss = step.cross_entropy %logits, %targets
        : (tensor<8x128x512xf32>, tensor<8x128xi32>) -> tensor<f32>
    %sft = step.cross_entropy %logits, %targets ignore_index -100 label_smoothing 1.000000e-01
        : (tensor<8x128x512xf32>, tensor<8x128xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$logits, Step_IndexTensor:$targets,
                       Optional<0DTensorOf<[F32, F64]>>:$count,
                       OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<F64Attr>:$label_smoothing,
                       OptionalAttr<F64Attr>:$z_loss);
  let results = (outs 0DTensorOf<[F32, F64]>:$result);
  let assemblyFormat =
    "$logits `,` $targets (`count` $count^)? (`ignore_index` $ignore_index^)? "
    "(`label_smoothing` $label_smoothing^)? (`z_loss` $z_loss^)? attr-dict `:` "
    "functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Whether any option departs from the plain mean over every position.
    bool hasOptions() {
      return getCount() || getIgnoreIndex() || getLabelSmoothing() || getZLoss();
    }
  }];
}

def Step_TokenCountOp : Step_InferredOp<"token_count", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "the number of targets that a cross_entropy counts";
  let description = [{
    The number of elements of `targets` other than `ignore_index`, as a
    float scalar (exact up to 2^24 in f32). Its gradient is zero: the input
    is integers. A batch split sums it over the ranks that share the batch.

    ```mlir
    %n = step.token_count %targets ignore_index -100 : (tensor<8x128xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Step_IndexTensor:$targets, I64Attr:$ignore_index);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat =
    "$targets `ignore_index` $ignore_index attr-dict `:` functional-type(operands, results)";
}

def Step_TargetMaskOp : Step_InferredOp<"target_mask", [Step_Differentiable, Step_NoProductFlops]> {
  let summary = "the targets a cross_entropy counts: safe ids and a 0/1 mask";
  let description = [{
    For integer `targets`, `ids` is `targets` with every `ignore_index`
    replaced by 0 (an id any table has) and `mask` is 1.0 where the target
    is counted, 0.0 where it is `ignore_index`. step-shard-tensor's
    vocabulary-parallel cross-entropy looks the ids up and multiplies each
    position's loss by the mask. Its gradient is zero: the input is
    integers.

    ```mlir
    %ids, %mask = step.target_mask %targets ignore_index -100
        : (tensor<8x128xi32>) -> (tensor<8x128xi32>, tensor<8x128xf32>)
    ```
  }];
  let arguments = (ins Step_IndexTensor:$targets, I64Attr:$ignore_index);
  let results = (outs Step_IndexTensor:$ids, Step_FloatTensor:$mask);
  let assemblyFormat =
    "$targets `ignore_index` $ignore_index attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Tensor parallelism
//===----------------------------------------------------------------------===//

def Step_CopyToParallelOp : Step_Op<"copy_to_parallel",
    [SameOperandsAndResultType, Step_NoProductFlops]> {
  let summary = "a replicated value entering a tensor-parallel region";
  let description = [{
    The identity in the forward. Its gradient is all-reduced (summed) over
    `mesh_axes` of `mesh`: the value is the same on every rank of those axes,
    and each rank's use of it (its heads, its columns) is one part of the
    whole model, so each rank's gradient is a partial sum (Megatron's `f`
    operator; its conjugate `g` is a `mesh.all_reduce` in the forward, whose
    gradient is the identity). `step-shard-tensor` inserts it and
    step-autodiff differentiates it; the training step carries only the
    gradient's all-reduce.

    ```mlir
    %xin = step.copy_to_parallel %x mesh @world axes [1] : tensor<8x64x64xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       DenseI16ArrayAttr:$mesh_axes);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$input `mesh` $mesh `axes` $mesh_axes attr-dict `:` type($input)";
}

include "stepc/Dialect/Step/IR/StepGradOps.td"

#endif // STEPC_DIALECT_STEP_IR_STEPOPS_TD
