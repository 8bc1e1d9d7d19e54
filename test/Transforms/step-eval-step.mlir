// RUN: stepc-opt %s -split-input-file --stepc-pipeline="until=train-step" -step-eval-step | FileCheck %s

// The forward-only step keeps the training step's arguments and only the
// loss's slice: the forward, no gradient, no clipping, no AdamW; the
// cross-entropy's logits come back as a second result, the loss function's
// outputs after them.
// CHECK-LABEL: func.func @loss_eval_step
// CHECK-SAME: step.state = #step.state<exp_avg_sq, "w">
// CHECK-SAME: step.hyper = #step.hyper<step>
// CHECK-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<4x3xf32> {step.result = #step.result<logits>}, tensor<4x3xf32> {step.result = #step.result<output, "probabilities">})
// CHECK-SAME: attributes {step.eval_step}
// CHECK: %[[LOGITS:.*]] = step.matmul {{.*}}step.phase = #step.phase<forward>
// CHECK: %[[LOSS:.*]] = step.cross_entropy %[[LOGITS]]
// CHECK: %[[PROBS:.*]] = step.softmax %[[LOGITS]]
// CHECK-NOT: _grad
// CHECK-NOT: step.adamw
// CHECK-NOT: step.sqrt
// CHECK: return %[[LOSS]], %[[LOGITS]], %[[PROBS]]
func.func @loss(%w: tensor<3x5xf32> {step.param = #step.param<"w", normal(0.1)>},
                %x: tensor<4x5xf32> {step.input = "x"},
                %y: tensor<4xi32> {step.input = "y"})
    -> (tensor<f32>, tensor<4x3xf32> {step.result = #step.result<output, "probabilities">}) attributes {step.loss} {
  %logits = step.matmul %x, %w transpose_b : (tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<4x3xf32>
  %loss = step.cross_entropy %logits, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  %p = step.softmax %logits dim 1 : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return %loss, %p : tensor<f32>, tensor<4x3xf32>
}

// -----

// A loss that is not one cross-entropy has no logits to return: the loss
// alone.
// CHECK-LABEL: func.func @loss_eval_step
// CHECK-SAME: -> (tensor<f32> {step.result = #step.result<loss>}) attributes {step.eval_step}
// CHECK: step.reduce_sum
// CHECK-NOT: step.adamw
func.func @loss(%w: tensor<3xf32> {step.param = #step.param<"w", normal(0.1)>},
                %x: tensor<3xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %d = step.mul %w, %x : tensor<3xf32>
  %s = step.reduce_sum %d dims [0] : (tensor<3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
