// RUN: stepc-opt %s -split-input-file -verify-diagnostics

func.func @fused_element_counts(%x: tensor<8x16xf32>, %y: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'stepk.fused' op expects every input and result to hold 128 elements, got 'tensor<16xf32>'}}
  %0 = stepk.fused %x, %y : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: tensor<8x16xf32>, %b: tensor<16xf32>):
    stepk.yield %a : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// -----

func.func @fused_not_elementwise(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stepk.fused %x : (tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: tensor<8x16xf32>):
    // expected-error @+1 {{'step.softmax' op cannot be computed element by element in 'stepk.fused'}}
    %s = step.softmax %a dim 1 : (tensor<8x16xf32>) -> tensor<8x16xf32>
    stepk.yield %s : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// -----

func.func @fused_yield_types(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'stepk.fused' op yields 'tensor<128xf32>' but its results are 'tensor<8x16xf32>'}}
  %0 = stepk.fused %x : (tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: tensor<8x16xf32>):
    %r = step.reshape %a : tensor<8x16xf32> -> tensor<128xf32>
    stepk.yield %r : tensor<128xf32>
  }
  return %0 : tensor<8x16xf32>
}

// -----

func.func @fused_arguments(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'stepk.fused' op expects one body argument per input, got 0 for 1}}
  %0 = stepk.fused %x : (tensor<8x16xf32>) -> tensor<8x16xf32> {
    %c = step.constant dense<1.0> : tensor<8x16xf32>
    stepk.yield %c : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// -----

func.func @gemm_epilogue_name(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'epilogue' [none, gelu, dgelu, bgrad]}}
  %0 = stepk.gemm %x, %w epilogue relu {shared_rhs} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @gemm_gelu_needs_pre(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'stepk.gemm' op returns a second result exactly with the gelu (pre-activation) and bgrad (bias gradient) epilogues}}
  %0 = stepk.gemm %x, %w epilogue gelu {shared_rhs} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @gemm_bgrad_not_weight_grad(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> (tensor<8x32xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'stepk.gemm' op takes the bgrad epilogue only on a weight gradient (a 2-d transposed lhs and result, shared_rhs, no bias)}}
  %0, %1 = stepk.gemm %x, %w epilogue bgrad {shared_rhs} : (tensor<8x16xf32>, tensor<16x32xf32>) -> (tensor<8x32xf32>, tensor<8xf32>)
  return %0, %1 : tensor<8x32xf32>, tensor<8xf32>
}

// -----

func.func @gemm_bgrad_rows(%dy: tensor<64x8xbf16>, %x: tensor<64x32xbf16>) -> (tensor<8x32xf32>, tensor<32xf32>) {
  // expected-error @+1 {{'stepk.gemm' op expects an f32 bias gradient of the result's rows (8), got 'tensor<32xf32>'}}
  %0, %1 = stepk.gemm %dy, %x epilogue bgrad {shared_rhs, transpose_a} : (tensor<64x8xbf16>, tensor<64x32xbf16>) -> (tensor<8x32xf32>, tensor<32xf32>)
  return %0, %1 : tensor<8x32xf32>, tensor<32xf32>
}

// -----

func.func @gemm_bias_dim(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<16xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'stepk.gemm' op expects a bias of the result's last dim (32), got 'tensor<16xf32>'}}
  %0 = stepk.gemm %x, %w bias %b {shared_rhs} : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @gemm_fp8_two_e5m2(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>) -> tensor<8x32xbf16> {
  // expected-error @+1 {{'stepk.gemm' op expects fp8 = [lhs format, rhs format, rhs scaling], formats 0 (e4m3) or 1 (e5m2) and not both e5m2}}
  %0 = stepk.gemm %x, %w {shared_rhs, transpose_b, fp8 = array<i32: 1, 1, 0>} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  return %0 : tensor<8x32xbf16>
}

// -----

func.func @gemm_fp8_one_format(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>) -> tensor<8x32xbf16> {
  // expected-error @+1 {{'stepk.gemm' op expects fp8 = [lhs format, rhs format, rhs scaling]}}
  %0 = stepk.gemm %x, %w {shared_rhs, transpose_b, fp8 = array<i32: 0>} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  return %0 : tensor<8x32xbf16>
}

// -----

func.func @call_scalars(%x: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  // expected-error @+1 {{'stepk.call' op expects i64, i32, f64 and integer-array scalars, got "eight"}}
  %0 = stepk.call "softmax"(%x) {scalars = [2, "eight", 4]} : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  ^bb0(%a: tensor<2x8x4xf32>):
    %y = step.softmax %a dim 1 : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
    stepk.yield %y : tensor<2x8x4xf32>
  }
  return %0 : tensor<2x8x4xf32>
}

