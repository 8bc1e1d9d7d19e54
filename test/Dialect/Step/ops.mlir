// Round trip of every step op: parse, print, parse again, and once more
// through the generic form.
// RUN: stepc-opt %s | stepc-opt | FileCheck %s
// RUN: stepc-opt %s --mlir-print-op-generic | stepc-opt | FileCheck %s

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[NEG:.*]] = step.neg %{{.*}} : tensor<4x8xf32>
  %0 = step.neg %x : tensor<4x8xf32>
  // CHECK: %[[EXP:.*]] = step.exp %[[NEG]] : tensor<4x8xf32>
  %1 = step.exp %0 : tensor<4x8xf32>
  // CHECK: step.log %[[EXP]] : tensor<4x8xf32>
  %2 = step.log %1 : tensor<4x8xf32>
  // CHECK: step.tanh
  %3 = step.tanh %2 : tensor<4x8xf32>
  // CHECK: step.erf
  %4 = step.erf %3 : tensor<4x8xf32>
  // CHECK: step.sqrt
  %5 = step.sqrt %4 : tensor<4x8xf32>
  // CHECK: step.rsqrt
  %6 = step.rsqrt %5 : tensor<4x8xf32>
  // CHECK: step.silu
  %7 = step.silu %6 : tensor<4x8xf32>
  // CHECK: step.relu
  %8 = step.relu %7 : tensor<4x8xf32>
  // CHECK: step.sigmoid
  %9 = step.sigmoid %8 : tensor<4x8xf32>
  // CHECK: step.softplus %{{.*}} : tensor<4x8xf32>
  %softplus = step.softplus %8 : tensor<4x8xf32>
  // CHECK: step.abs %{{.*}} : tensor<4x8xf32>
  %abs = step.abs %8 : tensor<4x8xf32>
  // CHECK: step.stop_gradient %{{.*}} : tensor<4x8xf32>
  %sg = step.stop_gradient %abs : tensor<4x8xf32>
  // CHECK: step.gelu %{{.*}} : tensor<4x8xf32>
  %10 = step.gelu %9 : tensor<4x8xf32>
  // CHECK: step.gelu %{{.*}} approximate tanh : tensor<4x8xf32>
  %11 = step.gelu %10 approximate tanh : tensor<4x8xf32>
  return %11 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xbf16>, %[[B:.*]]: tensor<2x3xbf16>)
