//===- StepGradOps.td - backward and optimizer ops ---------*- tablegen -*-===//
//
// Ops that autodiff and the optimizer emit. Composite forward ops get
// composite backward ops (one fused kernel each on the back ends, as llm.c
// and cuDNN have), not a decomposition into dozens of primitives. These ops
// have no rule of their own: differentiating twice is a diagnostic.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEP_IR_STEPGRADOPS_TD
#define STEPC_DIALECT_STEP_IR_STEPGRADOPS_TD

class Step_ActivationGradOp<string mnemonic, string math>
    : Step_ScalarMathOp<mnemonic, 2> {
  let summary = "gradient of " # math;
  let description = "`dx = dy · f'(x)` for `f(x) = " # math # "`.\n\n"
    "```mlir\n%dx = step." # mnemonic # " %dy, %x : tensor<8x64xf32>\n```";
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$input);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($result)";
}

def Step_SiluGradOp : Step_ActivationGradOp<"silu_grad", "x · sigmoid(x)">;
def Step_ReluGradOp : Step_ActivationGradOp<"relu_grad", "max(x, 0)">;

def Step_GeluGradOp : Step_ScalarMathOp<"gelu_grad", 2, [],
                                        "isTanhApproximation() ? 1.0 : 0.0"> {
  let summary = "gradient of GELU";
  let description = [{
    `dx = dy · gelu'(x)` for the exact or, with `approximate tanh`, the tanh
    form of `step.gelu`.

    ```mlir
    %dx = step.gelu_grad %dy, %x : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$input,
                       OptionalAttr<Step_GeluApproximationAttr>:$approximate);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input (`approximate` $approximate^)? "
                       "attr-dict `:` type($result)";
  let extraClassDeclaration = [{
    /// True for the tanh approximation, false for the exact erf form.
    bool isTanhApproximation() {
      return getApproximate() == GeluApproximation::Tanh;
    }
  }] # Step_ScalarMathDecl<"gelu_grad", "isTanhApproximation() ? 1.0 : 0.0">.value;
}

def Step_ReduceMaxGradOp : Step_InferredOp<"reduce_max_grad", [Step_NoProductFlops]> {
  let summary = "gradient of reduce_max";
  let description = [{
    Routes `grad` (shaped like the reduce_max result) to the maxima of
    `input`, split evenly among ties (PyTorch's `amax`).

    ```mlir
    %dx = step.reduce_max_grad %dy, %x dims [1]
        : (tensor<8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$input,
                       DenseI64ArrayAttr:$dims, UnitAttr:$keep_dims);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input `dims` $dims (`keep_dims` $keep_dims^)? "
                       "attr-dict `:` functional-type(operands, results)";
}

def Step_SoftmaxGradOp : Step_LineOp<"softmax_grad"> {
  let summary = "gradient of softmax from its output";
  let description = [{
    `dx = y · (dy - sum(dy · y))` along `dim`, where `y` is the softmax output.

    ```mlir
    %dx = step.softmax_grad %dy, %y dim 2
        : (tensor<8x128x512xf32>, tensor<8x128x512xf32>) -> tensor<8x128x512xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$output,
                       I64Attr:$dim);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $output `dim` $dim attr-dict `:` "
                       "functional-type(operands, results)";
}

def Step_LogSoftmaxGradOp : Step_LineOp<"log_softmax_grad"> {
  let summary = "gradient of log_softmax from its output";
  let description = [{
    `dx = dy - exp(y) · sum(dy)` along `dim`, where `y` is the log_softmax
    output (so `exp(y)` is the softmax).

    ```mlir
    %dx = step.log_softmax_grad %dy, %y dim 2
        : (tensor<8x128x512xf32>, tensor<8x128x512xf32>) -> tensor<8x128x512xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$output,
                       I64Attr:$dim);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $output `dim` $dim attr-dict `:` "
                       "functional-type(operands, results)";
}

def Step_CumsumGradOp : Step_LineOp<"cumsum_grad"> {
  let summary = "gradient of cumsum: the reverse cumulative sum";
  let description = [{
    `dx_i = dy_i + ... + dy_{n-1}` along `dim`.

    ```mlir
    %dx = step.cumsum_grad %dy dim 1 : (tensor<8x128xf32>) -> tensor<8x128xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, I64Attr:$dim);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$grad `dim` $dim attr-dict `:` functional-type(operands, results)";
}

def Step_LayerNormGradOp : Step_InferredOp<"layer_norm_grad", [Step_NoProductFlops]> {
  let summary = "gradient of layer_norm";
  let description = [{
    With `x̂ = (x - μ)·r`, `r = 1/sqrt(σ² + ε)` over the last dimension `D`
    (recomputed from `input`), `g = dy · weight`:

    `dx = r · (g - mean(g) - x̂ · mean(g · x̂))`,
    `dweight = Σ dy · x̂`, `dbias = Σ dy` (sums over all leading dims).

    ```mlir
    %dx, %dw, %db = step.layer_norm_grad %dy, %x, %w
        : (tensor<8x128x64xf32>, tensor<8x128x64xf32>, tensor<64xf32>)
        -> (tensor<8x128x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$input,
                       Step_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Step_FloatTensor:$input_grad,
                      Step_FloatTensor:$weight_grad,
                      Step_FloatTensor:$bias_grad);
  let assemblyFormat = "$grad `,` $input `,` $weight attr-dict `:` "
                       "functional-type(operands, results)";
}

def Step_RmsNormGradOp : Step_InferredOp<"rms_norm_grad", [Step_NoProductFlops]> {
  let summary = "gradient of rms_norm";
  let description = [{
    With `r = 1/sqrt(mean(x²) + ε)` over the last dimension (recomputed),
    `g = dy · weight`:

    `dx = r · g - x · r³ · mean(g · x)`, `dweight = Σ dy · x · r`.

    ```mlir
    %dx, %dw = step.rms_norm_grad %dy, %x, %w
        : (tensor<8x256x128xf32>, tensor<8x256x128xf32>, tensor<128xf32>)
        -> (tensor<8x256x128xf32>, tensor<128xf32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$input,
                       Step_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Step_FloatTensor:$input_grad,
                      Step_FloatTensor:$weight_grad);
  let assemblyFormat = "$grad `,` $input `,` $weight attr-dict `:` "
                       "functional-type(operands, results)";
}

def Step_AttentionGradOp : Step_InferredOp<"attention_grad"> {
  let summary = "gradient of attention";
  let description = [{
    Per head, with `P = softmax(scale·QKᵀ + mask)` recomputed (flash-style),
    `dO` the output cotangent:

    `dV = Pᵀ dO`, `dP = dO Vᵀ`, `dS = P ∘ (dP - rowsum(dO ∘ O))`,
    `dQ = scale · dS K`, `dK = scale · dSᵀ Q`,

    with key/value gradients summed over the query heads sharing them.
    Operands and attributes are those of the forward `step.attention`,
    its `mask` included (the mask itself gets no gradient).

    ```mlir
    %dq, %dk, %dv = step.attention_grad %do, %q, %k, %v heads 4 kv_heads 2 head_dim 32 causal
        : (tensor<8x256x128xf32>, tensor<8x256x128xf32>, tensor<8x256x64xf32>, tensor<8x256x64xf32>)
        -> (tensor<8x256x128xf32>, tensor<8x256x64xf32>, tensor<8x256x64xf32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$query,
                       Step_FloatTensor:$key, Step_FloatTensor:$value,
                       Optional<Step_FloatTensor>:$mask,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale);
  let results = (outs Step_FloatTensor:$query_grad, Step_FloatTensor:$key_grad,
                      Step_FloatTensor:$value_grad);
  let assemblyFormat = "$grad `,` $query `,` $key `,` $value (`mask` $mask^)? `heads` $num_heads "
    "`kv_heads` $num_kv_heads `head_dim` $head_dim (`causal` $causal^)? "
    "attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// The softmax scale: `scale` if set, else 1/sqrt(head_dim).
    double getEffectiveScale();
  }];
}

def Step_CrossEntropyGradOp : Step_InferredOp<"cross_entropy_grad", [Step_NoProductFlops]> {
  let summary = "gradient of cross_entropy";
  let description = [{
    `dlogits_i = dloss · ((1 + 2z·lse_i)·softmax(x_i) - (1 - ε)·onehot(t_i) - ε/V) / N`
    for each counted position (zero for one whose target is `ignore_index`),
    `N` the denominator of step.cross_entropy (`count` or the counted
    positions), with the same options.

    ```mlir
    %dl = step.cross_entropy_grad %dloss, %logits, %targets
        : (tensor<f32>, tensor<8x128x512xf32>, tensor<8x128xi32>) -> tensor<8x128x512xf32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32, F64]>:$grad, Step_FloatTensor:$logits,
                       Step_IndexTensor:$targets,
                       Optional<0DTensorOf<[F32, F64]>>:$count,
                       OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<F64Attr>:$label_smoothing,
                       OptionalAttr<F64Attr>:$z_loss);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
    "$grad `,` $logits `,` $targets (`count` $count^)? (`ignore_index` $ignore_index^)? "
    "(`label_smoothing` $label_smoothing^)? (`z_loss` $z_loss^)? attr-dict `:` "
    "functional-type(operands, results)";
  let extraClassDeclaration = [{
    bool hasOptions() {
      return getCount() || getIgnoreIndex() || getLabelSmoothing() || getZLoss();
    }
  }];
}

def Step_EmbeddingGradOp : Step_InferredOp<"embedding_grad", [Step_NoProductFlops]> {
  let summary = "gradient of embedding: scatter-add into the table";
  let description = [{
    `dtable[v, :] = Σ over i... with ids[i...] = v of grad[i..., :]`, for a
    table of `num_embeddings` rows; repeated ids accumulate. With `shard
    %first of N` (see step.embedding) the table is rows `[first, first +
    num_embeddings)` of N: other ids add nothing.

    ```mlir
    %dwte = step.embedding_grad %dx, %tokens num_embeddings 512
        : (tensor<8x128x64xf32>, tensor<8x128xi32>) -> tensor<512x64xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_IndexTensor:$ids,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_embeddings,
                       Optional<0DTensorOf<[I32]>>:$first_row,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$num_ids);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $ids `num_embeddings` $num_embeddings "
                       "(`shard` $first_row^ `of` $num_ids)? "
                       "attr-dict `:` functional-type(operands, results)";
}

def Step_GatherGradOp : Step_InferredOp<"gather_grad", [Step_NoProductFlops]> {
  let summary = "gradient of gather: scatter-add along one dimension";
  let description = [{
    `dx[..., index[..., k, ...], ...] += grad[..., k, ...]` along `dim`, into
    zeros of `size` elements along `dim` (the gathered input's); repeated
    indices accumulate in index order (deterministic), out-of-range ones add
    nothing.

    ```mlir
    %dx = step.gather_grad %dy, %idx dim 1 size 512
        : (tensor<8x4xf32>, tensor<8x4xi32>) -> tensor<8x512xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_IndexTensor:$index, I64Attr:$dim,
                       ConfinedAttr<I64Attr, [IntPositive]>:$size);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $index `dim` $dim `size` $size attr-dict `:` "
                       "functional-type(operands, results)";
}

def Step_MoeCombineGradOp : Step_InferredOp<"moe_combine_grad", [Step_NoProductFlops]> {
  let summary = "gradient of moe_combine: the rows' and the gates'";
  let description = [{
    With `dout` the result's gradient: `drows[slot(n, k)] = gates[n, k] ·
    dout[n]` (rows no pair took: 0) and `dgates[n, k] = dout[n] ·
    rows[slot(n, k)]` (0 for a pair outside `[0, E)` or dropped by a
    capacity).

    ```mlir
    %drows, %dgate = step.moe_combine_grad %dy, %out_rows, %gate, %expert experts 8
        : (tensor<512x64xf32>, tensor<1024x64xf32>, tensor<512x2xf32>, tensor<512x2xi32>)
        -> (tensor<1024x64xf32>, tensor<512x2xf32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$rows, Step_FloatTensor:$gates,
                       Step_IndexTensor:$experts,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$groups,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$capacity,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$segment);
  let results = (outs Step_FloatTensor:$rows_grad, Step_FloatTensor:$gates_grad);
  let assemblyFormat = "$grad `,` $rows `,` $gates `,` $experts `experts` $num_experts "
                       "(`groups` $groups^)? (`capacity` $capacity^ `per` $segment)? "
                       "attr-dict `:` functional-type(operands, results)";
}

def Step_GroupedMatmulWeightGradOp : Step_InferredOp<"grouped_matmul_weight_grad"> {
  let summary = "gradient of grouped_matmul's expert matrices";
  let description = [{
    For each expert `e` with rows `X_e` of `lhs` and `G_e` of `grad` (the
    product's gradient): `dW_e = X_eᵀ G_e` (`[K, N]`), or `G_eᵀ X_e`
    (`[N, K]`) with `transpose_b`; an expert without rows gets 0. The result
    has the shape of the forward's `rhs`. With counts `[B, E]`, each
    expert's rows of every block are summed.

    ```mlir
    %dw1 = step.grouped_matmul_weight_grad %rows, %dh, %counts transpose_b
        : (tensor<1024x64xf32>, tensor<1024x256xf32>, tensor<8xi32>) -> tensor<8x256x64xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$lhs, Step_FloatTensor:$grad, Step_IndexTensor:$counts,
                       UnitAttr:$transpose_b);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $grad `,` $counts (`transpose_b` $transpose_b^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def Step_AdamwOp : Step_InferredOp<"adamw", [Step_NoProductFlops]> {
  let summary = "one AdamW update of a parameter";
  let description = [{
    PyTorch's `torch.optim.AdamW` for one tensor, with the gradient scaled
    first (`grad_scale` carries the clipping coefficient); `lr`, `step` (t,
    counted from 1) and `grad_scale` are runtime scalars:

    ```
    g  = grad · grad_scale
    p  = p · (1 - lr · weight_decay)              decoupled weight decay
    m' = β1 · m + (1 - β1) · g
    v' = β2 · v + (1 - β2) · g²
    p' = p - lr / (1 - β1^t) · m' / (sqrt(v' / (1 - β2^t)) + ε)
    ```

    Results are the new parameter, m and v; a back end updates them in
    place (the operands are donated).

    With `decoupled_weight_decay = false` it is `torch.optim.Adam`: the
    decay is an L2 term added to the (scaled) gradient instead,
    `g = grad · grad_scale + weight_decay · p`, and `p` is not shrunk.

    ```mlir
    %p2, %m2, %v2 = step.adamw %p, %g, %m, %v, %lr, %t, %scale
        {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64}
        : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>,
           tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$param, Step_FloatTensor:$grad,
                       Step_FloatTensor:$m, Step_FloatTensor:$v,
                       0DTensorOf<[F32, F64]>:$lr, 0DTensorOf<[F32, F64]>:$step,
                       0DTensorOf<[F32, F64]>:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       F64Attr:$weight_decay,
                       DefaultValuedAttr<BoolAttr, "true">:$decoupled_weight_decay);
  let results = (outs Step_FloatTensor:$new_param, Step_FloatTensor:$new_m,
                      Step_FloatTensor:$new_v);
  let assemblyFormat = "$param `,` $grad `,` $m `,` $v `,` $lr `,` $step `,` "
                       "$grad_scale attr-dict `:` functional-type(operands, results)";
}

def Step_SgdOp : Step_InferredOp<"sgd", [Step_NoProductFlops]> {
  let summary = "one SGD update of a parameter (momentum, Nesterov)";
  let description = [{
    PyTorch's `torch.optim.SGD` (dampening 0) for one tensor, on the
    gradient scaled first; `lr` and `grad_scale` are runtime scalars:

    ```
    g  = grad · grad_scale + weight_decay · p     L2 weight decay
    b' = momentum · b + g                          (b starts at 0: b' = g)
    d  = nesterov ? g + momentum · b' : b'
    p' = p - lr · d
    ```

    Results are the new parameter and momentum buffer, updated in place.

    ```mlir
    %p2, %b2 = step.sgd %p, %g, %b, %lr, %scale
        {momentum = 0.9 : f64, nesterov = false, weight_decay = 0.0 : f64}
        : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>, tensor<f32>)
        -> (tensor<64x64xf32>, tensor<64x64xf32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$param, Step_FloatTensor:$grad,
                       Step_FloatTensor:$buf, 0DTensorOf<[F32, F64]>:$lr,
                       0DTensorOf<[F32, F64]>:$grad_scale,
                       F64Attr:$momentum, BoolAttr:$nesterov, F64Attr:$weight_decay);
  let results = (outs Step_FloatTensor:$new_param, Step_FloatTensor:$new_buf);
  let assemblyFormat = "$param `,` $grad `,` $buf `,` $lr `,` $grad_scale attr-dict `:` "
                       "functional-type(operands, results)";
}

def Step_LionOp : Step_InferredOp<"lion", [Step_NoProductFlops]> {
  let summary = "one Lion update of a parameter";
  let description = [{
    Lion (Chen et al. 2023, the reference implementation's update) for one
    tensor, on the gradient scaled first; `lr` and `grad_scale` are
    runtime scalars:

    ```
    g  = grad · grad_scale
    p  = p · (1 - lr · weight_decay)              decoupled weight decay
    p' = p - lr · sign(β1 · m + (1 - β1) · g)
    m' = β2 · m + (1 - β2) · g
    ```

    Results are the new parameter and moment, updated in place.

    ```mlir
    %p2, %m2 = step.lion %p, %g, %m, %lr, %scale
        {beta1 = 0.9 : f64, beta2 = 0.99 : f64, weight_decay = 0.1 : f64}
        : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>, tensor<f32>)
        -> (tensor<64x64xf32>, tensor<64x64xf32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$param, Step_FloatTensor:$grad,
                       Step_FloatTensor:$m, 0DTensorOf<[F32, F64]>:$lr,
                       0DTensorOf<[F32, F64]>:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$weight_decay);
  let results = (outs Step_FloatTensor:$new_param, Step_FloatTensor:$new_m);
  let assemblyFormat = "$param `,` $grad `,` $m `,` $lr `,` $grad_scale attr-dict `:` "
                       "functional-type(operands, results)";
}

#endif // STEPC_DIALECT_STEP_IR_STEPGRADOPS_TD