// -----

// A scalar's type is its C parameter's: an i16 or an f32 has none.
func.func @call_scalar_types(%x: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  // expected-error @+1 {{'stepk.call' op expects i64, i32, f64 and integer-array scalars, got 8 : i16}}
  %0 = stepk.call "softmax"(%x) {scalars = [2, 8 : i16, 4]} : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  ^bb0(%a: tensor<2x8x4xf32>):
    %y = step.softmax %a dim 1 : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
    stepk.yield %y : tensor<2x8x4xf32>
  }
  return %0 : tensor<2x8x4xf32>
}

// -----

func.func @call_id_check(%t: tensor<16x4xf32>, %ids: tensor<8xi32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'stepk.call' op expects id_check, id_operand and id_bound together}}
  %0 = stepk.call "embedding"(%t, %ids) {id_check = "id", scalars = [8, 16, 4]} : (tensor<16x4xf32>, tensor<8xi32>) -> tensor<8x4xf32> {
  ^bb0(%a: tensor<16x4xf32>, %b: tensor<8xi32>):
    %y = step.embedding %a, %b : (tensor<16x4xf32>, tensor<8xi32>) -> tensor<8x4xf32>
    stepk.yield %y : tensor<8x4xf32>
  }
  return %0 : tensor<8x4xf32>
}

// -----

func.func @attention_heads(%q: tensor<2x8x32xf32>, %k: tensor<2x8x16xf32>) -> tensor<2x8x32xf32> {
  // expected-error @+1 {{'stepk.attention' op expects 4 query heads and 3 key/value heads (a divisor) of 8 channels}}
  %0 = stepk.attention %q, %k, %k heads 4 kv_heads 3 head_dim 8 scale 0.5 : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x32xf32>
  return %0 : tensor<2x8x32xf32>
}

// -----

func.func @attention_lse_shape(%q: tensor<2x8x32xf32>, %k: tensor<2x8x16xf32>) -> tensor<2x8x32xf32> {
  // expected-error @+1 {{'stepk.attention' op expects a log-sum-exp tensor<2x4x8xf32>, got 'tensor<2x8x4xf32>'}}
  %0, %lse = stepk.attention %q, %k, %k heads 4 kv_heads 2 head_dim 8 scale 0.5 : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x4xf32>)
  return %0 : tensor<2x8x32xf32>
}

// -----

func.func @attention_grad_shapes(%q: tensor<2x8x32xf32>, %k: tensor<2x8x16xf32>) -> tensor<2x8x32xf32> {
  // expected-error @+1 {{'stepk.attention_grad' op expects the gradients shaped like what they are gradients of}}
  %dq, %dk, %dv = stepk.attention_grad %q, %q, %k, %k heads 4 kv_heads 2 head_dim 8 scale 0.5 : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>)
  return %dq : tensor<2x8x32xf32>
}

// -----

func.func @attention_grad_saved_lse(%q: tensor<2x8x32xf32>, %k: tensor<2x8x16xf32>, %lse: tensor<2x4x8xbf16>) -> tensor<2x8x32xf32> {
  // expected-error @+1 {{'stepk.attention_grad' op expects a log-sum-exp tensor<2x4x8xf32>, got 'tensor<2x4x8xbf16>'}}
  %dq, %dk, %dv = stepk.attention_grad %q, %q, %k, %k saved %q, %lse heads 4 kv_heads 2 head_dim 8 scale 0.5 : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x32xf32>, tensor<2x4x8xbf16>) -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  return %dq : tensor<2x8x32xf32>
}

// -----

func.func @attention_huge_heads(%q: tensor<2x8x32xf32>, %k: tensor<2x8x16xf32>) -> tensor<2x8x32xf32> {
  // expected-error @+1 {{'stepk.attention' op expects 4611686018427387904 query heads and 2 key/value heads (a divisor) of 8 channels}}
  %0 = stepk.attention %q, %k, %k heads 4611686018427387904 kv_heads 2 head_dim 8 scale 0.5 : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x32xf32>
  return %0 : tensor<2x8x32xf32>
}

// -----

