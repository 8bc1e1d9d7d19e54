// RUN: stepc-opt %s -split-input-file -step-lower-library-calls | FileCheck %s --check-prefixes=CHECK,CPU
// RUN: stepc-opt %s -split-input-file -step-lower-library-calls=target=cuda | FileCheck %s --check-prefixes=CHECK,CUDA

// A norm and its gradient: (rows, d, eps), and on CUDA the gradient's
// scratch (PlanNormGrad: the statistics and the column partial sums).
// CHECK-LABEL: func.func @layer_norm
// CHECK: %[[Y:.*]] = stepk.call "layer_norm"(%arg0, %arg1, %arg2) {scalars = [16, 32, 1.000000e-05]}
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: step.layer_norm
// CHECK-NEXT: stepk.yield
// CPU: stepk.call "layer_norm_grad"(%arg3, %arg0, %arg1) {scalars = [16, 32, 1.000000e-05]}
// CUDA: stepk.call "layer_norm_grad"(%arg3, %arg0, %arg1) {scalars = [16, 32, 1.000000e-05], scratch_bytes = {{[0-9]+}} : i64}
func.func @layer_norm(%x: tensor<16x32xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>, %dy: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>) attributes {step.train_step} {
  %y = step.layer_norm %x, %w, %b : (tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %dx, %dw, %db = step.layer_norm_grad %dy, %x, %w : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<32xf32>) -> (tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>)
  return %y, %dx, %dw, %db : tensor<16x32xf32>, tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>
}

// -----

