//===- StepKOps.td - the stepk kernel-level dialect --------*- tablegen -*-===//
//
// The `stepk` dialect: what a back end launches. A target-lowering pass
// rewrites a training step's `step` ops into the kernels that compute them;
// the emitters print these ops: fused elementwise kernels, library calls,
// GEMMs with their epilogues, and attention with what its backward reads.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEPK_IR_STEPKOPS_TD
#define STEPC_DIALECT_STEPK_IR_STEPKOPS_TD

include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def StepK_Dialect : Dialect {
  let name = "stepk";
  let cppNamespace = "::stepc::stepk";
  let summary = "Kernel-level ops: what a stepc back end launches";
  let description = [{
    Past target lowering, a training step is a sequence of kernels. An op of
    this dialect is one kernel launch (or one loop nest on the CPU) whose
    operands and results are the buffers the memory plan places; what it
    computes is written in `step` ops inside it, so the interpreter, the
    FLOP rules and both emitters read one description.
  }];
}

/// Reads element i of every operand before writing element i of any result
/// (stepc/Dialect/StepK/IR/StepKTraits.h).
def StepK_ElementByElement : NativeOpTrait<"ElementByElement"> {
  let cppNamespace = "::stepc";
}

/// What a GEMM computes after its product; the case names are the runtime's
/// STEPC_EPILOGUE_* (runtime/kernels/cuda/cuda_kernels.h), which the CUDA
/// emitter prints.
def StepK_Epilogue : I32EnumAttr<"Epilogue", "a GEMM's epilogue", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"gelu", 1>,
    I32EnumAttrCase<"dgelu", 2>,
    I32EnumAttrCase<"bgrad", 3>]> {
  let cppNamespace = "::stepc::stepk";
}

class StepK_Op<string mnemonic, list<Trait> traits = []>
    : Op<StepK_Dialect, mnemonic, traits>;