func.func @adamw_group_other_hyperparameters(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %q: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0:6 = stepk.adamw_group %p, %g, %m, %v, %q, %lr, %t, %s : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %d: tensor<4xf32>, %e: tensor<4xf32>, %l: tensor<f32>, %k: tensor<f32>, %x: tensor<f32>):
    %1:3 = step.adamw %a, %b, %c, %d, %l, %k, %x {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    // expected-error @+1 {{'step.adamw' op has other hyperparameters than the group's first update}}
    %2:3 = step.adamw %e, %b, %c, %d, %l, %k, %x {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    stepk.yield %1#0, %1#1, %1#2, %2#0, %2#1, %2#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  return %0#0, %0#3 : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @adamw_group_yield_order(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stepk.adamw_group' op expects to yield every update's results in body order}}
  %0:3 = stepk.adamw_group %p, %g, %m, %v, %lr, %t, %s : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %d: tensor<4xf32>, %l: tensor<f32>, %k: tensor<f32>, %x: tensor<f32>):
    %1:3 = step.adamw %a, %b, %c, %d, %l, %k, %x {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    stepk.yield %1#1, %1#0, %1#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

func.func @adamw_group_not_adamw(%p: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stepk.adamw_group' op expects a body of 'step.adamw' ops only}}
  %0 = stepk.adamw_group %p : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = step.neg %a : tensor<4xf32>
    stepk.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// A malformed update inside a group is reported by its own verifier before
// the group compares hyperparameters (found by fuzz_mlir: no crash).
func.func @adamw_group_update_missing_epsilon(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %q: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0:6 = stepk.adamw_group %p, %g, %m, %v, %q, %lr, %t, %s : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %d: tensor<4xf32>, %e: tensor<4xf32>, %l: tensor<f32>, %k: tensor<f32>, %x: tensor<f32>):
    %1:3 = step.adamw %a, %b, %c, %d, %l, %k, %x {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    // expected-error @+1 {{'step.adamw' op requires attribute 'epsilon'}}
    %2:3 = step.adamw %e, %b, %c, %d, %l, %k, %x {beta1 = 0.9 : f64, beta2 = 0.95 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    stepk.yield %1#0, %1#1, %1#2, %2#0, %2#1, %2#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  return %0#0, %0#3 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A packed attention reads one operand as query, key and value.
func.func @packed_operands(%x: tensor<2x8x24xf32>, %y: tensor<2x8x24xf32>) -> tensor<2x8x8xf32> {
  // expected-error @+1 {{'stepk.attention' op expects one packed operand as query, key and value}}
  %0 = stepk.attention %x, %y, %x packed [0, 8, 16] heads 2 kv_heads 2 head_dim 4 scale 0.5 : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  return %0 : tensor<2x8x8xf32>
}

// -----

// Overlapping columns.
func.func @packed_overlap(%x: tensor<2x8x24xf32>) -> tensor<2x8x8xf32> {
  // expected-error @+1 {{'stepk.attention' op expects query, key and value columns of widths 8, 8, 8 at [0, 4, 16] inside a row of 24, not overlapping}}
  %0 = stepk.attention %x, %x, %x packed [0, 4, 16] heads 2 kv_heads 2 head_dim 4 scale 0.5 : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  return %0 : tensor<2x8x8xf32>
}

// -----

// A packed gradient must write every element of its result: the columns
// tile the row.
func.func @packed_grad_tiles(%g: tensor<2x8x8xf32>, %x: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  // expected-error @+1 {{'stepk.attention_grad' op expects query, key and value columns of widths 8, 8, 8 at [0, 8, 16] inside a row of 32, tiling it}}
  %0 = stepk.attention_grad %g, %x, %x, %x packed [0, 8, 16] heads 2 kv_heads 2 head_dim 4 scale 0.5 : (tensor<2x8x8xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return %0 : tensor<2x8x32xf32>
}

// -----

func.func @packed_grad_results(%g: tensor<2x8x8xf32>, %x: tensor<2x8x24xf32>) -> tensor<2x8x8xf32> {
  // expected-error @+1 {{'stepk.attention_grad' op expects one gradient shaped like the packed operand}}
  %0:3 = stepk.attention_grad %g, %x, %x, %x packed [0, 8, 16] heads 2 kv_heads 2 head_dim 4 scale 0.5 : (tensor<2x8x8xf32>, tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
  return %0#0 : tensor<2x8x8xf32>
}

// -----

func.func @gemm_packed_not_fp8(%x: tensor<128x256xf8E4M3FN>, %s: tensor<2x128xf32>, %w: tensor<256x32xbf16>) -> tensor<128x32xf32> {
  // expected-error @+1 {{'stepk.gemm' op reads packed operands only as an fp8 GEMM without the bgrad epilogue}}
  %0 = stepk.gemm %x, %w lhs_scales %s {shared_rhs} : (tensor<128x256xf8E4M3FN>, tensor<256x32xbf16>, tensor<2x128xf32>) -> tensor<128x32xf32>
  return %0 : tensor<128x32xf32>
}

// -----

func.func @pack_fp8_bytes_type(%x: tensor<256x64xf32>) -> tensor<256x64xbf16> {
  // expected-error @+1 {{'stepk.pack_fp8' op returns f8E4M3FN or f8E5M2 bytes and f32 scales}}
  %b, %s = stepk.pack_fp8 %x : (tensor<256x64xf32>) -> (tensor<256x64xbf16>, tensor<1x256xf32>)
  return %b : tensor<256x64xbf16>
}

// -----

func.func @pack_fp8_transposed_shape(%x: tensor<256x64xf32>) -> tensor<256x64xf8E4M3FN> {
  // expected-error @+1 {{'stepk.pack_fp8' op expects bytes shaped like the input, or [cols, rows] of a 2-d input where transposed, got 'tensor<256x64xf8E4M3FN>'}}
  %b, %s = stepk.pack_fp8 %x transposed : (tensor<256x64xf32>) -> (tensor<256x64xf8E4M3FN>, tensor<2x64xf32>)
  return %b : tensor<256x64xf8E4M3FN>
}

// -----

func.func @pack_fp8_scales_shape(%x: tensor<256x64xf32>) -> tensor<64x256xf8E5M2> {
  // expected-error @+1 {{'stepk.pack_fp8' op expects scales [2, 64] (a block's along the rows), got 'tensor<1x256xf32>'}}
  %b, %s = stepk.pack_fp8 %x transposed : (tensor<256x64xf32>) -> (tensor<64x256xf8E5M2>, tensor<1x256xf32>)
  return %b : tensor<64x256xf8E5M2>
}

// -----

func.func @gemm_packed_without_scales(%x: tensor<8x128xf8E4M3FN>, %w: tensor<128x32xbf16>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'stepk.gemm' op takes lhs_scales / rhs_scales exactly with an operand of fp8 bytes}}
  %0 = stepk.gemm %x, %w {fp8 = array<i32: 0, 0, 0>, shared_rhs} : (tensor<8x128xf8E4M3FN>, tensor<128x32xbf16>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @gemm_packed_lhs_format(%x: tensor<8x128xf8E5M2>, %s: tensor<1x8xf32>, %w: tensor<128x32xbf16>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'stepk.gemm' op expects packed lhs bytes [rows, K] (not transposed) in the format fp8 names, with f32 scales [K / 128, rows]}}
  %0 = stepk.gemm %x, %w lhs_scales %s {fp8 = array<i32: 0, 0, 0>, shared_rhs} : (tensor<8x128xf8E5M2>, tensor<128x32xbf16>, tensor<1x8xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @gemm_packed_rhs_untransposed(%x: tensor<8x128xbf16>, %w: tensor<32x128xf8E4M3FN>, %s: tensor<1x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'stepk.gemm' op expects packed rhs bytes [N, K] (transpose_b) in the format fp8 names, with f32 scales [K / 128, N] (1x128 blocks) or [N / 128, K / 128 padded to 4] (128x128)}}
  %0 = stepk.gemm %x, %w rhs_scales %s {fp8 = array<i32: 0, 0, 1>, shared_rhs} : (tensor<8x128xbf16>, tensor<32x128xf8E4M3FN>, tensor<1x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @pack_fp8_blocks_scales(%w: tensor<256x384xf32>) -> tensor<256x384xf8E4M3FN> {
  // expected-error @+1 {{'stepk.pack_fp8' op packs 128x128 blocks of a 2-d input, scales [2, 4], got 'tensor<256x384xf32>' and 'tensor<2x3xf32>'}}
  %b, %s = stepk.pack_fp8 %w blocks : (tensor<256x384xf32>) -> (tensor<256x384xf8E4M3FN>, tensor<2x3xf32>)
  return %b : tensor<256x384xf8E4M3FN>
}