// A softmax along the middle dim: (outer, length, inner).
// CHECK-LABEL: func.func @softmax
// CHECK: stepk.call "softmax"(%arg0) {scalars = [2, 8, 4]}
func.func @softmax(%x: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> attributes {step.train_step} {
  %y = step.softmax %x dim 1 : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %y : tensor<2x8x4xf32>
}

// -----

// Must not fire: ops outside the table, and functions that are not a step.
// CHECK-LABEL: func.func @not_in_table
// CHECK-NOT: stepk.call
// CHECK-LABEL: func.func @not_a_step
// CHECK-NOT: stepk.call
func.func @not_in_table(%x: tensor<16xf32>) -> tensor<8x16xf32> attributes {step.train_step} {
  %b = step.broadcast %x : tensor<16xf32> -> tensor<8x16xf32>
  return %b : tensor<8x16xf32>
}
func.func @not_a_step(%x: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  %y = step.softmax %x dim 1 : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %y : tensor<2x8x4xf32>
}

// -----

// Kernels that check ids carry what they check: the embedding its ids
// against the table's rows, the cross-entropy its targets against the
// classes (on CUDA also its scratch, one float per row).
// CHECK-LABEL: func.func @ids
// CHECK: stepk.call "embedding"(%arg0, %arg1) {id_bound = 16 : i64, id_check = "id", id_operand = 1 : i64, scalars = [8, 16, 4]}
// CPU: stepk.call "cross_entropy"(%{{.*}}, %arg2) {id_bound = 16 : i64, id_check = "target", id_operand = 1 : i64, scalars = [8, 16]}
// CUDA: stepk.call "cross_entropy"(%{{.*}}, %arg2) {id_bound = 16 : i64, id_check = "target", id_operand = 1 : i64, scalars = [8, 16], scratch_bytes = 32 : i64}
func.func @ids(%wte: tensor<16x4xf32>, %tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {step.train_step} {
  %x = step.embedding %wte, %tokens : (tensor<16x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
  %logits = step.matmul %x, %wte transpose_b : (tensor<2x4x4xf32>, tensor<16x4xf32>) -> tensor<2x4x16xf32>
  %loss = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Static arrays are scalars too: a reduction's input shape and mask of
// reduced dims, and a transpose's permutation (on CUDA the reduction also
// takes scratch for its partial sums).
// CHECK-LABEL: func.func @arrays
// CPU: stepk.call "reduce"(%arg0) {scalars = [array<i64: 2, 8, 4>, 3 : i32, array<i32: 1, 0, 1>, 0 : i32]}
// CUDA: stepk.call "reduce"(%arg0) {scalars = [array<i64: 2, 8, 4>, 3 : i32, array<i32: 1, 0, 1>, 0 : i32], scratch_bytes = {{[0-9]+}} : i64}
// CHECK: stepk.call "transpose"(%arg0) {scalars = [array<i64: 2, 8, 4>, 3 : i32, array<i64: 2, 0, 1>]}
func.func @arrays(%x: tensor<2x8x4xf32>) -> (tensor<8xf32>, tensor<4x2x8xf32>) attributes {step.train_step} {
  %s = step.reduce_sum %x dims [0, 2] : (tensor<2x8x4xf32>) -> tensor<8xf32>
  %t = step.transpose %x [2, 0, 1] : (tensor<2x8x4xf32>) -> tensor<4x2x8xf32>
  return %s, %t : tensor<8xf32>, tensor<4x2x8xf32>
}

// -----

// On the CPU, attention on three last-dim slices of one [B, T, 3C] tensor
// reads them in place: "attention_packed"(x) with (batch, length, heads,
// kv_heads, head_dim, causal, scale, width, offsets of q, k, v), and the
// gradient's pads and adds back into [B, T, 3C] become one call writing the
// three parts; the slices go. Both bodies keep what the kernel computes.
// On CUDA nothing changes.
// CHECK-LABEL: func.func @packed_attention
// CPU-NOT: step.slice
// CPU: %[[O:.*]] = stepk.call "attention_packed"(%arg0) {scalars = [2, 8, 2, 2, 4, 1 : i32, 5.000000e-01, 24, 0, 8, 16]}
// CPU: step.slice
// CPU: step.slice
// CPU: step.slice
// CPU: step.attention
// CPU: stepk.yield
// CPU: %[[D:.*]] = stepk.call "attention_grad_packed"(%arg1, %arg0) {scalars = [2, 8, 2, 2, 4, 1 : i32, 5.000000e-01, 24, 0, 8, 16]}
// CPU: step.attention_grad
// CPU-COUNT-3: step.pad
// CPU-COUNT-2: step.add
// CPU: stepk.yield
// CPU-NOT: step.pad
// CPU: return %[[O]], %[[D]]
// CUDA-COUNT-3: step.slice
// CUDA-NOT: attention_packed
// CUDA: step.attention
// CUDA-COUNT-3: step.pad
func.func @packed_attention(%x: tensor<2x8x24xf32>, %do: tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x24xf32>) attributes {step.train_step} {
  %q = step.slice %x offsets [0, 0, 0] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %k = step.slice %x offsets [0, 0, 8] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %v = step.slice %x offsets [0, 0, 16] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %o = step.attention %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dq, %dk, %dv = step.attention_grad %do, %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
  %pv = step.pad %dv low [0, 0, 16] high [0, 0, 0] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pk = step.pad %dk low [0, 0, 8] high [0, 0, 8] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %s = step.add %pv, %pk : tensor<2x8x24xf32>
  %pq = step.pad %dq low [0, 0, 0] high [0, 0, 16] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %d = step.add %s, %pq : tensor<2x8x24xf32>
  return %o, %d : tensor<2x8x8xf32>, tensor<2x8x24xf32>
}

// -----

// The gradient stays as it is when the slices do not tile the width (a
// column nothing writes) or a pad is not at its slice; the forward, which
// only reads, is packed all the same.
// CHECK-LABEL: func.func @unpacked_gradient
// CPU: stepk.call "attention_packed"(%arg0)
// CPU: step.attention_grad
// CPU-COUNT-3: step.pad
// CPU-LABEL: func.func @misplaced_pad
// CPU: stepk.call "attention_packed"(%arg0)
// CPU: step.attention_grad
// CPU-NOT: attention_grad_packed
func.func @unpacked_gradient(%x: tensor<2x8x32xf32>, %do: tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x32xf32>) attributes {step.train_step} {
  %q = step.slice %x offsets [0, 0, 0] sizes [2, 8, 8] : (tensor<2x8x32xf32>) -> tensor<2x8x8xf32>
  %k = step.slice %x offsets [0, 0, 8] sizes [2, 8, 8] : (tensor<2x8x32xf32>) -> tensor<2x8x8xf32>
  %v = step.slice %x offsets [0, 0, 16] sizes [2, 8, 8] : (tensor<2x8x32xf32>) -> tensor<2x8x8xf32>
  %o = step.attention %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dq, %dk, %dv = step.attention_grad %do, %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
  %pq = step.pad %dq low [0, 0, 0] high [0, 0, 24] : (tensor<2x8x8xf32>) -> tensor<2x8x32xf32>
  %pk = step.pad %dk low [0, 0, 8] high [0, 0, 16] : (tensor<2x8x8xf32>) -> tensor<2x8x32xf32>
  %pv = step.pad %dv low [0, 0, 16] high [0, 0, 8] : (tensor<2x8x8xf32>) -> tensor<2x8x32xf32>
  %s = step.add %pq, %pk : tensor<2x8x32xf32>
  %d = step.add %s, %pv : tensor<2x8x32xf32>
  return %o, %d : tensor<2x8x8xf32>, tensor<2x8x32xf32>
}
func.func @misplaced_pad(%x: tensor<2x8x24xf32>, %do: tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x24xf32>) attributes {step.train_step} {
  %q = step.slice %x offsets [0, 0, 0] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %k = step.slice %x offsets [0, 0, 8] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %v = step.slice %x offsets [0, 0, 16] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %o = step.attention %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dq, %dk, %dv = step.attention_grad %do, %q, %k, %v heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
  %pq = step.pad %dq low [0, 0, 8] high [0, 0, 8] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pk = step.pad %dk low [0, 0, 0] high [0, 0, 16] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pv = step.pad %dv low [0, 0, 16] high [0, 0, 0] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %s = step.add %pq, %pk : tensor<2x8x24xf32>
  %d = step.add %s, %pv : tensor<2x8x24xf32>
  return %o, %d : tensor<2x8x8xf32>, tensor<2x8x24xf32>
}

// -----

// On the CPU the loss and its gradient (same logits and targets) are one
// kernel with both results, at the loss's place; the gradient's constant
// seed moves up to it. With other targets, or on CUDA, two kernels.
// CHECK-LABEL: func.func @fused_loss
// CPU: %[[SEED:.*]] = step.constant dense<1.000000e+00>
// CPU-NEXT: %[[BOTH:.*]]:2 = stepk.call "cross_entropy_fused"(%arg0, %arg1, %[[SEED]]) {id_bound = 16 : i64, id_check = "target", id_operand = 1 : i64, scalars = [8, 16]}
// CPU: step.cross_entropy
// CPU: step.cross_entropy_grad
// CPU: return %[[BOTH]]#0, %[[BOTH]]#1
// CUDA: stepk.call "cross_entropy"(
// CUDA: stepk.call "cross_entropy_grad"(
// CHECK-LABEL: func.func @other_targets
// CHECK-NOT: cross_entropy_fused
func.func @fused_loss(%logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x16xf32>) attributes {step.train_step} {
  %loss = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %one = step.constant dense<1.0> : tensor<f32>
  %d = step.cross_entropy_grad %one, %logits, %targets : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  return %loss, %d : tensor<f32>, tensor<2x4x16xf32>
}
func.func @other_targets(%logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>, %others: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x16xf32>) attributes {step.train_step} {
  %loss = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %one = step.constant dense<1.0> : tensor<f32>
  %d = step.cross_entropy_grad %one, %logits, %others : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  return %loss, %d : tensor<f32>, tensor<2x4x16xf32>
}

// -----

// A gradient only rounded to bf16 (the output layer's GEMM operand) is
// written rounded by the fused kernel; the rounding is in its body.
// CHECK-LABEL: func.func @fused_loss_bf16
// CPU: %[[BOTH:.*]]:2 = stepk.call "cross_entropy_fused_bf16"(%arg0, %arg1, %{{.*}}) {{.*}} -> (tensor<f32>, tensor<2x4x16xbf16>)
// CPU: step.cross_entropy_grad
// CPU-NEXT: step.convert
// CPU: return %[[BOTH]]#0, %[[BOTH]]#1
func.func @fused_loss_bf16(%logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x16xbf16>) attributes {step.train_step} {
  %loss = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %one = step.constant dense<1.0> : tensor<f32>
  %d = step.cross_entropy_grad %one, %logits, %targets : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  %r = step.convert %d : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  return %loss, %r : tensor<f32>, tensor<2x4x16xbf16>
}

// -----

// bf16 (step-mixed-precision rounds each slice and widens each gradient):
// the slices become slices of one rounded [B, T, 3C] that
// "attention_packed_bf16" reads in place; the gradient is packed in bf16
// (its body pads and adds bf16) and widened once after the call.
// CHECK-LABEL: func.func @packed_attention_bf16
// CPU: %[[R:.*]] = step.convert %arg0 : tensor<2x8x24xf32> -> tensor<2x8x24xbf16>
// CPU-NOT: step.slice
// CPU: %[[O:.*]] = stepk.call "attention_packed_bf16"(%[[R]])
// CPU: stepk.yield
// CPU: %[[D:.*]] = stepk.call "attention_grad_packed_bf16"(%arg1, %[[R]])
// CPU: step.attention_grad
// CPU-COUNT-3: step.pad {{.*}} -> tensor<2x8x24xbf16>
// CPU-COUNT-2: step.add {{.*}} : tensor<2x8x24xbf16>
// CPU: stepk.yield
// CPU-NEXT: }
// CPU-NEXT: %[[W:.*]] = step.convert %[[D]] : tensor<2x8x24xbf16> -> tensor<2x8x24xf32>
// CPU-NOT: step.pad
// CPU: return %[[O]], %[[W]]
// CUDA-COUNT-3: step.convert {{.*}} -> tensor<2x8x8xbf16>
// CUDA-NOT: attention_packed
func.func @packed_attention_bf16(%x: tensor<2x8x24xf32>, %do: tensor<2x8x8xbf16>) -> (tensor<2x8x8xbf16>, tensor<2x8x24xf32>) attributes {step.train_step} {
  %q = step.slice %x offsets [0, 0, 0] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %k = step.slice %x offsets [0, 0, 8] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %v = step.slice %x offsets [0, 0, 16] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %q16 = step.convert %q : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %k16 = step.convert %k : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %v16 = step.convert %v : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %o = step.attention %q16, %k16, %v16 heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %dq, %dk, %dv = step.attention_grad %do, %q16, %k16, %v16 heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>)
  %wq = step.convert %dq : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %wk = step.convert %dk : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %wv = step.convert %dv : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %pv = step.pad %wv low [0, 0, 16] high [0, 0, 0] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pk = step.pad %wk low [0, 0, 8] high [0, 0, 8] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %s = step.add %pv, %pk : tensor<2x8x24xf32>
  %pq = step.pad %wq low [0, 0, 0] high [0, 0, 16] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %d = step.add %s, %pq : tensor<2x8x24xf32>
  return %o, %d : tensor<2x8x8xbf16>, tensor<2x8x24xf32>
}

// -----

// A bf16 gradient that cannot be packed (a pad away from its slice) reads
// its operands as before: slices in f32, then rounded (the CPU slices f32
// only); the forward is packed all the same.
// CHECK-LABEL: func.func @unpacked_gradient_bf16
// (The two read one set of slices, made where the forward reads them.)
// CPU: %[[S:.*]] = step.slice %arg0 {{.*}} -> tensor<2x8x8xf32>
// CPU-NEXT: step.convert %[[S]] : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
// CPU: stepk.call "attention_packed_bf16"
// CPU: step.attention_grad
// CPU-NOT: attention_grad_packed
func.func @unpacked_gradient_bf16(%x: tensor<2x8x24xf32>, %do: tensor<2x8x8xbf16>) -> (tensor<2x8x8xbf16>, tensor<2x8x24xf32>) attributes {step.train_step} {
  %q = step.slice %x offsets [0, 0, 0] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %k = step.slice %x offsets [0, 0, 8] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %v = step.slice %x offsets [0, 0, 16] sizes [2, 8, 8] : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  %q16 = step.convert %q : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %k16 = step.convert %k : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %v16 = step.convert %v : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
  %o = step.attention %q16, %k16, %v16 heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %dq, %dk, %dv = step.attention_grad %do, %q16, %k16, %v16 heads 2 kv_heads 2 head_dim 4 causal : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>)
  %wq = step.convert %dq : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %wk = step.convert %dk : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %wv = step.convert %dv : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %pv = step.pad %wv low [0, 0, 8] high [0, 0, 8] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %pk = step.pad %wk low [0, 0, 16] high [0, 0, 0] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %s = step.add %pv, %pk : tensor<2x8x24xf32>
  %pq = step.pad %wq low [0, 0, 0] high [0, 0, 16] : (tensor<2x8x8xf32>) -> tensor<2x8x24xf32>
  %d = step.add %s, %pq : tensor<2x8x24xf32>
  return %o, %d : tensor<2x8x8xbf16>, tensor<2x8x24xf32>
}

// -----

// bf16 values rounded once: a widened bf16 value rounded again (through a
// reshape) is the bf16 value reshaped; a second rounding of x (through a
// reshape) reuses the first.
// CHECK-LABEL: func.func @conversions_once
// CPU: %[[X16:.*]] = step.convert %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// CPU-NOT: step.convert
// CPU: %[[A:.*]] = step.reshape %arg1 : tensor<4x8xbf16> -> tensor<32xbf16>
// CPU: %[[B:.*]] = step.reshape %[[X16]] : tensor<4x8xbf16> -> tensor<32xbf16>
// CPU: return %[[X16]], %[[A]], %[[B]]
// CUDA-COUNT-4: step.convert
func.func @conversions_once(%x: tensor<4x8xf32>, %y: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<32xbf16>, tensor<32xbf16>) attributes {step.train_step} {
  %x16 = step.convert %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %wy = step.convert %y : tensor<4x8xbf16> -> tensor<4x8xf32>
  %ry = step.reshape %wy : tensor<4x8xf32> -> tensor<32xf32>
  %a = step.convert %ry : tensor<32xf32> -> tensor<32xbf16>
  %rx = step.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %b = step.convert %rx : tensor<32xf32> -> tensor<32xbf16>
  return %x16, %a, %b : tensor<4x8xbf16>, tensor<32xbf16>, tensor<32xbf16>
}

// -----

// A norm whose only use rounds it to bf16 (a GEMM operand under bf16) is the
// kernel's "_bf16" variant, writing the rounded result; its body keeps both.
// A norm read elsewhere too stays f32. The same on both targets.
// CHECK-LABEL: func.func @norm_rounded
// CHECK: %[[N:.*]] = stepk.call "layer_norm_bf16"(%arg0, %arg1, %arg2) {scalars = [4, 8, 1.000000e-05]}
// CHECK-SAME: -> tensor<4x8xbf16>
// CHECK: step.layer_norm
// CHECK-NEXT: step.convert
// CHECK: stepk.call "rms_norm"(%arg0, %arg1)
// CHECK-SAME: -> tensor<4x8xf32>
// CHECK-NOT: rms_norm_bf16
func.func @norm_rounded(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>) attributes {step.train_step} {
  %n = step.layer_norm %x, %w, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = step.convert %n : tensor<4x8xf32> -> tensor<4x8xbf16>
  %m = step.rms_norm %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s = step.convert %m : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %r, %s, %m : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>
}

// -----

// A reduction of bf16 values widened for it alone (a bias gradient of a
// bf16 gradient) is the kernel's "_of_bf16" variant reading them; its body
// starts with the widening. A widened value read elsewhere too is reduced
// as f32. The same on both targets.
// CHECK-LABEL: func.func @reduce_widened
// CHECK: stepk.call "reduce_of_bf16"(%arg0)
// CHECK-SAME: (tensor<4x8xbf16>) -> tensor<8xf32>
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x8xbf16>):
// CHECK-NEXT: %[[W:.*]] = step.convert %[[X]]
// CHECK-NEXT: step.reduce_sum %[[W]] dims [0]
// CHECK: %[[F:.*]] = step.convert %arg1
// CHECK: stepk.call "reduce"(%[[F]])
func.func @reduce_widened(%g: tensor<4x8xbf16>, %h: tensor<4x8xbf16>) -> (tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>) attributes {step.train_step} {
  %w = step.convert %g : tensor<4x8xbf16> -> tensor<4x8xf32>
  %s = step.reduce_sum %w dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
  %v = step.convert %h : tensor<4x8xbf16> -> tensor<4x8xf32>
  %t = step.reduce_sum %v dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
  return %s, %t, %v : tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>
}

// -----

// A value nothing reads after the foldings (here from the start: a
// widening whose reader took the bf16 value) is erased, not computed into
// the arena; one that is returned stays.
// CHECK-LABEL: func.func @dead_widening
// CHECK-NOT: step.convert %arg0
// CHECK: %[[KEPT:.*]] = step.convert %arg1
// CHECK: return %[[KEPT]]
func.func @dead_widening(%x: tensor<4x8xbf16>, %y: tensor<4x8xbf16>) -> tensor<4x8xf32> attributes {step.train_step} {
  %unread = step.convert %x : tensor<4x8xbf16> -> tensor<4x8xf32>
  %kept = step.convert %y : tensor<4x8xbf16> -> tensor<4x8xf32>
  return %kept : tensor<4x8xf32>
}

// -----

// A GEMM nothing was folded into becomes a stepk.gemm on both targets (the
// emitters print no step.matmul); an attention the packing does not cover
// is a library call on the CPU, its scalars (batch, tq, tk, heads,
// kv_heads, head_dim, causal, scale), the bf16 kernel for bf16 operands
// (CUDA's attention is step-fuse-cuda-kernels' stepk.attention).
// CHECK-LABEL: func.func @gemms_and_attention
// CHECK: stepk.gemm %arg0, %arg1 {shared_rhs, transpose_b}
// CHECK: stepk.gemm %arg2, %arg2 {transpose_a}
// CHECK-NOT: step.matmul
// CHECK-NOT: step.batch_matmul
// CPU: stepk.call "attention"(%arg3, %arg3, %arg3) {scalars = [2, 8, 8, 2, 2, 4, 1 : i32, 5.000000e-01]}
// CPU: stepk.call "attention_grad_bf16"(%arg4, %arg4, %arg4, %arg4) {scalars = [2, 8, 8, 2, 2, 4, 0 : i32, 5.000000e-01]}
// CUDA: step.attention %arg3
// CUDA: step.attention_grad %arg4
func.func @gemms_and_attention(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<3x4x4xf32>,
                               %q: tensor<2x8x8xf32>, %h: tensor<2x8x8xbf16>)
    -> (tensor<2x4x16xf32>, tensor<3x4x4xf32>, tensor<2x8x8xf32>, tensor<2x8x8xbf16>) attributes {step.train_step} {
  %y = step.matmul %x, %w transpose_b : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %z = step.batch_matmul %b, %b transpose_a : (tensor<3x4x4xf32>, tensor<3x4x4xf32>) -> tensor<3x4x4xf32>
  %a = step.attention %q, %q, %q heads 2 kv_heads 2 head_dim 4 causal {scale = 0.5 : f64} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dq, %dk, %dv = step.attention_grad %h, %h, %h, %h heads 2 kv_heads 2 head_dim 4 {scale = 0.5 : f64} : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<2x8x8xbf16>)
  return %y, %z, %a, %dq : tensor<2x4x16xf32>, tensor<3x4x4xf32>, tensor<2x8x8xf32>, tensor<2x8x8xbf16>
}

