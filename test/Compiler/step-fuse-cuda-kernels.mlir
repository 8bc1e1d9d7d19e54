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
// CHECK: %[[D:[a-z_0-9]+]]:3 = stepk.attention_grad %arg3, %arg0, %arg1, %arg2 saved %[[O]], %[[LSE]] heads 4 kv_heads 2 head_dim 8 causal scale 0.35355339059327373 : {{.*}} -> (tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>)
// CHECK-NOT: step.convert
// CHECK: return %[[O]], %[[D]]#0, %[[D]]#1, %[[D]]#2
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

// -----

// A run of AdamW updates (a reshape between them is free) becomes one
// multi-tensor launch per set of hyperparameters, at the run's end: the
// decayed matrices and the undecayed bias interleave in the step. An op
// between updates ends the run.
// CHECK-LABEL: func.func @adamw_groups
// CHECK: step.reshape
// CHECK: step.reshape
// CHECK: step.reshape
// CHECK-NEXT: %[[D:.*]]:6 = stepk.adamw_group %arg0, %arg1, %arg2, %arg3, %{{.*}}, %{{.*}}, %{{.*}}, %arg14, %arg11, %arg12, %arg13 :
// CHECK: step.adamw {{.*}}weight_decay = 1.000000e-01
// CHECK: step.adamw {{.*}}weight_decay = 1.000000e-01
// CHECK: stepk.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[U:.*]]:3 = stepk.adamw_group %arg4, %arg5, %arg6, %arg7, %arg11, %arg12, %arg13 :
// CHECK: step.adamw {{.*}}weight_decay = 0.000000e+00
// CHECK: step.add
// CHECK-NEXT: %[[L:.*]]:3 = stepk.adamw_group %arg16, %[[Y:.*]], %arg6, %arg7, %arg11, %arg12, %arg13 :
// CHECK: return %[[D]]#0, %[[D]]#1, %[[D]]#2, %[[U]]#0, %[[D]]#3, %[[D]]#4, %[[D]]#5, %[[L]]#0
func.func @adamw_groups(%w: tensor<4x4xf32>, %gw: tensor<4x4xf32>, %mw: tensor<4x4xf32>, %vw: tensor<4x4xf32>,
                        %b: tensor<4xf32>, %gb: tensor<4xf32>, %mb: tensor<4xf32>, %vb: tensor<4xf32>,
                        %u: tensor<16xf32>, %gu: tensor<16xf32>, %mu: tensor<16xf32>,
                        %lr: tensor<f32>, %t: tensor<f32>, %s: tensor<f32>, %vu: tensor<4x4xf32>,
                        %x: tensor<4xf32>, %last: tensor<4xf32>)
    -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>)
    attributes {step.train_step} {
  %p0, %m0, %v0 = step.adamw %w, %gw, %mw, %vw, %lr, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  %p1, %m1, %v1 = step.adamw %b, %gb, %mb, %vb, %lr, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %gu2 = step.reshape %gu : tensor<16xf32> -> tensor<4x4xf32>
  %u2 = step.reshape %u : tensor<16xf32> -> tensor<4x4xf32>
  %mu2 = step.reshape %mu : tensor<16xf32> -> tensor<4x4xf32>
  %p2, %m2, %v2 = step.adamw %u2, %gu2, %mu2, %vu, %lr, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  %y = step.add %x, %p1 : tensor<4xf32>
  %p3, %m3, %v3 = step.adamw %last, %y, %mb, %vb, %lr, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %p0, %m0, %v0, %p1, %p2, %m2, %v2, %p3, %y : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A forward recomputed in the backward (remat) is the one its backward
// reads: the first forward returns no log-sum-exp, and its output need not
// live until the backward.
// CHECK-LABEL: func.func @attention_recomputed
// CHECK: %[[O1:[a-z_0-9]+]] = stepk.attention %arg0, %arg1, %arg1 heads 2 kv_heads 2 head_dim 8 scale 0.35355339059327373 : ({{.*}}) -> tensor<2x16x16xf32>
// CHECK: %[[O2:[a-z_0-9]+]], %[[LSE:[a-z_0-9]+]] = stepk.attention %arg0, %arg1, %arg1
// CHECK: stepk.attention_grad %arg2, %arg0, %arg1, %arg1 saved %[[O2]], %[[LSE]]
func.func @attention_recomputed(%q: tensor<2x16x16xf32>, %k: tensor<2x16x16xf32>, %g: tensor<2x16x16xf32>) -> (tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>) attributes {step.train_step} {
  %o = step.attention %q, %k, %k heads 2 kv_heads 2 head_dim 8 : (tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %r = step.attention %q, %k, %k heads 2 kv_heads 2 head_dim 8 : (tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %dq, %dk, %dv = step.attention_grad %g, %q, %k, %k heads 2 kv_heads 2 head_dim 8 : (tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> (tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>)
  return %o, %r, %dq, %dk, %dv : tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>
}

// -----

// An update that reads an earlier update's result is not in its group: it
// starts the next one (every update ends up in a group the CUDA emitter
// prints).
// CHECK-LABEL: func.func @adamw_chained
// CHECK: %[[A:.*]]:3 = stepk.adamw_group %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6 :
// CHECK: %[[B:.*]]:3 = stepk.adamw_group %[[A]]#0, %arg1, %[[A]]#1, %[[A]]#2, %arg4, %arg5, %arg6 :
// CHECK: return %[[B]]#0
func.func @adamw_chained(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>, %s: tensor<f32>) -> tensor<4xf32> attributes {step.train_step} {
  %p1, %m1, %v1 = step.adamw %p, %g, %m, %v, %lr, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %p2, %m2, %v2 = step.adamw %p1, %g, %m1, %v1, %lr, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %p2 : tensor<4xf32>
}

// -----

// The packed QKV projection under bf16: the mixed-precision pass rounds each
// slice; the three become columns of one rounded projection, which the
// bias GEMM writes in bf16 and the attention reads in place (no slice, no
// convert); the backward reads the same projection and the saved forward,
// and writes its three gradients into one packed bf16 result: the widened
// pads and their adds become one widening of it, and the rounding of that
// sum for the next GEMM is the kernel's own result.
// CHECK-LABEL: func.func @packed_qkv_bf16
// CHECK: %[[P:.*]] = stepk.gemm %arg0, %arg1 bias %arg2 {shared_rhs, transpose_b} : (tensor<2x8x8xbf16>, tensor<24x8xbf16>, tensor<24xf32>) -> tensor<2x8x24xbf16>
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = stepk.attention %[[P]], %[[P]], %[[P]] packed [0, 8, 16] heads 2 kv_heads 2 head_dim 4 causal scale 5.000000e-01 : {{.*}} -> (tensor<2x8x8xbf16>, tensor<2x2x8xf32>)
// CHECK-NEXT: %[[D:.*]] = stepk.attention_grad %arg3, %[[P]], %[[P]], %[[P]] saved %[[O]], %[[LSE]] packed [0, 8, 16] heads 2 kv_heads 2 head_dim 4 causal scale 5.000000e-01 : {{.*}} -> tensor<2x8x24xbf16>
// CHECK-NEXT: %[[W:.*]] = step.convert %[[D]] : tensor<2x8x24xbf16> -> tensor<2x8x24xf32>
// CHECK-NOT: step.slice
// CHECK-NOT: step.pad
// CHECK-NOT: step.add
// CHECK: stepk.gemm %[[D]], %arg1 {shared_rhs}
// CHECK: return %[[O]], %[[W]]
func.func @packed_qkv_bf16(%x: tensor<2x8x8xbf16>, %w: tensor<24x8xbf16>, %b: tensor<24xf32>, %do: tensor<2x8x8xbf16>) -> (tensor<2x8x8xbf16>, tensor<2x8x24xf32>, tensor<2x8x8xf32>) attributes {step.train_step} {
  %p16 = step.matmul %x, %w transpose_b : (tensor<2x8x8xbf16>, tensor<24x8xbf16>) -> tensor<2x8x24xbf16>
  %p = step.convert %p16 : tensor<2x8x24xbf16> -> tensor<2x8x24xf32>
  %bb = step.broadcast %b : tensor<24xf32> -> tensor<2x8x24xf32>
  %s = step.add %p, %bb : tensor<2x8x24xf32>
  %q = step.slice %s offsets [0, 0, 0] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %k = step.slice %s offsets [0, 0, 8] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %v = step.slice %s offsets [0, 0, 16] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %q16 = step.convert %q : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %k16 = step.convert %k : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %v16 = step.convert %v : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %o = step.attention %q16, %k16, %v16 heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %dq16, %dk16, %dv16 = step.attention_grad %do, %q16, %k16, %v16 heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>)
  %dq = step.convert %dq16 : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %dk = step.convert %dk16 : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %dv = step.convert %dv16 : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %pq = step.pad %dq low [0, 0, 0] high [0, 0, 16] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pk = step.pad %dk low [0, 0, 8] high [0, 0, 8] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pv = step.pad %dv low [0, 0, 16] high [0, 0, 0] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %kv = step.add %pk, %pv : tensor<2x8x24xf32>
  %d = step.add %kv, %pq : tensor<2x8x24xf32>
  %d16 = step.convert %d : tensor<2x8x24xf32> -> tensor<2x8x24xbf16>
  %dx16 = step.matmul %d16, %w : (tensor<2x8x24xbf16>, tensor<24x8xbf16>) -> tensor<2x8x8xbf16>
  %dx = step.convert %dx16 : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  return %o, %d, %dx : tensor<2x8x8xbf16>, tensor<2x8x24xf32>, tensor<2x8x8xf32>
}

// -----

// In f32 the slices are read in place the same way and the gradient is
// written packed in f32 (no widening). A gradient whose pads do not put
// each part back at its slice is not packed: it keeps its three results
// and the slices it reads (its forward still reads the projection).
// CHECK-LABEL: func.func @packed_qkv_f32
// CHECK: stepk.attention %arg0, %arg0, %arg0 packed [0, 8, 16]
// CHECK: %[[D:.*]] = stepk.attention_grad %arg1, %arg0, %arg0, %arg0 saved {{.*}} packed [0, 8, 16] {{.*}} -> tensor<2x8x24xf32>
// CHECK-NEXT: return {{.*}}, %[[D]]
// CHECK-LABEL: func.func @unpacked_gradient
// CHECK: step.slice
// CHECK: stepk.attention %arg0, %arg0, %arg0 packed [0, 8, 16]
// CHECK: stepk.attention_grad {{.*}} -> (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
// CHECK: step.pad
func.func @packed_qkv_f32(%s: tensor<2x8x24xf32>, %do: tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x24xf32>) attributes {step.train_step} {
  %q = step.slice %s offsets [0, 0, 0] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %k = step.slice %s offsets [0, 0, 8] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %v = step.slice %s offsets [0, 0, 16] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %o = step.attention %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dq, %dk, %dv = step.attention_grad %do, %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
  %pq = step.pad %dq low [0, 0, 0] high [0, 0, 16] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pk = step.pad %dk low [0, 0, 8] high [0, 0, 8] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pv = step.pad %dv low [0, 0, 16] high [0, 0, 0] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %qk = step.add %pq, %pk : tensor<2x8x24xf32>
  %d = step.add %qk, %pv : tensor<2x8x24xf32>
  return %o, %d : tensor<2x8x8xf32>, tensor<2x8x24xf32>
}
func.func @unpacked_gradient(%s: tensor<2x8x24xf32>, %do: tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x24xf32>) attributes {step.train_step} {
  %q = step.slice %s offsets [0, 0, 0] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %k = step.slice %s offsets [0, 0, 8] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %v = step.slice %s offsets [0, 0, 16] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %o = step.attention %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dq, %dk, %dv = step.attention_grad %do, %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
  %pq = step.pad %dq low [0, 0, 8] high [0, 0, 8] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pk = step.pad %dk low [0, 0, 0] high [0, 0, 16] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pv = step.pad %dv low [0, 0, 16] high [0, 0, 0] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %qk = step.add %pq, %pk : tensor<2x8x24xf32>
  %d = step.add %qk, %pv : tensor<2x8x24xf32>
  return %o, %d : tensor<2x8x8xf32>, tensor<2x8x24xf32>
}

// -----

// A bias's gradient beside its weight's: the weight-gradient GEMM sums it in
// its bgrad epilogue (BGRADB), whether the sum reads the output gradient
// itself (fp32), its widening, or the f32 values the GEMM reads rounded
// (summed from the rounding, as autocast does). No reduce_sum is left.
// CHECK-LABEL: func.func @bias_grads
// CHECK-NOT: step.reduce_sum
// CHECK: %{{.*}}, %[[DB0:.*]] = stepk.gemm %{{.*}}, %{{.*}} epilogue bgrad {shared_rhs, transpose_a} : (tensor<16x32xf32>, tensor<16x8xf32>) -> (tensor<32x8xf32>, tensor<32xf32>)
// CHECK: %{{.*}}, %[[DB1:.*]] = stepk.gemm %{{.*}}, %{{.*}} epilogue bgrad {shared_rhs, transpose_a} : (tensor<16x32xbf16>, tensor<16x8xbf16>) -> (tensor<32x8xf32>, tensor<32xf32>)
// CHECK: %{{.*}}, %[[DB2:.*]] = stepk.gemm %{{.*}}, %{{.*}} epilogue bgrad {shared_rhs, transpose_a} : (tensor<16x32xbf16>, tensor<16x8xbf16>) -> (tensor<32x8xf32>, tensor<32xf32>)
// CHECK-NOT: step.reduce_sum
// CHECK: return %{{.*}}, %[[DB0]], %{{.*}}, %[[DB1]], %{{.*}}, %[[DB2]], %{{.*}}
func.func @bias_grads(%dy: tensor<2x8x32xf32>, %x: tensor<16x8xf32>, %dyh: tensor<2x8x32xbf16>, %xh: tensor<16x8xbf16>, %dyf: tensor<2x8x32xf32>)
    -> (tensor<32x8xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<32xf32>, tensor<2x8x32xf32>) attributes {step.train_step} {
  %db0 = step.reduce_sum %dy dims [0, 1] : (tensor<2x8x32xf32>) -> tensor<32xf32>
  %r0 = step.reshape %dy : tensor<2x8x32xf32> -> tensor<16x32xf32>
  %dw0 = step.matmul %r0, %x transpose_a : (tensor<16x32xf32>, tensor<16x8xf32>) -> tensor<32x8xf32>
  %w1 = step.convert %dyh : tensor<2x8x32xbf16> -> tensor<2x8x32xf32>
  %db1 = step.reduce_sum %w1 dims [0, 1] : (tensor<2x8x32xf32>) -> tensor<32xf32>
  %r1 = step.reshape %dyh : tensor<2x8x32xbf16> -> tensor<16x32xbf16>
  %p1 = step.matmul %r1, %xh transpose_a : (tensor<16x32xbf16>, tensor<16x8xbf16>) -> tensor<32x8xbf16>
  %dw1 = step.convert %p1 : tensor<32x8xbf16> -> tensor<32x8xf32>
  %db2 = step.reduce_sum %dyf dims [0, 1] : (tensor<2x8x32xf32>) -> tensor<32xf32>
  %n2 = step.convert %dyf : tensor<2x8x32xf32> -> tensor<2x8x32xbf16>
  %r2 = step.reshape %n2 : tensor<2x8x32xbf16> -> tensor<16x32xbf16>
  %p2 = step.matmul %r2, %xh transpose_a : (tensor<16x32xbf16>, tensor<16x8xbf16>) -> tensor<32x8xbf16>
  %dw2 = step.convert %p2 : tensor<32x8xbf16> -> tensor<32x8xf32>
  // The f32 gradient has another reader: it stays.
  %other = step.mul %dyf, %dyf : tensor<2x8x32xf32>
  return %dw0, %db0, %dw1, %db1, %dw2, %db2, %other : tensor<32x8xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<32xf32>, tensor<2x8x32xf32>
}

// -----

// Must not fire: the sum is read before the weight-gradient GEMM runs (an
// all-reduce scheduled early); a sum over fewer dims is no bias gradient; a
// GEMM whose lhs is not transposed computes no weight gradient.
// CHECK-LABEL: func.func @no_bias_grad
// CHECK-NOT: bgrad
// CHECK-COUNT-3: step.reduce_sum
// CHECK-NOT: bgrad
func.func @no_bias_grad(%dy: tensor<2x8x32xf32>, %x: tensor<16x8xf32>, %dy2: tensor<2x8x32xf32>, %w: tensor<32x8xf32>)
    -> (tensor<32x8xf32>, tensor<32xf32>, tensor<8x32xf32>, tensor<16x8xf32>, tensor<32xf32>) attributes {step.train_step} {
  %db = step.reduce_sum %dy dims [0, 1] : (tensor<2x8x32xf32>) -> tensor<32xf32>
  %early = step.mul %db, %db : tensor<32xf32>
  %partial = step.reduce_sum %dy dims [0] : (tensor<2x8x32xf32>) -> tensor<8x32xf32>
  %r = step.reshape %dy : tensor<2x8x32xf32> -> tensor<16x32xf32>
  %dw = step.matmul %r, %x transpose_a : (tensor<16x32xf32>, tensor<16x8xf32>) -> tensor<32x8xf32>
  %rows = step.reduce_sum %dy2 dims [0, 1] : (tensor<2x8x32xf32>) -> tensor<32xf32>
  %r2 = step.reshape %dy2 : tensor<2x8x32xf32> -> tensor<16x32xf32>
  %dx = step.matmul %r2, %w : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
  return %dw, %early, %partial, %dx, %rows : tensor<32x8xf32>, tensor<32xf32>, tensor<8x32xf32>, tensor<16x8xf32>, tensor<32xf32>
}

// -----

// A bf16 attention whose output is widened writes f32 itself, unless cuDNN
// may run it (head dim 64 or 128, no mask): cuDNN writes bf16 alone, so an
// f32 output would send it, and the backward reading it, to our own kernels.
// The widening then stays for the f32 readers (under fp8, a packing pass
// that reads the bf16 itself).
// CHECK-LABEL: func.func @attention_widened
// CHECK: %[[O:[a-z_0-9]+]], %[[L:[a-z_0-9]+]] = stepk.attention %arg0, %arg0, %arg0 heads 2 kv_heads 2 head_dim 64 {{.*}} -> (tensor<2x16x128xbf16>, tensor<2x2x16xf32>)
// CHECK: step.convert %[[O]] : tensor<2x16x128xbf16> -> tensor<2x16x128xf32>
// CHECK: stepk.attention_grad %arg1, %arg0, %arg0, %arg0 saved %[[O]], %[[L]]
// CHECK: stepk.attention %arg2, %arg2, %arg2 heads 2 kv_heads 2 head_dim 8 {{.*}} -> tensor<2x16x16xf32>
// CHECK: stepk.attention %arg0, %arg0, %arg0 mask %arg3 heads 2 kv_heads 2 head_dim 64 {{.*}} -> tensor<2x16x128xf32>
func.func @attention_widened(%q: tensor<2x16x128xbf16>, %g: tensor<2x16x128xbf16>, %s: tensor<2x16x16xbf16>, %m: tensor<2x2x16x16xf32>) -> (tensor<2x16x128xf32>, tensor<2x16x128xbf16>, tensor<2x16x16xf32>, tensor<2x16x128xf32>) attributes {step.train_step} {
  %o = step.attention %q, %q, %q heads 2 kv_heads 2 head_dim 64 : (tensor<2x16x128xbf16>, tensor<2x16x128xbf16>, tensor<2x16x128xbf16>) -> tensor<2x16x128xbf16>
  %w = step.convert %o : tensor<2x16x128xbf16> -> tensor<2x16x128xf32>
  %dq, %dk, %dv = step.attention_grad %g, %q, %q, %q heads 2 kv_heads 2 head_dim 64 : (tensor<2x16x128xbf16>, tensor<2x16x128xbf16>, tensor<2x16x128xbf16>, tensor<2x16x128xbf16>) -> (tensor<2x16x128xbf16>, tensor<2x16x128xbf16>, tensor<2x16x128xbf16>)
  %o8 = step.attention %s, %s, %s heads 2 kv_heads 2 head_dim 8 : (tensor<2x16x16xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>) -> tensor<2x16x16xbf16>
  %w8 = step.convert %o8 : tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
  %om = step.attention %q, %q, %q mask %m heads 2 kv_heads 2 head_dim 64 : (tensor<2x16x128xbf16>, tensor<2x16x128xbf16>, tensor<2x16x128xbf16>, tensor<2x2x16x16xf32>) -> tensor<2x16x128xbf16>
  %wm = step.convert %om : tensor<2x16x128xbf16> -> tensor<2x16x128xf32>
  return %w, %dq, %w8, %wm : tensor<2x16x128xf32>, tensor<2x16x128xbf16>, tensor<2x16x16xf32>, tensor<2x16x128xf32>
}
