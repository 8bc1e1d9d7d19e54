// RUN: stepc-opt %s -split-input-file -step-fuse-cuda-kernels | FileCheck %s

// GEMM + bias + tanh GELU: one stepk.gemm with the GELU epilogue, which also
// returns the pre-activation; and in the backward, the GELU gradient of a
// GEMM is its DGELU epilogue reading that pre-activation.
// CHECK-LABEL: func.func @bias_gelu_dgelu
// CHECK: %[[G:.*]], %[[PRE:.*]] = stepk.gemm %arg0, %arg1 bias %arg2 epilogue gelu {shared_rhs, transpose_b}
// CHECK-NOT: step.broadcast
// CHECK-NOT: step.add
// CHECK-NOT: step.gelu
// CHECK: %[[DX:.*]] = stepk.gemm %arg3, %arg1 aux %[[PRE]] epilogue dgelu {shared_rhs, transpose_b}
// CHECK: return %[[G]], %[[DX]]
func.func @bias_gelu_dgelu(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) attributes {step.train_step} {
  %h = step.matmul %x, %w transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %bb = step.broadcast %b : tensor<32xf32> -> tensor<8x32xf32>
  %a = step.add %h, %bb : tensor<8x32xf32>
  %g = step.gelu %a approximate tanh : tensor<8x32xf32>
  %d = step.matmul %dy, %w transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %dx = step.gelu_grad %d, %a approximate tanh : tensor<8x32xf32>
  return %g, %dx : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// A bf16 GEMM whose result only feeds a widening convert writes f32.
// CHECK-LABEL: func.func @widening
// CHECK: %[[R:.*]] = stepk.gemm %arg0, %arg1 {shared_rhs} : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xf32>
// CHECK-NOT: step.convert
// CHECK: return %[[R]]
func.func @widening(%x: tensor<8x16xbf16>, %w: tensor<16x32xbf16>) -> tensor<8x32xf32> attributes {step.train_step} {
  %h = step.matmul %x, %w : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %f = step.convert %h : tensor<8x32xbf16> -> tensor<8x32xf32>
  return %f : tensor<8x32xf32>
}

// -----

// Must not fire: the GEMM's result has another user than the add, so the
// add cannot write over it in the epilogue; and an exact (erf) GELU has no
// cuBLASLt epilogue.
// CHECK-LABEL: func.func @no_fold
// CHECK-NOT: stepk.gemm
// CHECK: step.matmul
// CHECK: step.add
// CHECK: step.gelu
func.func @no_fold(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) attributes {step.train_step} {
  %h = step.matmul %x, %w transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %bb = step.broadcast %b : tensor<32xf32> -> tensor<8x32xf32>
  %a = step.add %h, %bb : tensor<8x32xf32>
  %e = step.gelu %h : tensor<8x32xf32>
  return %a, %e : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Must not fire: the bias is computed after the GEMM runs (the epilogue
// would read it before it exists).
// CHECK-LABEL: func.func @bias_too_late
// CHECK-NOT: stepk.gemm
func.func @bias_too_late(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> attributes {step.train_step} {
  %h = step.matmul %x, %w transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %b2 = step.exp %b : tensor<32xf32>
  %bb = step.broadcast %b2 : tensor<32xf32> -> tensor<8x32xf32>
  %a = step.add %h, %bb : tensor<8x32xf32>
  return %a : tensor<8x32xf32>
}

// -----

// A bf16 attention and its backward: the forward writes f32 (its widening
// convert folded in) and returns its log-sum-exp, [B, Hq, Tq] f32, which the
// backward reads with the forward's output as operands (the saved forward is
// dataflow the memory plan sees); the backward's widened gradients too.
// CHECK-LABEL: func.func @attention_saved
// CHECK: %[[O:[a-z_0-9]+]], %[[LSE:[a-z_0-9]+]] = stepk.attention %arg0, %arg1, %arg2 heads 4 kv_heads 2 head_dim 8 causal scale 0.35355339059327373 : (tensor<2x16x32xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>) -> (tensor<2x16x32xf32>, tensor<2x4x16xf32>)
// CHECK-NOT: step.convert
// CHECK: %[[DQ:[a-z_0-9]+]], %[[DK:[a-z_0-9]+]], %[[DV:[a-z_0-9]+]] = stepk.attention_grad %arg3, %arg0, %arg1, %arg2 saved %[[O]], %[[LSE]] heads 4 kv_heads 2 head_dim 8 causal scale 0.35355339059327373 : {{.*}} -> (tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>)
// CHECK-NOT: step.convert
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @attention_saved(%q: tensor<2x16x32xbf16>, %k: tensor<2x16x16xbf16>, %v: tensor<2x16x16xbf16>, %g: tensor<2x16x32xbf16>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>) attributes {step.train_step} {
  %o = step.attention %q, %k, %v heads 4 kv_heads 2 head_dim 8 causal : (tensor<2x16x32xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>) -> tensor<2x16x32xbf16>
  %of = step.convert %o : tensor<2x16x32xbf16> -> tensor<2x16x32xf32>
  %dq, %dk, %dv = step.attention_grad %g, %q, %k, %v heads 4 kv_heads 2 head_dim 8 causal : (tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>) -> (tensor<2x16x32xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>)
  %dqf = step.convert %dq : tensor<2x16x32xbf16> -> tensor<2x16x32xf32>
  %dkf = step.convert %dk : tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
  %dvf = step.convert %dv : tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
  return %of, %dqf, %dkf, %dvf : tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>
}

// -----

// A forward with no backward (an eval step) returns no log-sum-exp; a
// backward whose forward differs (another query) recomputes it; a convert
// that is not the result's only user is not folded.
// CHECK-LABEL: func.func @attention_unsaved
// CHECK: %[[O:[a-z_0-9]+]] = stepk.attention %arg0, %arg1, %arg1 heads 2 kv_heads 2 head_dim 8 scale 0.35355339059327373 : ({{.*}}) -> tensor<2x16x16xbf16>
// CHECK: step.convert %[[O]]
// CHECK: stepk.attention_grad %arg2, %arg2, %arg1, %arg1 heads 2
// CHECK-NOT: saved
func.func @attention_unsaved(%q: tensor<2x16x16xbf16>, %k: tensor<2x16x16xbf16>, %g: tensor<2x16x16xbf16>) -> (tensor<2x16x16xbf16>, tensor<2x16x16xf32>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>) attributes {step.train_step} {
  %o = step.attention %q, %k, %k heads 2 kv_heads 2 head_dim 8 : (tensor<2x16x16xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>) -> tensor<2x16x16xbf16>
  %of = step.convert %o : tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
  %dq, %dk, %dv = step.attention_grad %g, %g, %k, %k heads 2 kv_heads 2 head_dim 8 : (tensor<2x16x16xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>) -> (tensor<2x16x16xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>)
  return %o, %of, %dq, %dk, %dv : tensor<2x16x16xbf16>, tensor<2x16x16xf32>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>
}