// -----

// On CUDA, a norm gradient into the residual stream's whose dy is the f32
// sum of widened bf16 input gradients (Llama's q, k and v) reads the bf16
// terms and adds them in the step's order, (b + a) + c: no f32 sum is
// written. A sum of f32 values (the CPU, or d below) stays as it is.
// CHECK-LABEL: func.func @summed_dy
// CPU-NOT: _sum3
// CUDA: %[[G:.*]]:3 = stepk.call "rms_norm_grad_add_rounded_of_bf16_sum3"(%arg1, %arg0, %arg2, %arg3, %arg4, %arg5)
// CUDA-NEXT: ^bb0(%[[B:[^:]*]]: tensor<8x64xbf16>, %[[A:[^:]*]]: tensor<8x64xbf16>, %[[C:[^:]*]]: tensor<8x64xbf16>,
// CUDA-NEXT: %[[WB:.*]] = step.convert %[[B]]
// CUDA-NEXT: %[[WA:.*]] = step.convert %[[A]]
// CUDA-NEXT: %[[S:.*]] = step.add %[[WB]], %[[WA]]
// CUDA-NEXT: %[[WC:.*]] = step.convert %[[C]]
// CUDA-NEXT: %[[T:.*]] = step.add %[[WC]], %[[S]]
// CUDA: step.rms_norm_grad %[[T]],
// CUDA: stepk.call "rms_norm_grad_add"(%{{.*}}, %arg3, %arg4, %arg5)
// CUDA-NOT: _sum
func.func @summed_dy(%a: tensor<8x64xbf16>, %b: tensor<8x64xbf16>, %c: tensor<8x64xbf16>, %x: tensor<8x64xf32>, %w: tensor<64xf32>, %acc: tensor<8x64xf32>, %d: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<64xf32>, tensor<8x64xbf16>, tensor<8x64xf32>, tensor<64xf32>) attributes {step.train_step} {
  %wb = step.convert %b : tensor<8x64xbf16> -> tensor<8x64xf32>
  %wa = step.convert %a : tensor<8x64xbf16> -> tensor<8x64xf32>
  %s = step.add %wb, %wa : tensor<8x64xf32>
  %wc = step.convert %c : tensor<8x64xbf16> -> tensor<8x64xf32>
  %t = step.add %wc, %s : tensor<8x64xf32>
  %dx, %dw = step.rms_norm_grad %t, %x, %w : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<64xf32>)
  %sum = step.add %acc, %dx : tensor<8x64xf32>
  %r = step.convert %sum : tensor<8x64xf32> -> tensor<8x64xbf16>
  %u = step.add %d, %d : tensor<8x64xf32>
  %dx2, %dw2 = step.rms_norm_grad %u, %x, %w : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<64xf32>)
  %sum2 = step.add %acc, %dx2 : tensor<8x64xf32>
  return %sum, %dw, %r, %sum2, %dw2 : tensor<8x64xf32>, tensor<64xf32>, tensor<8x64xbf16>, tensor<8x64xf32>, tensor<64xf32>
}