func.func @binary(%a: tensor<2x3xbf16>, %b: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  // CHECK: %[[ADD:.*]] = step.add %[[A]], %[[B]] : tensor<2x3xbf16>
  %0 = step.add %a, %b : tensor<2x3xbf16>
  // CHECK: %[[SUB:.*]] = step.sub %[[ADD]], %[[B]] : tensor<2x3xbf16>
  %1 = step.sub %0, %b : tensor<2x3xbf16>
  // CHECK: %[[MUL:.*]] = step.mul %[[SUB]], %[[A]] : tensor<2x3xbf16>
  %2 = step.mul %1, %a : tensor<2x3xbf16>
  // CHECK: step.div %[[MUL]], %[[B]] : tensor<2x3xbf16>
  %3 = step.div %2, %b : tensor<2x3xbf16>
  return %3 : tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @constant_convert
func.func @constant_convert() -> (tensor<2x2xbf16>, tensor<3xf32>) {
  // CHECK: step.constant dense<5.000000e-01> : tensor<2x2xf32>
  %0 = step.constant dense<0.5> : tensor<2x2xf32>
  // CHECK: step.convert %{{.*}} : tensor<2x2xf32> -> tensor<2x2xbf16>
  %1 = step.convert %0 : tensor<2x2xf32> -> tensor<2x2xbf16>
  // CHECK: step.constant dense<[1, 2, 3]> : tensor<3xi32>
  %2 = step.constant dense<[1, 2, 3]> : tensor<3xi32>
  // CHECK: step.convert %{{.*}} : tensor<3xi32> -> tensor<3xf32>
  %3 = step.convert %2 : tensor<3xi32> -> tensor<3xf32>
  return %1, %3 : tensor<2x2xbf16>, tensor<3xf32>
}

// CHECK-LABEL: func.func @shape
func.func @shape(%x: tensor<8x1x64xf32>, %y: tensor<8x4x32xf32>) -> tensor<4x96x8xf32> {
  // CHECK: step.broadcast %{{.*}} : tensor<8x1x64xf32> -> tensor<2x8x4x64xf32>
  %0 = step.broadcast %x : tensor<8x1x64xf32> -> tensor<2x8x4x64xf32>
  // CHECK: step.reshape %{{.*}} : tensor<2x8x4x64xf32> -> tensor<16x4x64xf32>
  %1 = step.reshape %0 : tensor<2x8x4x64xf32> -> tensor<16x4x64xf32>
  // CHECK: step.slice %{{.*}} offsets [8, 0, 0] sizes [8, 4, 64] : (tensor<16x4x64xf32>) -> tensor<8x4x64xf32>
  %2 = step.slice %1 offsets [8, 0, 0] sizes [8, 4, 64] : (tensor<16x4x64xf32>) -> tensor<8x4x64xf32>
  // CHECK: step.concat %{{.*}}, %{{.*}} dim 2 : (tensor<8x4x64xf32>, tensor<8x4x32xf32>) -> tensor<8x4x96xf32>
  %3 = step.concat %2, %y dim 2 : (tensor<8x4x64xf32>, tensor<8x4x32xf32>) -> tensor<8x4x96xf32>
  // CHECK: step.transpose %{{.*}} [1, 2, 0] : (tensor<8x4x96xf32>) -> tensor<4x96x8xf32>
  %4 = step.transpose %3 [1, 2, 0] : (tensor<8x4x96xf32>) -> tensor<4x96x8xf32>
  return %4 : tensor<4x96x8xf32>
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x3x4xf32>) -> (tensor<3xf32>, tensor<2x3x1xf32>, tensor<2x4xf32>) {
  // CHECK: step.reduce_sum %{{.*}} dims [0, 2] : (tensor<2x3x4xf32>) -> tensor<3xf32>
  %0 = step.reduce_sum %x dims [0, 2] : (tensor<2x3x4xf32>) -> tensor<3xf32>
  // CHECK: step.reduce_max %{{.*}} dims [2] keep_dims : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %1 = step.reduce_max %x dims [2] keep_dims : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  // CHECK: step.reduce_mean %{{.*}} dims [1] : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %2 = step.reduce_mean %x dims [1] : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  return %0, %1, %2 : tensor<3xf32>, tensor<2x3x1xf32>, tensor<2x4xf32>
}

// CHECK-LABEL: func.func @matmuls
func.func @matmuls(%x: tensor<2x5x8xf32>, %w: tensor<16x8xf32>, %v: tensor<8x16xf32>,
                   %a: tensor<3x4x5x8xf32>, %b: tensor<3x4x5x8xf32>)
    -> (tensor<2x5x16xf32>, tensor<2x8x16xf32>, tensor<3x4x5x5xf32>, tensor<3x4x8x8xf32>) {
  // CHECK: step.matmul %{{.*}}, %{{.*}} transpose_b : (tensor<2x5x8xf32>, tensor<16x8xf32>) -> tensor<2x5x16xf32>
  %0 = step.matmul %x, %w transpose_b : (tensor<2x5x8xf32>, tensor<16x8xf32>) -> tensor<2x5x16xf32>
  // CHECK: step.matmul %{{.*}}, %{{.*}} transpose_a : (tensor<2x5x8xf32>, tensor<5x16xf32>) -> tensor<2x8x16xf32>
  %m = step.slice %v offsets [0, 0] sizes [5, 16] : (tensor<8x16xf32>) -> tensor<5x16xf32>
  %1 = step.matmul %x, %m transpose_a : (tensor<2x5x8xf32>, tensor<5x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.batch_matmul %{{.*}}, %{{.*}} transpose_b : (tensor<3x4x5x8xf32>, tensor<3x4x5x8xf32>) -> tensor<3x4x5x5xf32>
  %2 = step.batch_matmul %a, %b transpose_b : (tensor<3x4x5x8xf32>, tensor<3x4x5x8xf32>) -> tensor<3x4x5x5xf32>
  // CHECK: step.batch_matmul %{{.*}}, %{{.*}} transpose_a : (tensor<3x4x5x8xf32>, tensor<3x4x5x8xf32>) -> tensor<3x4x8x8xf32>
  %3 = step.batch_matmul %a, %b transpose_a : (tensor<3x4x5x8xf32>, tensor<3x4x5x8xf32>) -> tensor<3x4x8x8xf32>
  return %0, %1, %2, %3 : tensor<2x5x16xf32>, tensor<2x8x16xf32>, tensor<3x4x5x5xf32>, tensor<3x4x8x8xf32>
}

// CHECK-LABEL: func.func @composites
func.func @composites(%table: tensor<32x16xf32>, %ids: tensor<2x8xi32>,
                      %w: tensor<16xf32>, %b: tensor<16xf32>,
                      %k: tensor<2x8x8xf32>, %targets: tensor<2x8xi64>) -> tensor<f32> {
  // CHECK: %[[X:.*]] = step.embedding %{{.*}}, %{{.*}} : (tensor<32x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %x = step.embedding %table, %ids : (tensor<32x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  // CHECK: step.layer_norm %[[X]], %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %0 = step.layer_norm %x, %w, %b : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %1 = step.rms_norm %0, %w {epsilon = 1.0e-06 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.rotary %{{.*}} head_dim 4 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %2 = step.rotary %1 head_dim 4 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.rotary %{{.*}} head_dim 4 {theta = 5.000000e+05 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %3 = step.rotary %k head_dim 4 {theta = 500000.0 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  // CHECK: step.attention %{{.*}}, %{{.*}}, %{{.*}} heads 4 kv_heads 2 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x16xf32>
  %4 = step.attention %2, %3, %k heads 4 kv_heads 2 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.attention %{{.*}}, %{{.*}}, %{{.*}} heads 4 kv_heads 4 head_dim 4 {scale = 1.250000e-01 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %5 = step.attention %4, %4, %4 heads 4 kv_heads 4 head_dim 4 {scale = 0.125 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} heads 4 kv_heads 2 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x8x16xf32>
  %pad = step.constant dense<0.0> : tensor<2x1x1x8xf32>
  %masked = step.attention %2, %3, %k mask %pad heads 4 kv_heads 2 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.softmax %{{.*}} dim 2 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %6 = step.softmax %5 dim 2 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.log_softmax %{{.*}} dim 1 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %ls = step.log_softmax %5 dim 1 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.cumsum %{{.*}} dim 1 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %cs = step.cumsum %5 dim 1 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<f32>
  %7 = step.cross_entropy %6, %targets : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %7 : tensor<f32>
}

// CHECK-LABEL: func.func @loss_options
func.func @loss_options(%x: tensor<2x8x16xf32>, %targets: tensor<2x8xi32>) -> tensor<f32> {
  // CHECK: step.token_count %{{.*}} ignore_index -100 {step.rank_rows = 2 : i64} : (tensor<2x8xi32>) -> tensor<f32>
  %n = step.token_count %targets ignore_index -100 {step.rank_rows = 2 : i64} : (tensor<2x8xi32>) -> tensor<f32>
  // CHECK: step.cross_entropy %{{.*}}, %{{.*}} count %{{.*}} ignore_index -100 label_smoothing 1.000000e-01 z_loss 1.000000e-04 : (tensor<2x8x16xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<f32>
  %l = step.cross_entropy %x, %targets count %n ignore_index -100 label_smoothing 0.1 z_loss 1.0e-4 : (tensor<2x8x16xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<f32>
  // CHECK: step.target_mask %{{.*}} ignore_index -100 : (tensor<2x8xi32>) -> (tensor<2x8xi32>, tensor<2x8xf32>)
  %ids, %mask = step.target_mask %targets ignore_index -100 : (tensor<2x8xi32>) -> (tensor<2x8xi32>, tensor<2x8xf32>)
  // CHECK: step.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} label_smoothing 2.000000e-01 : (tensor<f32>, tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %g = step.cross_entropy_grad %l, %x, %targets label_smoothing 0.2 : (tensor<f32>, tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @loss
// CHECK-SAME: {step.param = #step.param<"wte", normal(0.02)>}
// CHECK-SAME: {step.param = #step.param<"h.0.attn.c_proj.weight", scaled_normal(0.02, 2), weight_decay 0.01, lr_scale 0.5>}
// CHECK-SAME: {step.param = #step.param<"ln.weight", ones, block 0, frozen>}
// CHECK-SAME: {step.param = #step.param<"ln.bias", zeros, frozen>}
// CHECK-SAME: {step.input = "tokens"}
// CHECK-SAME: attributes {step.loss}
func.func @loss(%wte: tensor<32x16xf32> {step.param = #step.param<"wte", normal(0.02)>},
                %proj: tensor<16x16xf32> {step.param = #step.param<"h.0.attn.c_proj.weight", scaled_normal(0.02, 2), weight_decay 0.01, lr_scale 0.5>},
                %lnw: tensor<16xf32> {step.param = #step.param<"ln.weight", ones, block 0, frozen>},
                %lnb: tensor<16xf32> {step.param = #step.param<"ln.bias", zeros, frozen>},
                %tokens: tensor<2x8xi32> {step.input = "tokens"},
                %targets: tensor<2x8xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %h = step.layer_norm %x, %lnw, %lnb : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %p = step.matmul %h, %proj transpose_b : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %logits = step.matmul %p, %wte transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %loss = step.cross_entropy %logits, %targets : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// A standard deviation that needs all 17 digits survives the round trip.
// CHECK-LABEL: func.func @exact_std
// CHECK-SAME: normal(0.012345678901234568)
// CHECK-SAME: normal(1.0)
// CHECK-SAME: normal(1.0e-05)
func.func @exact_std(%a: tensor<2xf32> {step.param = #step.param<"a", normal(0.012345678901234568)>},
                     %b: tensor<2xf32> {step.param = #step.param<"b", normal(1.0)>},
                     %c: tensor<2xf32> {step.param = #step.param<"c", normal(0.00001)>}) {
  return
}

// CHECK-LABEL: func.func @forward_extras
func.func @forward_extras(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %x: tensor<1x4x8xf32>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3x6xf32>, tensor<1x4x8xf32>) {
  // CHECK: step.maximum %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %0 = step.maximum %a, %b : tensor<2x3xf32>
  // CHECK: step.minimum %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %1 = step.minimum %a, %b : tensor<2x3xf32>
  // CHECK: step.pad %{{.*}} low [1, 0] high [0, 3] : (tensor<2x3xf32>) -> tensor<3x6xf32>
  %2 = step.pad %a low [1, 0] high [0, 3] : (tensor<2x3xf32>) -> tensor<3x6xf32>
  // CHECK: step.rotary %{{.*}} head_dim 4 inverse : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %3 = step.rotary %x head_dim 4 inverse : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<3x6xf32>, tensor<1x4x8xf32>
}

// CHECK-LABEL: func.func @backward_ops
func.func @backward_ops(%dy: tensor<2x8x16xf32>, %x: tensor<2x8x16xf32>, %w: tensor<16xf32>,
                        %k: tensor<2x8x8xf32>, %ids: tensor<2x8xi32>, %dl: tensor<f32>,
                        %dm: tensor<2x8xf32>) {
  // CHECK: step.gelu_grad %{{.*}}, %{{.*}} approximate tanh : tensor<2x8x16xf32>
  %0 = step.gelu_grad %dy, %x approximate tanh : tensor<2x8x16xf32>
  // CHECK: step.silu_grad %{{.*}}, %{{.*}} : tensor<2x8x16xf32>
  %1 = step.silu_grad %dy, %x : tensor<2x8x16xf32>
  // CHECK: step.relu_grad %{{.*}}, %{{.*}} : tensor<2x8x16xf32>
  %2 = step.relu_grad %dy, %x : tensor<2x8x16xf32>
  // CHECK: step.reduce_max_grad %{{.*}}, %{{.*}} dims [2] : (tensor<2x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %3 = step.reduce_max_grad %dm, %x dims [2] : (tensor<2x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.softmax_grad %{{.*}}, %{{.*}} dim 2 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %4 = step.softmax_grad %dy, %x dim 2 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.log_softmax_grad %{{.*}}, %{{.*}} dim 0 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %lsg = step.log_softmax_grad %dy, %x dim 0 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.cumsum_grad %{{.*}} dim 2 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %csg = step.cumsum_grad %dy dim 2 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: step.layer_norm_grad {{.*}} -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  %5:3 = step.layer_norm_grad %dy, %x, %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK: step.rms_norm_grad {{.*}} -> (tensor<2x8x16xf32>, tensor<16xf32>)
  %6:2 = step.rms_norm_grad %dy, %x, %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  // CHECK: step.attention_grad {{.*}} heads 4 kv_heads 2 head_dim 4 causal {{.*}} -> (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
  %7:3 = step.attention_grad %dy, %x, %k, %k heads 4 kv_heads 2 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
  // CHECK: step.cross_entropy_grad {{.*}} : (tensor<f32>, tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %8 = step.cross_entropy_grad %dl, %x, %ids : (tensor<f32>, tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  // CHECK: step.embedding_grad %{{.*}}, %{{.*}} num_embeddings 32 : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<32x16xf32>
  %9 = step.embedding_grad %dy, %ids num_embeddings 32 : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<32x16xf32>
  // CHECK: step.adamw {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}
  %10:3 = step.adamw %w, %w, %w, %w, %dl, %dl, %dl {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK: step.adamw {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, decoupled_weight_decay = false, epsilon
  %11:3 = step.adamw %w, %w, %w, %w, %dl, %dl, %dl {beta1 = 0.9 : f64, beta2 = 0.95 : f64, decoupled_weight_decay = false, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK: step.sgd {{.*}} {momentum = 9.000000e-01 : f64, nesterov = true, weight_decay = 0.000000e+00 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>)
  %12:2 = step.sgd %w, %w, %w, %dl, %dl {momentum = 0.9 : f64, nesterov = true, weight_decay = 0.0 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>)
  // CHECK: step.lion {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.98999999999999999 : f64, weight_decay = 1.000000e-01 : f64}
  %13:2 = step.lion %w, %w, %w, %dl, %dl {beta1 = 0.9 : f64, beta2 = 0.99 : f64, weight_decay = 0.1 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>)
  return
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {step.state = #step.state<exp_avg, "w">}
// CHECK-SAME: {step.hyper = #step.hyper<lr>}
// CHECK-SAME: {step.result = #step.result<loss>}
// CHECK-SAME: attributes {step.train_step}
func.func @train_step(%w: tensor<4xf32> {step.param = #step.param<"w", zeros>},
                      %m: tensor<4xf32> {step.state = #step.state<exp_avg, "w">},
                      %lr: tensor<f32> {step.hyper = #step.hyper<lr>}) -> (tensor<f32> {step.result = #step.result<loss>}) attributes {step.train_step} {
  return %lr : tensor<f32>
}

// CHECK-LABEL: func.func @dropout
func.func @dropout(%x: tensor<4x8xf32>, %seed: tensor<i32>, %step: tensor<f32>, %first: tensor<i32>) -> tensor<4x8xf32> {
  // CHECK: step.dropout %{{.*}} rate 1.000000e-01 stream 0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = step.dropout %x rate 0.1 stream 0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: step.dropout %{{.*}} seed %{{.*}} step %{{.*}} rows from %{{.*}} rate 2.000000e-01 stream 7 : (tensor<4x8xf32>, tensor<i32>, tensor<f32>, tensor<i32>) -> tensor<4x8xf32>
  %1 = step.dropout %0 seed %seed step %step rows from %first rate 0.2 stream 7 : (tensor<4x8xf32>, tensor<i32>, tensor<f32>, tensor<i32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @pow
func.func @pow(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: step.pow %{{.*}} exponent 1.500000e+00 : tensor<4x8xf32>
  %0 = step.pow %x exponent 1.5 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @masks
func.func @masks(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %ids: tensor<4x8xi32>)
    -> (tensor<4x8xf32>, tensor<4x8xi32>, tensor<4x8xf32>) {
  // CHECK: %[[M:.*]] = step.compare lt, %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %m = step.compare lt, %x, %y : tensor<4x8xf32>
  // CHECK: step.compare ne, %{{.*}}, %{{.*}} : tensor<4x8xi32>
  %n = step.compare ne, %ids, %ids : tensor<4x8xi32>
  // CHECK: step.select %[[M]], %{{.*}}, %{{.*}} : tensor<4x8xi1>, tensor<4x8xf32>
  %z = step.select %m, %x, %y : tensor<4x8xi1>, tensor<4x8xf32>
  // CHECK: step.convert %{{.*}} : tensor<4x8xf32> -> tensor<4x8xi32>
  %t = step.convert %z : tensor<4x8xf32> -> tensor<4x8xi32>
  // CHECK: step.convert %{{.*}} : tensor<4x8xi1> -> tensor<4x8xf32>
  %f = step.convert %n : tensor<4x8xi1> -> tensor<4x8xf32>
  return %z, %t, %f : tensor<4x8xf32>, tensor<4x8xi32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @index_ops
func.func @index_ops(%x: tensor<4x8xf32>, %idx: tensor<4x3xi32>)
    -> (tensor<4x8xi32>, tensor<4xi32>, tensor<4x3xf32>, tensor<4x8xf32>) {
  // CHECK: step.iota dim 1 : tensor<4x8xi32>
  %i = step.iota dim 1 : tensor<4x8xi32>
  // CHECK: step.argmax %{{.*}} dim 1 : (tensor<4x8xf32>) -> tensor<4xi32>
  %a = step.argmax %x dim 1 : (tensor<4x8xf32>) -> tensor<4xi32>
  // CHECK: step.gather %{{.*}}, %{{.*}} dim 1 : (tensor<4x8xf32>, tensor<4x3xi32>) -> tensor<4x3xf32>
  %g = step.gather %x, %idx dim 1 : (tensor<4x8xf32>, tensor<4x3xi32>) -> tensor<4x3xf32>
  // CHECK: step.gather_grad %{{.*}}, %{{.*}} dim 1 size 8 : (tensor<4x3xf32>, tensor<4x3xi32>) -> tensor<4x8xf32>
  %d = step.gather_grad %g, %idx dim 1 size 8 : (tensor<4x3xf32>, tensor<4x3xi32>) -> tensor<4x8xf32>
  return %i, %a, %g, %d : tensor<4x8xi32>, tensor<4xi32>, tensor<4x3xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @moe
func.func @moe(%p: tensor<6x3xf32>, %x: tensor<6x4xf32>, %w: tensor<3x5x4xf32>, %dy: tensor<6x5xf32>)
    -> (tensor<6x5xf32>, tensor<3x5x4xf32>, tensor<12x5xf32>, tensor<6x2xf32>) {
  // CHECK: step.top_k %{{.*}} k 2 : (tensor<6x3xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  %g, %e = step.top_k %p k 2 : (tensor<6x3xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  // CHECK: step.moe_dispatch %{{.*}}, %{{.*}} experts 3 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<12x4xf32>, tensor<3xi32>)
  %rows, %counts = step.moe_dispatch %x, %e experts 3 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<12x4xf32>, tensor<3xi32>)
  // CHECK: step.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} transpose_b : (tensor<12x4xf32>, tensor<3x5x4xf32>, tensor<3xi32>) -> tensor<12x5xf32>
  %h = step.grouped_matmul %rows, %w, %counts transpose_b : (tensor<12x4xf32>, tensor<3x5x4xf32>, tensor<3xi32>) -> tensor<12x5xf32>
  // CHECK: step.grouped_matmul_weight_grad %{{.*}}, %{{.*}}, %{{.*}} transpose_b : (tensor<12x4xf32>, tensor<12x5xf32>, tensor<3xi32>) -> tensor<3x5x4xf32>
  %dw = step.grouped_matmul_weight_grad %rows, %h, %counts transpose_b : (tensor<12x4xf32>, tensor<12x5xf32>, tensor<3xi32>) -> tensor<3x5x4xf32>
  // CHECK: step.moe_combine %{{.*}}, %{{.*}}, %{{.*}} experts 3 : (tensor<12x5xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x5xf32>
  %y = step.moe_combine %h, %g, %e experts 3 : (tensor<12x5xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x5xf32>
  // CHECK: step.moe_combine_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} experts 3 : (tensor<6x5xf32>, tensor<12x5xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> (tensor<12x5xf32>, tensor<6x2xf32>)
  %dr, %dg = step.moe_combine_grad %dy, %h, %g, %e experts 3 : (tensor<6x5xf32>, tensor<12x5xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> (tensor<12x5xf32>, tensor<6x2xf32>)
  return %y, %dw, %dr, %dg : tensor<6x5xf32>, tensor<3x5x4xf32>, tensor<12x5xf32>, tensor<6x2xf32>
}

// CHECK-LABEL: func.func @moe_capacity
// 8 tokens in sequences of 4, 2 experts each of 4 in 2 groups, at most 1
// pair per expert and sequence: blocks of min(16, 2·2·1) = 4 rows.
func.func @moe_capacity(%x: tensor<8x4xf32>, %e: tensor<8x2xi32>, %g: tensor<8x2xf32>) -> tensor<8x4xf32> {
  // CHECK: step.moe_dispatch %{{.*}}, %{{.*}} experts 4 groups 2 capacity 1 per 4 : (tensor<8x4xf32>, tensor<8x2xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
  %rows, %counts = step.moe_dispatch %x, %e experts 4 groups 2 capacity 1 per 4 : (tensor<8x4xf32>, tensor<8x2xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
  // CHECK: step.moe_combine %{{.*}}, %{{.*}}, %{{.*}} experts 4 groups 2 capacity 1 per 4 : (tensor<8x4xf32>, tensor<8x2xf32>, tensor<8x2xi32>) -> tensor<8x4xf32>
  %y = step.moe_combine %rows, %g, %e experts 4 groups 2 capacity 1 per 4 : (tensor<8x4xf32>, tensor<8x2xf32>, tensor<8x2xi32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// CHECK-LABEL: func.func @fp8
func.func @fp8(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: step.round_fp8 %{{.*}} format e4m3 : tensor<4x8xf32>
  %a = step.round_fp8 %x format e4m3 : tensor<4x8xf32>
  // CHECK: step.round_fp8 %{{.*}} format e5m2 : tensor<4x8xf32>
  %b = step.round_fp8 %x format e5m2 : tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @moe_capacity_past_every_pair
// A capacity past every pair (and past int64 once multiplied) is dropless's
// N·K rows.
func.func @moe_capacity_past_every_pair(%x: tensor<8x4xf32>, %e: tensor<8x2xi32>) -> tensor<16x4xf32> {
  // CHECK: step.moe_dispatch %{{.*}}, %{{.*}} experts 4 capacity 9223372036854775807 per 4 : (tensor<8x4xf32>, tensor<8x2xi32>) -> (tensor<16x4xf32>, tensor<4xi32>)
  %rows, %counts = step.moe_dispatch %x, %e experts 4 capacity 9223372036854775807 per 4 : (tensor<8x4xf32>, tensor<8x2xi32>) -> (tensor<16x4xf32>, tensor<4xi32>)
  return %rows : tensor<16x4xf32>
}