def StepK_FusedOp : StepK_Op<"fused",
    [IsolatedFromAbove, Pure, StepK_ElementByElement]> {
  let summary = "one kernel computing a run of elementwise ops";
  let description = [{
    Element `i` of every result is computed from element `i` of every input
    by the body, a block of elementwise `step` ops (those with
    `ScalarMathOpInterface`), `step.convert` and `step.reshape`, values in
    registers; only the results (values used after the run) reach memory.
    Every input and result has the same number of elements. The CPU back
    end emits one loop, the CUDA back end one kernel.
    `step-fuse-elementwise` forms these ops.

    ```mlir
    %h, %g = stepk.fused %x, %b : (tensor<8x256xf32>, tensor<8x256xf32>) -> (tensor<8x256xf32>, tensor<8x256xf32>) {
    ^bb0(%x0: tensor<8x256xf32>, %b0: tensor<8x256xf32>):
      %0 = step.add %x0, %b0 : tensor<8x256xf32>
      %1 = step.gelu %0 : tensor<8x256xf32>
      stepk.yield %0, %1 : tensor<8x256xf32>, tensor<8x256xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
    "$inputs attr-dict `:` functional-type($inputs, $results) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Elements each input and result holds (one loop trip or GPU thread
    /// each).
    int64_t getNumElements();
    /// The yield of the body.
    YieldOp getYield();
  }];
}

def StepK_GemmOp : StepK_Op<"gemm", [Pure, AttrSizedOperandSegments]> {
  let summary = "one GEMM with its epilogue (cuBLASLt on CUDA)";
  let description = [{
    `result = epilogue(op(lhs) · op(rhs) + bias)` converted to the result's
    element type, in one library call: `op` transposes the last two dims
    where `transpose_a` / `transpose_b` say; `shared_rhs` is `step.matmul`'s
    form (every leading lhs dim shares one rhs matrix), else the operands
    are batched alike (`step.batch_matmul`). `bias` (rank 1, the result's
    last dim) is broadcast along the rows. Epilogues (tanh GELU only):
    `gelu` also returns the pre-activation (what the
    backward reads; cuBLASLt's GELU_AUX), `dgelu` multiplies by the GELU
    derivative at `aux` (the pre-activation; cuBLASLt's DGELU). `bgrad`
    also returns the bias gradient (f32 `[M]`: each row of
    `op(lhs)` summed over K; cuBLASLt's BGRADB) of a weight-gradient GEMM
    (`lhs` `[K, M]` with `transpose_a`, `shared_rhs`): the bias's gradient
    comes out of the GEMM that reads the same output gradient for the
    weight's. The pre-activation and the bias gradient are the op's second
    result (`epilogue_result`), which the epilogue names.
    `step-fuse-cuda-kernels` forms these ops from `step.matmul`,
    `step.convert`, `step.add` of a broadcast, `step.gelu`,
    `step.gelu_grad` and `step.reduce_sum`. `fp8 = array<i32: a, b, v>`
    (formats 0 e4m3, 1 e5m2) says every value of lhs and rhs is one of that
    fp8 format's, scaled by a power of two per 1x128 block of lhs along K
    and per 128x128 block of rhs (`v` = 0) or per 1x128 block of rhs along
    K (`v` = 1): what `step.quantize_fp8` left. The GEMM may run on fp8
    tensor cores with the same result.

    An fp8 operand already packed (`stepk.pack_fp8`: an `f8E4M3FN` or
    `f8E5M2` tensor of the bytes, with `lhs_scales` / `rhs_scales`, each
    block's dequantization factor) is read as it is: the lhs stored
    `[rows, K]` (not transposed), the rhs stored `[N, K]` (`transpose_b`;
    1x128 blocks along K, or 128x128 blocks with `v` = 0, the scales
    `[N / 128, K / 128 padded to 4]`): the product is `bytes · scale` of each block,
    the values the bf16 operand would have held, and the GEMM packs only
    its other operand.

    ```mlir
    %h, %pre = stepk.gemm %x, %w bias %b epilogue gelu {shared_rhs, transpose_b}
        : (tensor<8x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> (tensor<8x256xf32>, tensor<8x256xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs,
                       Optional<AnyRankedTensor>:$bias, Optional<AnyRankedTensor>:$aux,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b, UnitAttr:$shared_rhs,
                       DefaultValuedAttr<StepK_Epilogue, "::stepc::stepk::Epilogue::none">:$epilogue,
                       OptionalAttr<DenseI32ArrayAttr>:$fp8,
                       Optional<AnyRankedTensor>:$lhs_scales,
                       Optional<AnyRankedTensor>:$rhs_scales);
  let results = (outs AnyRankedTensor:$result, Optional<AnyRankedTensor>:$epilogue_result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` $bias^)? (`aux` $aux^)? (`lhs_scales` $lhs_scales^)?
    (`rhs_scales` $rhs_scales^)? (`epilogue` $epilogue^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The gelu epilogue's pre-activation (else null).
    ::mlir::Value getPreActivation() {
      return getEpilogue() == Epilogue::gelu ? getEpilogueResult() : ::mlir::Value();
    }
    /// The bgrad epilogue's bias gradient (else null).
    ::mlir::Value getBiasGrad() {
      return getEpilogue() == Epilogue::bgrad ? getEpilogueResult() : ::mlir::Value();
    }
    /// The products' K: the dim of op(lhs) the GEMM contracts.
    int64_t getK() {
      auto lhs = ::llvm::cast<::mlir::RankedTensorType>(getLhs().getType());
      return lhs.getDimSize(lhs.getRank() - (getTransposeA() ? 2 : 1));
    }
  }];
  let hasVerifier = 1;
}

/// (stepc/Dialect/Step/IR/StepTraits.h) An op without matrix products.
def StepK_NoProductFlops : NativeOpTrait<"NoProductFlops"> {
  let cppNamespace = "::stepc";
}

def StepK_PackFp8Op : StepK_Op<"pack_fp8", [Pure, StepK_NoProductFlops]> {
  let summary = "an fp8 GEMM operand as bytes and block scales";
  let description = [{
    `input` (f32 or bf16, read as `[rows, cols]`: its leading dims
    flattened) in 1x128 blocks along its last dim, or along its rows with
    `transposed`: each block's scale is the power of two that fits its
    largest magnitude to the format's (`step.quantize_fp8`'s rule for a tile
    of that block), `bytes` the scaled values rounded to the format (the
    result's element type: `f8E4M3FN` e4m3, `f8E5M2` e5m2) and `scales`
    (f32) each block's dequantization factor, 1 / scale. Without
    `transposed`, `bytes` is shaped like `input` and `scales` is
    `[cols / 128, rows]`; with it, `bytes` is `[cols, rows]` (transposed,
    K-major for a product over the rows) and `scales` `[rows / 128, cols]`.
    `bytes · scale` is exactly what `step.quantize_fp8` with tiles of those
    blocks would leave: what a `stepk.gemm` reads as a packed operand, so
    the rounded copy is never stored. With `blocks` (a weight, 2-d
    `[rows, cols]`) the blocks are 128x128 and `scales` is `[rows / 128,
    L]` (`[cols / 128, L]` transposed), L the blocks along the other dim
    padded to a multiple of 4, as cuBLASLt reads them.
    `step-lower-library-calls` forms these inside the library calls that
    pack a linear layer's input, or its output gradient, both ways in one
    pass, and a weight in the layouts its products read.

    ```mlir
    %bytes, %scales = stepk.pack_fp8 %x transposed : (tensor<256x64xf32>) -> (tensor<64x256xf8E4M3FN>, tensor<2x64xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, UnitAttr:$transposed, UnitAttr:$blocks);
  let results = (outs AnyRankedTensor:$bytes, AnyRankedTensor:$scales);
  let assemblyFormat =
    "$input (`blocks` $blocks^)? (`transposed` $transposed^)? attr-dict `:` "
    "functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// 0 e4m3, 1 e5m2: the bytes' format.
    int32_t getFormat();
  }];
}

def StepK_AttentionOp : StepK_Op<"attention", [Pure]> {
  let summary = "one flash-attention forward kernel";
  let description = [{
    `step.attention` of `query`, `key` and `value` (same layout and
    attributes; `scale` is the effective one), stored as the result's element
    type: a bf16 attention whose result only fed a widening convert writes
    f32 directly. With `lse`, the kernel also writes each row's log-sum-exp
    of the scaled scores (`[B, Hq, Tq]`, f32), which the backward reads
    instead of recomputing the forward: the saved forward is dataflow the
    memory plan sees, not a side table. `step-fuse-cuda-kernels` forms these
    ops from `step.attention` and `step.convert`. With `mask`, the
    `step.attention` mask added to the scores (never cuDNN: our kernels, bf16
    on tensor cores).

    With `packed` offsets, `query`, `key` and `value` are one `[B, T, W]`
    tensor (the QKV projection's output) and the kernel reads the query,
    key and value as its last-dim columns `[offset, offset + width)`, in
    place: no slice is copied.

    ```mlir
    %o, %lse = stepk.attention %q, %k, %v heads 4 kv_heads 2 head_dim 32 causal scale 0.17677669529663687
        : (tensor<8x256x128xbf16>, tensor<8x256x64xbf16>, tensor<8x256x64xbf16>) -> (tensor<8x256x128xf32>, tensor<8x4x256xf32>)
    %o2 = stepk.attention %x, %x, %x packed [0, 128, 192] heads 4 kv_heads 2 head_dim 32 causal scale 0.17677669529663687
        : (tensor<8x256x256xbf16>, tensor<8x256x256xbf16>, tensor<8x256x256xbf16>) -> tensor<8x256x128xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key, AnyRankedTensor:$value,
                       Optional<AnyRankedTensor>:$mask,
                       OptionalAttr<DenseI64ArrayAttr>:$packed,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       UnitAttr:$causal, F64Attr:$scale);
  let results = (outs AnyRankedTensor:$result, Optional<AnyRankedTensor>:$lse);
  let assemblyFormat = "$query `,` $key `,` $value (`mask` $mask^)? (`packed` $packed^)? "
    "`heads` $num_heads `kv_heads` $num_kv_heads `head_dim` $head_dim (`causal` $causal^)? "
    "`scale` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def StepK_AttentionGradOp : StepK_Op<"attention_grad", [Pure, AttrSizedOperandSegments]> {
  let summary = "one flash-attention backward kernel";
  let description = [{
    `step.attention_grad`: the gradients of `query`, `key` and `value` from
    the output's gradient `grad`, stored as the results' element type. With
    `saved` (the forward's output and its `stepk.attention`'s log-sum-exp)
    the kernel reads them instead of recomputing the forward (it needs less
    scratch). `mask` is the forward's.

    With `packed` offsets (as `stepk.attention`'s), the three gradients are
    one result shaped like the packed `[B, T, W]` operand, each written into
    its columns; the columns tile the last dim, so every element is written
    (the pads and adds that summed the three gradients back into the
    projection's shape).

    ```mlir
    %dq, %dk, %dv = stepk.attention_grad %g, %q, %k, %v saved %o, %lse heads 4 kv_heads 2 head_dim 32 causal scale 0.17677669529663687
        : (tensor<8x256x128xf32>, tensor<8x256x128xf32>, tensor<8x256x64xf32>, tensor<8x256x64xf32>, tensor<8x256x128xf32>, tensor<8x4x256xf32>)
        -> (tensor<8x256x128xf32>, tensor<8x256x64xf32>, tensor<8x256x64xf32>)
    %dx = stepk.attention_grad %g, %x, %x, %x packed [0, 128, 192] heads 4 kv_heads 2 head_dim 32 causal scale 0.17677669529663687
        : (tensor<8x256x128xbf16>, tensor<8x256x256xbf16>, tensor<8x256x256xbf16>, tensor<8x256x256xbf16>) -> tensor<8x256x256xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad, AnyRankedTensor:$query, AnyRankedTensor:$key,
                       AnyRankedTensor:$value, Optional<AnyRankedTensor>:$out,
                       Optional<AnyRankedTensor>:$lse, Optional<AnyRankedTensor>:$mask,
                       OptionalAttr<DenseI64ArrayAttr>:$packed,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       UnitAttr:$causal, F64Attr:$scale);
  let results = (outs Variadic<AnyRankedTensor>:$grads);
  let assemblyFormat = "$grad `,` $query `,` $key `,` $value (`saved` $out^ `,` $lse)? (`mask` $mask^)? "
    "(`packed` $packed^)? `heads` $num_heads `kv_heads` $num_kv_heads `head_dim` $head_dim "
    "(`causal` $causal^)? `scale` $scale attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// The separate gradients (null when packed).
    mlir::Value getQueryGrad() { return getPacked() ? mlir::Value() : getGrads()[0]; }
    mlir::Value getKeyGrad() { return getPacked() ? mlir::Value() : getGrads()[1]; }
    mlir::Value getValueGrad() { return getPacked() ? mlir::Value() : getGrads()[2]; }
    /// The packed gradient (null when separate).
    mlir::Value getPackedGrad() { return getPacked() ? getGrads()[0] : mlir::Value(); }
  }];
  let hasVerifier = 1;
}

def StepK_CallOp : StepK_Op<"call", [IsolatedFromAbove, Pure]> {
  let summary = "one call of a library kernel";
  let description = [{
    A kernel of the runtime's library (`runtime/kernels/{cpu,cuda}/`),
    called as `stepc_<target>_<callee>(inputs..., scalars..., [scratch,]
    results...)` (CUDA prepends its context): the signature both targets
    share. What it computes is its body, the `step` op it lowers (which the
    interpreter and the FLOP rules read). `scalars` are the integer, float
    and static-array arguments in signature order, each attribute's type the
    parameter's C type: i64 `int64_t`, i32 `int`, f64 `double`, i64 arrays
    `const int64_t *` (shapes, permutations), i32 arrays `const int *`
    (masks). The emitters declare the kernel from these types before the
    step, so the compiler checks the library's header against the IR; `scratch_bytes`, when present, says the
    CUDA kernel takes a scratch pointer and how much it uses (the arena's
    scratch region holds the largest). `id_check` (with `id_operand` and
    `id_bound`) says the kernel checks that input's integer ids against
    `[0, id_bound)` and what to call them in the error ("id", "target"): the
    CPU kernel returns the first bad position, the CUDA kernel records it
    under a check site passed last. Two calls take any number of inputs,
    as a table of rows: `squared_norms` (the gradient clipping's sum of
    every gradient's squares: pointer, numel) and `bf16_copies` (the
    parameters' bf16 copies: source, copy, numel).
    `step-lower-library-calls` forms these ops from one table.

    ```mlir
    %y = stepk.call "layer_norm"(%x, %w, %b) {scalars = [512, 64, 1.0e-05]}
        : (tensor<8x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x64x64xf32> {
    ^bb0(%x0: tensor<8x64x64xf32>, %w0: tensor<64xf32>, %b0: tensor<64xf32>):
      %0 = step.layer_norm %x0, %w0, %b0 : (tensor<8x64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x64x64xf32>
      stepk.yield %0 : tensor<8x64x64xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$callee, Variadic<AnyRankedTensor>:$inputs,
                       ArrayAttr:$scalars,
                       OptionalAttr<I64Attr>:$scratch_bytes,
                       OptionalAttr<StrAttr>:$id_check,
                       OptionalAttr<I64Attr>:$id_operand,
                       OptionalAttr<I64Attr>:$id_bound);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
    "$callee `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The yield of the body.
    YieldOp getYield();
    /// The op the callee computes, which names the call: the body's first
    /// op that is not a slice of an input (a kernel reading parts of a
    /// packed operand in place slices it first), a widening of an input
    /// (a reduction reading bf16 values widens them first) or a sum of
    /// those (a norm gradient's dy added from bf16 terms as it is read).
    ::mlir::Operation *getKernelOp();
  }];
}

def StepK_AdamwGroupOp : StepK_Op<"adamw_group", [IsolatedFromAbove, Pure]> {
  let summary = "one multi-tensor AdamW launch over updates sharing hyperparameters";
  let description = [{
    The CUDA back end updates many tensors in one launch: the body is a
    sequence of `step.adamw` ops with the same betas, epsilon, weight decay
    and decoupling that read the same learning rate, step and gradient scale
    (body arguments), and the yield returns every update's results in body
    order. Each result is written over the input its update replaces (the
    memory plan's in-place rule for `step.adamw`, through the body), so the
    kernel reads a table of (param, grad, m, v, numel) rows.
    `step-fuse-cuda-kernels` forms these ops from each run of consecutive
    updates, one per set of hyperparameters.

    ```mlir
    %p, %m, %v = stepk.adamw_group %p0, %g0, %m0, %v0, %lr, %t, %s : (...) -> (...) {
    ^bb0(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>, %d: tensor<64xf32>,
         %lr0: tensor<f32>, %t0: tensor<f32>, %s0: tensor<f32>):
      %0:3 = step.adamw %a, %b, %c, %d, %lr0, %t0, %s0 {...} : ...
      stepk.yield %0#0, %0#1, %0#2 : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
    "$inputs attr-dict `:` functional-type($inputs, $results) $body";
  // The body's updates are verified before their group reads their
  // attributes (a region verifier runs after the nested ops').
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The updates, in body order (a template: step.adamw's class is
    /// complete only where StepOps.h is included).
    template <typename UpdateOp = ::stepc::step::AdamwOp>
    ::llvm::SmallVector<UpdateOp> getUpdates() {
      ::llvm::SmallVector<UpdateOp> updates;
      for (::mlir::Operation &op : getBody().front().without_terminator())
        if (auto update = ::llvm::dyn_cast<UpdateOp>(op))
          updates.push_back(update);
      return updates;
    }
    /// The input a body argument stands for (null for any other value).
    ::mlir::Value inputOf(::mlir::Value bodyValue);
    /// The yield of the body.
    YieldOp getYield();
  }];
}

def StepK_YieldOp : StepK_Op<"yield",
    [Pure, ReturnLike, Terminator, ParentOneOf<["FusedOp", "CallOp", "AdamwGroupOp"]>]> {
  let summary = "the values a fused kernel stores";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // STEPC_DIALECT_STEPK_IR_STEPKOPS_TD