// -----

// On CUDA, a norm of a residual add whose other side is a table of rows
// broadcast along the leading dims alone (GPT-2's position embeddings)
// reads the table in place, row r adding row r % 4 ("_of_repeated", the
// period after the norm's scalars): no broadcast is written. The body keeps
// the broadcast first; the call is still the add's kernel. A broadcast that
// repeats within a row (of [4, 1]), or one read elsewhere too, stays.
// CHECK-LABEL: func.func @position_added
// CPU-NOT: _of_repeated
// CUDA: %[[C:.*]]:2 = stepk.call "layer_norm_add_of_repeated_bf16"(%arg0, %arg1, %arg2, %arg3) {scalars = [8, 8, 1.000000e-05, 4]}
// CUDA-NEXT: ^bb0(%{{[^:]*}}: tensor<2x4x8xf32>, %[[P:[^:]*]]: tensor<4x8xf32>,
// CUDA-NEXT: step.broadcast %[[P]] : tensor<4x8xf32> -> tensor<2x4x8xf32>
// CUDA-NEXT: step.add
// CUDA: step.broadcast %arg4
// CUDA: stepk.call "layer_norm_add"(
// CUDA: step.broadcast %arg1
// CUDA: stepk.call "rms_norm_add"(
func.func @position_added(%tok: tensor<2x4x8xf32>, %pos: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %col: tensor<4x1xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xbf16>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) attributes {step.train_step} {
  %p = step.broadcast %pos : tensor<4x8xf32> -> tensor<2x4x8xf32>
  %x = step.add %tok, %p : tensor<2x4x8xf32>
  %n = step.layer_norm %x, %w, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %r = step.convert %n : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  %c = step.broadcast %col : tensor<4x1xf32> -> tensor<2x4x8xf32>
  %x2 = step.add %c, %tok : tensor<2x4x8xf32>
  %n2 = step.layer_norm %x2, %w, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %q = step.broadcast %pos : tensor<4x8xf32> -> tensor<2x4x8xf32>
  %x3 = step.add %tok, %q : tensor<2x4x8xf32>
  %n3 = step.rms_norm %x3, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %x, %r, %n2, %n3, %q, %x3 : tensor<2x4x8xf32>, tensor<2x4x8xbf16>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}
