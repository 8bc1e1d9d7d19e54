// Every verifier error of the step dialect, one function per check, named
// after the check's label in StepOps.cpp / StepDialect.cpp / StepAttrs.cpp.
// RUN: stepc-opt %s -split-input-file -verify-diagnostics

func.func @constant_c1() {
  // expected-error @+1 {{'step.constant' op expects a statically shaped tensor value}}
  %0 = step.constant dense<1.0> : vector<2xf32>
  return
}

// -----

func.func @broadcast_c1(%x: tensor<4xf32>) {
  // expected-error @+1 {{expects the same element type, got 'f32' and 'bf16'}}
  %0 = step.broadcast %x : tensor<4xf32> -> tensor<2x4xbf16>
  return
}

// -----

func.func @broadcast_c2(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{expects the result rank (1) to be at least the operand rank (2)}}
  %0 = step.broadcast %x : tensor<2x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @broadcast_c3(%x: tensor<3xf32>) {
  // expected-error @+1 {{cannot broadcast operand dimension 0 of size 3 to result dimension 1 of size 4}}
  %0 = step.broadcast %x : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reshape_c1(%x: tensor<8xf32>) {
  // expected-error @+1 {{expects the same element type, got 'f32' and 'f64'}}
  %0 = step.reshape %x : tensor<8xf32> -> tensor<2x4xf64>
  return
}

// -----

func.func @reshape_c2(%x: tensor<8xf32>) {
  // expected-error @+1 {{expects as many elements in the result (9) as in the operand (8)}}
  %0 = step.reshape %x : tensor<8xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @convert_c1(%x: tensor<8xf32>) {
  // expected-error @+1 {{'step.convert' op requires the same shape for all operands and results}}
  %0 = step.convert %x : tensor<8xf32> -> tensor<4xbf16>
  return
}

// -----

func.func @transpose_c1(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'step.transpose' op expects a permutation of 2 dimensions, got 3}}
  %0 = step.transpose %x [0, 1, 2] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @transpose_c2(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'step.transpose' op expects a permutation of [0, 2), got dimension 0 out of range or repeated}}
  %0 = step.transpose %x [0, 0] : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @slice_c1(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'step.slice' op expects 2 offsets and sizes, got 1 and 2}}
  %0 = step.slice %x offsets [0] sizes [2, 2] : (tensor<4x4xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @slice_c2(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'step.slice' op slice [3, 5) of dimension 1 is empty or outside [0, 4)}}
  %0 = step.slice %x offsets [0, 3] sizes [2, 2] : (tensor<4x4xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @concat_c1() {
  // expected-error @+1 {{'step.concat' op expects at least one operand}}
  %0 = step.concat dim 0 : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_c2(%x: tensor<4xf32>) {
  // expected-error @+1 {{'step.concat' op expects dim in [0, 1), got 1}}
  %0 = step.concat %x, %x dim 1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @concat_c3(%x: tensor<4xf32>, %y: tensor<4xf64>) {
  // expected-error @+1 {{'step.concat' op expects operands of one element type and rank, operand #1 is 'tensor<4xf64>', operand #0 is 'tensor<4xf32>'}}
  %0 = step.concat %x, %y dim 0 : (tensor<4xf32>, tensor<4xf64>) -> tensor<8xf32>
  return
}

// -----

func.func @concat_c4(%x: tensor<2x4xf32>, %y: tensor<3x4xf32>) {
  // expected-error @+1 {{'step.concat' op expects operands to agree outside dim 1, operand #1 has size 3 in dimension 0 where operand #0 has 2}}
  %0 = step.concat %x, %y dim 1 : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @reduce_c1(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'step.reduce_sum' op expects at least one dimension to reduce}}
  %0 = step.reduce_sum %x dims [] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_c2(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'step.reduce_max' op expects dims sorted, distinct and in [0, 2), got 0 at position 1}}
  %0 = step.reduce_max %x dims [1, 0] : (tensor<2x3xf32>) -> tensor<f32>
  return
}

// -----

func.func @reduce_c2_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'step.reduce_mean' op expects dims sorted, distinct and in [0, 2), got 2 at position 0}}
  %0 = step.reduce_mean %x dims [2] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'step.reduce_sum' op expects result type 'tensor<2xf32>', got 'tensor<3xf32>'}}
  %0 = step.reduce_sum %x dims [1] : (tensor<2x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @matmul_c1(%x: tensor<8xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'step.matmul' op expects lhs of rank >= 2, got 'tensor<8xf32>'}}
  %0 = step.matmul %x, %w : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_c2(%x: tensor<2x8xf32>, %w: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'step.matmul' op expects rhs of rank 2, got 'tensor<2x8x4xf32>' (use step.batch_matmul for batched rhs)}}
  %0 = step.matmul %x, %w : (tensor<2x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_c3(%x: tensor<2x8xf32>, %w: tensor<8x4xbf16>) {
  // expected-error @+1 {{'step.matmul' op expects operands of one element type, got 'f32' and 'bf16'}}
  %0 = step.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_c4(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'step.matmul' op expects contracting dimensions to match, got 8 (lhs) and 4 (rhs)}}
  %0 = step.matmul %x, %w transpose_b : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @matmul_result(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'step.matmul' op expects result type 'tensor<2x4xf32>', got 'tensor<4x2xf32>'}}
  %0 = step.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @batch_matmul_c1(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'step.batch_matmul' op expects operands of one rank >= 3, got 'tensor<2x3x4xf32>' and 'tensor<4x5xf32>'}}
  %0 = step.batch_matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @batch_matmul_c2(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf16>) {
  // expected-error @+1 {{'step.batch_matmul' op expects operands of one element type, got 'f32' and 'f16'}}
  %0 = step.batch_matmul %a, %b : (tensor<2x3x4xf32>, tensor<2x4x5xf16>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @batch_matmul_c3(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{'step.batch_matmul' op expects equal batch dimensions, got 'tensor<2x3x4xf32>' and 'tensor<3x4x5xf32>'}}
  %0 = step.batch_matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @batch_matmul_c4(%a: tensor<2x3x4xf32>, %b: tensor<2x5x4xf32>) {
  // expected-error @+1 {{'step.batch_matmul' op expects contracting dimensions to match, got 4 (lhs) and 5 (rhs)}}
  %0 = step.batch_matmul %a, %b : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @embedding_c1(%t: tensor<4x8x2xf32>, %ids: tensor<3xi32>) {
  // expected-error @+1 {{'step.embedding' op expects a table of rank 2 [V, D], got 'tensor<4x8x2xf32>'}}
  %0 = step.embedding %t, %ids : (tensor<4x8x2xf32>, tensor<3xi32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @embedding_float_ids(%t: tensor<4x8xf32>, %ids: tensor<3xf32>) {
  // expected-error @+1 {{'step.embedding' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values with every dim >= 1 and at most 2^40 elements}}
  %0 = step.embedding %t, %ids : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @norm_c1(%x: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{'step.rms_norm' op expects an operand of rank >= 1, got 'tensor<f32>'}}
  %0 = step.rms_norm %x, %w : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----

func.func @norm_c2(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'step.layer_norm' op expects bias of type 'tensor<8xf32>', got 'tensor<4xf32>'}}
  %0 = step.layer_norm %x, %w, %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @norm_c3(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'step.layer_norm' op expects a positive epsilon, got 0}}
  %0 = step.layer_norm %x, %w, %b {epsilon = 0.0 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @softmax_c1(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'step.softmax' op expects dim in [0, 2), got -1}}
  %0 = step.softmax %x dim -1 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @log_softmax_c1(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'step.log_softmax' op expects dim in [0, 2), got 5}}
  %0 = step.log_softmax %x dim 5 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @log_softmax_result(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'step.log_softmax' op expects result type 'tensor<2x8xf32>', got 'tensor<2x8xbf16>'}}
  %0 = step.log_softmax %x dim 1 : (tensor<2x8xf32>) -> tensor<2x8xbf16>
  return
}

// -----

func.func @attention_c1(%q: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{'step.attention' op expects query, key and value of rank 3 [B, T, heads*head_dim], got 'tensor<2x8x4x4xf32>' and 'tensor<2x8x4x4xf32>'}}
  %0 = step.attention %q, %q, %q heads 4 kv_heads 4 head_dim 4 causal : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return
}

