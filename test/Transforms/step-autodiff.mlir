// RUN: stepc-opt %s -split-input-file -step-autodiff | FileCheck %s

// A tied weight gets one gradient: the head's matmul cotangent plus the
// embedding's scatter-add; the integer ids get none.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: (%[[WTE:.*]]: tensor<7x4xf32> {step.param = #step.param<"wte", normal(0.02)>}, %[[TOK:.*]]: tensor<2x3xi32> {step.input = "tokens"}, %[[TGT:.*]]: tensor<2x3xi32> {step.input = "targets"})
// CHECK-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<7x4xf32> {step.result = #step.result<grad, "wte">})
// CHECK-SAME: attributes {step.gradient = @loss}
// CHECK: %[[X:.*]] = step.embedding %[[WTE]], %[[TOK]]
// CHECK: %[[LOGITS:.*]] = step.matmul %[[X]], %[[WTE]] transpose_b
// CHECK: %[[LOSS:.*]] = step.cross_entropy %[[LOGITS]], %[[TGT]]
// CHECK: %[[ONE:.*]] = step.constant dense<1.000000e+00> {{.*}}: tensor<f32>
// CHECK: %[[DLOGITS:.*]] = step.cross_entropy_grad %[[ONE]], %[[LOGITS]], %[[TGT]]
// d(A@Bᵀ)/dA = dC @ B
// CHECK: %[[DX:.*]] = step.matmul %[[DLOGITS]], %[[WTE]] {{.*}}:
// d(A@Bᵀ)/dB = dCᵀ @ A over the flattened batch
// CHECK: %[[XF:.*]] = step.reshape %[[X]] {{.*}}: tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[DF:.*]] = step.reshape %[[DLOGITS]] {{.*}}: tensor<2x3x7xf32> -> tensor<6x7xf32>
// CHECK: %[[DHEAD:.*]] = step.matmul %[[DF]], %[[XF]] transpose_a {{.*}}: (tensor<6x7xf32>, tensor<6x4xf32>) -> tensor<7x4xf32>
// CHECK: %[[DEMB:.*]] = step.embedding_grad %[[DX]], %[[TOK]] num_embeddings 7
// CHECK: %[[DWTE:.*]] = step.add %[[DHEAD]], %[[DEMB]]
// CHECK: return %[[LOSS]], %[[DWTE]]
func.func @loss(%wte: tensor<7x4xf32> {step.param = #step.param<"wte", normal(0.02)>},
                %tokens: tensor<2x3xi32> {step.input = "tokens"},
                %targets: tensor<2x3xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %wte, %tokens : (tensor<7x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %logits = step.matmul %x, %wte transpose_b : (tensor<2x3x4xf32>, tensor<7x4xf32>) -> tensor<2x3x7xf32>
  %l = step.cross_entropy %logits, %targets : (tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Broadcast sums the cotangent over the dims it added; a dead forward op
// needs no rule. A parameter the loss does not depend on has no gradient:
// it is frozen, with a warning (PyTorch's optimizers skip a parameter
// whose .grad is None: no update, no weight decay), and gets no result.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: {step.param = #step.param<"unused", zeros, frozen>}
// CHECK-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<2x3x4xf32> {step.result = #step.result<grad, "x">}, tensor<4xf32> {step.result = #step.result<grad, "b">})
// CHECK: %[[DB:.*]] = step.reduce_sum %{{.*}} dims [0, 1] {{.*}}: (tensor<2x3x4xf32>) -> tensor<4xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[DB]] :
func.func @loss(%x: tensor<2x3x4xf32> {step.param = #step.param<"x", normal(1.0)>},
                %b: tensor<4xf32> {step.param = #step.param<"b", zeros>},
                %unused: tensor<5xf32> {step.param = #step.param<"unused", zeros>}) -> tensor<f32> attributes {step.loss} {
  %dead = arith.addf %unused, %unused : tensor<5xf32>
  %bb = step.broadcast %b : tensor<4xf32> -> tensor<2x3x4xf32>
  %y = step.add %x, %bb : tensor<2x3x4xf32>
  %s = step.reduce_sum %y dims [0, 1, 2] : (tensor<2x3x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Composite ops get composite backward ops, with their attributes, in
// reverse order.
// CHECK-LABEL: func.func @loss_grad
// CHECK: step.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} heads 2 kv_heads 1 head_dim 4 causal
// CHECK: step.rotary %{{.*}} head_dim 4 inverse
// CHECK: step.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64{{.*}}}
func.func @loss(%q: tensor<1x3x8xf32> {step.param = #step.param<"q", normal(1.0)>},
                %kv: tensor<1x3x4xf32> {step.param = #step.param<"kv", normal(1.0)>},
                %w: tensor<8xf32> {step.param = #step.param<"w", ones>}) -> tensor<f32> attributes {step.loss} {
  %n = step.rms_norm %q, %w {epsilon = 1.0e-06 : f64} : (tensor<1x3x8xf32>, tensor<8xf32>) -> tensor<1x3x8xf32>
  %r = step.rotary %n head_dim 4 : (tensor<1x3x8xf32>) -> tensor<1x3x8xf32>
  %a = step.attention %r, %kv, %kv heads 2 kv_heads 1 head_dim 4 causal : (tensor<1x3x8xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>) -> tensor<1x3x8xf32>
  %s = step.reduce_sum %a dims [0, 1, 2] : (tensor<1x3x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// round_fp8's gradient passes straight through: the rounded weight's
// cotangent is the weight's, as if the rounding were not there.
// CHECK-LABEL: func.func @fp8_loss_grad
// CHECK: %[[Q:.*]] = step.round_fp8 %arg0 format e4m3 {step.phase = #step.phase<forward>}
// CHECK: step.matmul %arg1, %[[Q]] {step.phase = #step.phase<forward>}
// CHECK-NOT: round_fp8
// CHECK: %[[DW:.*]] = step.matmul %arg1, %{{.*}} transpose_a {step.phase = #step.phase<backward>}
// CHECK-NEXT: return %{{.*}}, %[[DW]]
func.func @fp8_loss(%w: tensor<4x3xf32> {step.param = #step.param<"w", normal(1.0)>},
                    %x: tensor<2x4xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %q = step.round_fp8 %w format e4m3 : tensor<4x3xf32>
  %y = step.matmul %x, %q : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