// -----

func.func @attention_c2(%q: tensor<2x8x16xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'step.attention' op expects key and value of one type, got 'tensor<2x8x8xf32>' and 'tensor<2x8x16xf32>'}}
  %0 = step.attention %q, %k, %v heads 4 kv_heads 2 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c3(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xbf16>) {
  // expected-error @+1 {{'step.attention' op expects operands of one element type, got 'f32' and 'bf16'}}
  %0 = step.attention %q, %k, %k heads 4 kv_heads 4 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c4(%q: tensor<2x8x16xf32>, %k: tensor<2x8x12xf32>) {
  // expected-error @+1 {{'step.attention' op expects heads (4) to be a multiple of kv_heads (3)}}
  %0 = step.attention %q, %k, %k heads 4 kv_heads 3 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c5(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'step.attention' op expects query channels 16 to equal heads * head_dim = 32}}
  %0 = step.attention %q, %q, %q heads 4 kv_heads 4 head_dim 8 causal : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c6(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'step.attention' op expects key/value channels 16 to equal kv_heads * head_dim = 8}}
  %0 = step.attention %q, %q, %q heads 4 kv_heads 2 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c7(%q: tensor<2x8x16xf32>, %k: tensor<3x8x16xf32>) {
  // expected-error @+1 {{'step.attention' op expects one batch size, got 2 (query) and 3 (key)}}
  %0 = step.attention %q, %k, %k heads 4 kv_heads 4 head_dim 4 : (tensor<2x8x16xf32>, tensor<3x8x16xf32>, tensor<3x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c8(%q: tensor<2x8x16xf32>, %k: tensor<2x6x16xf32>) {
  // expected-error @+1 {{'step.attention' op expects one sequence length for causal attention, got 8 (query) and 6 (key)}}
  %0 = step.attention %q, %k, %k heads 4 kv_heads 4 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c9(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'step.attention' op expects a positive scale, got -1}}
  %0 = step.attention %q, %q, %q heads 4 kv_heads 4 head_dim 4 causal {scale = -1.0 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c10(%q: tensor<2x8x16xf32>, %m: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'step.attention' op expects an f32 mask of rank 4 [B, heads, Tq, Tk], got 'tensor<2x8x8xf32>'}}
  %0 = step.attention %q, %q, %q mask %m heads 4 kv_heads 4 head_dim 4 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c11(%q: tensor<2x8x16xf32>, %m: tensor<2x2x8x8xf32>) {
  // expected-error @+1 {{'step.attention' op expects a mask of shape [2 or 1, 4 or 1, 8 or 1, 8], got 'tensor<2x2x8x8xf32>'}}
  %0 = step.attention %q, %q, %q mask %m heads 4 kv_heads 4 head_dim 4 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x2x8x8xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_c11_keys(%q: tensor<2x8x16xf32>, %m: tensor<1x1x8x1xf32>) {
  // expected-error @+1 {{'step.attention' op expects a mask of shape [2 or 1, 4 or 1, 8 or 1, 8], got 'tensor<1x1x8x1xf32>'}}
  %0 = step.attention %q, %q, %q mask %m heads 4 kv_heads 4 head_dim 4 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<1x1x8x1xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_heads_positive(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'step.attention' op attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = step.attention %q, %q, %q heads 0 kv_heads 4 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @rotary_c1(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'step.rotary' op expects an operand of rank 3 [B, T, heads*head_dim], got 'tensor<8x16xf32>'}}
  %0 = step.rotary %x head_dim 4 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @rotary_c2(%x: tensor<2x8x15xf32>) {
  // expected-error @+1 {{'step.rotary' op expects an even head_dim dividing 15, got 5}}
  %0 = step.rotary %x head_dim 5 : (tensor<2x8x15xf32>) -> tensor<2x8x15xf32>
  return
}

// -----

func.func @rotary_c3(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'step.rotary' op expects a positive theta, got 0}}
  %0 = step.rotary %x head_dim 4 {theta = 0.0 : f64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @cross_entropy_c1(%l: tensor<2x8x32xf32>, %t: tensor<2x7xi32>) {
  // expected-error @+1 {{'step.cross_entropy' op expects targets of shape [...] for logits [..., V], got 'tensor<2x7xi32>' for 'tensor<2x8x32xf32>'}}
  %0 = step.cross_entropy %l, %t : (tensor<2x8x32xf32>, tensor<2x7xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_c2_smoothing(%l: tensor<2x8x32xf32>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{'step.cross_entropy' op expects a label_smoothing in [0, 1], got 1.5}}
  %0 = step.cross_entropy %l, %t label_smoothing 1.5 : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_c2_z_loss(%l: tensor<2x8x32xf32>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{'step.cross_entropy' op expects a finite z_loss >= 0, got -1.0}}
  %0 = step.cross_entropy %l, %t z_loss -1.0 : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_c2_ignore(%d: tensor<f32>, %l: tensor<2x8x32xf32>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{'step.cross_entropy_grad' op expects an ignore_index that an i32 target can equal, got 4294967296}}
  %0 = step.cross_entropy_grad %d, %l, %t ignore_index 4294967296 : (tensor<f32>, tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @token_count_c1(%t: tensor<2x8xi32>) {
  // expected-error @+1 {{'step.token_count' op expects an ignore_index that an i32 target can equal, got -4294967296}}
  %0 = step.token_count %t ignore_index -4294967296 : (tensor<2x8xi32>) -> tensor<f32>
  return
}

// -----

func.func @elementwise_types(%x: tensor<2xf32>, %y: tensor<3xf32>) {
  // expected-error @+1 {{'step.add' op requires the same type for all operands and results}}
  %0 = "step.add"(%x, %y) : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @dynamic_shape(%x: tensor<?xf32>) {
  // expected-error @+1 {{'step.exp' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float values with every dim >= 1 and at most 2^40 elements, but got 'tensor<?xf32>'}}
  %0 = step.exp %x : tensor<?xf32>
  return
}

// -----

func.func @integer_math(%x: tensor<4xi32>) {
  // expected-error @+1 {{'step.tanh' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float values with every dim >= 1 and at most 2^40 elements, but got 'tensor<4xi32>'}}
  %0 = step.tanh %x : tensor<4xi32>
  return
}

// -----

func.func @gelu_approximation(%x: tensor<4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'approximate' [none, tanh]}}
  %0 = step.gelu %x approximate sigmoid : tensor<4xf32>
  return
}

// -----

func.func @unknown_op(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'step.frobnicate' is unknown}}
  %0 = step.frobnicate %x : tensor<4xf32>
  return
}

// -----

// Empty tensors are rejected where they appear (a division by zero later).
func.func @tensor_empty(%x: tensor<2x4xf32>) -> tensor<8x0xf32> {
  // expected-error @+1 {{'step.reshape' op result #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer or 1-bit signless integer values with every dim >= 1 and at most 2^40 elements, but got 'tensor<8x0xf32>'}}
  %0 = step.reshape %x : tensor<2x4xf32> -> tensor<8x0xf32>
  return %0 : tensor<8x0xf32>
}

// -----

// So are shapes whose element count would overflow the byte and FLOP counts.
func.func @tensor_huge(%x: tensor<4294967296x4294967296xf32>) -> tensor<4294967296x4294967296xf32> {
  // expected-error @+1 {{'step.exp' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float values with every dim >= 1 and at most 2^40 elements, but got 'tensor<4294967296x4294967296xf32>'}}
  %0 = step.exp %x : tensor<4294967296x4294967296xf32>
  return %0 : tensor<4294967296x4294967296xf32>
}

// -----

func.func @dropout_c1(%x: tensor<4xf32>) {
  // expected-error @+1 {{'step.dropout' op expects a rate in [0, 1), got 1}}
  %0 = step.dropout %x rate 1.0 stream 0 : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_c2(%x: tensor<4xf32>) {
  // expected-error @+1 {{'step.dropout' op expects a stream in [0, 2^32), got -1}}
  %0 = step.dropout %x rate 0.5 stream -1 : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_c3(%x: tensor<4xf32>, %seed: tensor<i32>) {
  // expected-error @+1 {{'step.dropout' op expects both 'seed' and 'step', or neither}}
  %0 = "step.dropout"(%x, %seed) {rate = 0.5 : f64, stream = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (tensor<4xf32>, tensor<i32>) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_c4(%x: tensor<f32>, %first: tensor<i32>) {
  // expected-error @+1 {{'step.dropout' op expects 'rows from' only on a tensor of rank >= 1}}
  %0 = step.dropout %x rows from %first rate 0.5 stream 0 : (tensor<f32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

func.func @pow_c1(%x: tensor<4xf32>) {
  // expected-error @+1 {{'step.pow' op expects a finite exponent, got INF}}
  %0 = step.pow %x exponent 0x7FF0000000000000 : tensor<4xf32>
  return
}

// -----

func.func @compare_c1(%x: tensor<4xf32>, %y: tensor<4xi32>) {
  // expected-error @+1 {{'step.compare' op requires all operands to have the same type}}
  %0 = "step.compare"(%x, %y) {predicate = 0 : i32} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xi1>
  return
}

// -----

func.func @select_mask(%m: tensor<4xf32>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'step.select' op operand #0 must be}}
  %0 = "step.select"(%m, %x, %x) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @iota_c1() {
  // expected-error @+1 {{'step.iota' op expects dim in [0, 2), got 2}}
  %0 = step.iota dim 2 : tensor<4x8xi32>
  return
}

// -----

func.func @argmax_c1(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'step.argmax' op expects dim in [0, 2), got -1}}
  %0 = step.argmax %x dim -1 : (tensor<4x8xf32>) -> tensor<4xi32>
  return
}

// -----

func.func @gather_c1(%x: tensor<4x8xf32>, %idx: tensor<12xi32>) {
  // expected-error @+1 {{'step.gather' op expects an index of rank 2, got 'tensor<12xi32>'}}
  %0 = step.gather %x, %idx dim 1 : (tensor<4x8xf32>, tensor<12xi32>) -> tensor<12xf32>
  return
}

// -----

func.func @gather_c2(%x: tensor<4x8xf32>, %idx: tensor<3x3xi32>) {
  // expected-error @+1 {{'step.gather' op expects the index 'tensor<3x3xi32>' to match 'tensor<4x8xf32>' except along dim 1}}
  %0 = step.gather %x, %idx dim 1 : (tensor<4x8xf32>, tensor<3x3xi32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @gather_grad_c1(%dy: tensor<4x3xf32>, %idx: tensor<4x2xi32>) {
  // expected-error @+1 {{'step.gather_grad' op expects the index 'tensor<4x2xi32>' to match 'tensor<4x3xf32>'}}
  %0 = step.gather_grad %dy, %idx dim 1 size 8 : (tensor<4x3xf32>, tensor<4x2xi32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @select_c1(%m: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xbf16>) {
  // expected-error @+1 {{'step.select' op failed to verify that all of {on_true, on_false} have same type}}
  %0 = "step.select"(%m, %x, %y) : (tensor<4xi1>, tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

func.func @top_k_c1(%x: tensor<6x3xf32>) {
  // expected-error @+1 {{'step.top_k' op expects k (4) at most the last dimension (3)}}
  %v, %i = step.top_k %x k 4 : (tensor<6x3xf32>) -> (tensor<6x4xf32>, tensor<6x4xi32>)
  return
}

// -----

func.func @moe_dispatch_c1(%x: tensor<6x4xf32>, %e: tensor<5x2xi32>) {
  // expected-error @+1 {{'step.moe_dispatch' op expects tokens [N, D] and experts [N, K], got 'tensor<6x4xf32>' and 'tensor<5x2xi32>'}}
  %r, %c = step.moe_dispatch %x, %e experts 3 : (tensor<6x4xf32>, tensor<5x2xi32>) -> (tensor<12x4xf32>, tensor<3xi32>)
  return
}

// -----

func.func @moe_combine_c1(%r: tensor<10x4xf32>, %g: tensor<6x2xf32>, %e: tensor<6x2xi32>) {
  // expected-error @+1 {{'step.moe_combine' op expects rows [N·K, D] = [12, D], got 'tensor<10x4xf32>'}}
  %y = step.moe_combine %r, %g, %e experts 3 : (tensor<10x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  return
}

// -----

func.func @grouped_matmul_c1(%x: tensor<12x4xf32>, %w: tensor<3x5x6xf32>, %c: tensor<3xi32>) {
  // expected-error @+1 {{'step.grouped_matmul' op expects lhs's 4 columns to equal rhs's K 6}}
  %y = step.grouped_matmul %x, %w, %c transpose_b : (tensor<12x4xf32>, tensor<3x5x6xf32>, tensor<3xi32>) -> tensor<12x5xf32>
  return
}

// -----

func.func @grouped_matmul_counts(%x: tensor<12x4xf32>, %w: tensor<3x4x5xf32>, %c: tensor<2xi32>) {
  // expected-error @+1 {{'step.grouped_matmul' op expects lhs [M, K], rhs [E, K, N] and counts [E] or [B, E], got 'tensor<12x4xf32>', 'tensor<3x4x5xf32>' and 'tensor<2xi32>'}}
  %y = step.grouped_matmul %x, %w, %c : (tensor<12x4xf32>, tensor<3x4x5xf32>, tensor<2xi32>) -> tensor<12x5xf32>
  return
}

// -----

func.func @grouped_matmul_blocks(%x: tensor<12x4xf32>, %w: tensor<3x4x5xf32>, %c: tensor<5x3xi32>) {
  // expected-error @+1 {{'step.grouped_matmul' op expects the 12 rows to divide into counts' 5 blocks}}
  %y = step.grouped_matmul %x, %w, %c : (tensor<12x4xf32>, tensor<3x4x5xf32>, tensor<5x3xi32>) -> tensor<12x5xf32>
  return
}

// -----

func.func @moe_dispatch_c2(%x: tensor<6x4xf32>, %e: tensor<6x2xi32>) {
  // expected-error @+1 {{'step.moe_dispatch' op expects the 3 experts to divide into 2 groups}}
  %r, %c = step.moe_dispatch %x, %e experts 3 groups 2 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<24x4xf32>, tensor<3xi32>)
  return
}

// -----

func.func @moe_combine_groups(%r: tensor<12x4xf32>, %g: tensor<6x2xf32>, %e: tensor<6x2xi32>) {
  // expected-error @+1 {{'step.moe_combine' op expects rows [G·N·K, D] = [24, D], got 'tensor<12x4xf32>'}}
  %y = step.moe_combine %r, %g, %e experts 4 groups 2 : (tensor<12x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  return
}

// -----

func.func @moe_dispatch_c3(%x: tensor<6x4xf32>, %e: tensor<6x2xi32>) {
  // expected-error @+1 {{'step.moe_dispatch' op expects a capacity of C > 0 pairs per S > 0 tokens with S dividing the 6 tokens, got 2 per 4}}
  %r, %c = step.moe_dispatch %x, %e experts 3 capacity 2 per 4 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<12x4xf32>, tensor<3xi32>)
  return
}

// -----

func.func @moe_combine_capacity(%r: tensor<12x4xf32>, %g: tensor<6x2xf32>, %e: tensor<6x2xi32>) {
  // expected-error @+1 {{'step.moe_combine' op expects rows [block, D] = [6, D], got 'tensor<12x4xf32>'}}
  %y = step.moe_combine %r, %g, %e experts 3 capacity 1 per 3 : (tensor<12x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  return
}
