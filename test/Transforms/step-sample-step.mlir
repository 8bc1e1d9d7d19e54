// RUN: stepc-opt %s -split-input-file --stepc-pipeline="until=train-step" -step-eval-step -step-sample-step | FileCheck %s

// The sampling step: the eval step with its inputs rebound to one row; the
// same arguments otherwise, the loss and the [1, seq, vocab] logits. The
// eval step keeps the batch.
// CHECK-LABEL: func.func @loss_eval_step
// CHECK-SAME: tensor<2x4x5xf32> {step.input = "x"}
// CHECK-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<2x4x3xf32> {step.result = #step.result<logits>})
// CHECK-SAME: attributes {step.eval_step}
// CHECK-LABEL: func.func @loss_sample_step
// CHECK-SAME: %{{.*}}: tensor<3x5xf32> {step.param = #step.param<"w", normal(0.1)>}
// CHECK-SAME: tensor<1x4x5xf32> {step.input = "x"}
// CHECK-SAME: tensor<1x4xi32> {step.input = "y"}
// CHECK-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<1x4x3xf32> {step.result = #step.result<logits>})
// CHECK-SAME: attributes {step.sample_step}
// CHECK: %[[LOGITS:.*]] = step.matmul {{.*}} -> tensor<1x4x3xf32>
// CHECK: %[[LOSS:.*]] = step.cross_entropy %[[LOGITS]]
// CHECK-NOT: step.adamw
// CHECK: return %[[LOSS]], %[[LOGITS]]
func.func @loss(%w: tensor<3x5xf32> {step.param = #step.param<"w", normal(0.1)>},
                %x: tensor<2x4x5xf32> {step.input = "x"},
                %y: tensor<2x4xi32> {step.input = "y"}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %w transpose_b : (tensor<2x4x5xf32>, tensor<3x5xf32>) -> tensor<2x4x3xf32>
  %loss = step.cross_entropy %logits, %y : (tensor<2x4x3xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A batch statistic (a mean over the rows) makes each row's logits depend on
// the others: no sampling step (a sampler runs the eval step).
// CHECK-LABEL: func.func @loss_eval_step
// CHECK-NOT: @loss_sample_step
func.func @loss(%w: tensor<3x5xf32> {step.param = #step.param<"w", normal(0.1)>},
                %x: tensor<2x4x5xf32> {step.input = "x"},
                %y: tensor<2x4xi32> {step.input = "y"}) -> tensor<f32> attributes {step.loss} {
  %m = step.reduce_mean %x dims [0] : (tensor<2x4x5xf32>) -> tensor<4x5xf32>
  %b = step.broadcast %m : tensor<4x5xf32> -> tensor<2x4x5xf32>
  %c = step.sub %x, %b : tensor<2x4x5xf32>
  %logits = step.matmul %c, %w transpose_b : (tensor<2x4x5xf32>, tensor<3x5xf32>) -> tensor<2x4x3xf32>
  %loss = step.cross_entropy %logits, %y : (tensor<2x4x3xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A classifier's [batch, classes] logits: nothing to sample, no sampling
// step.
// CHECK-LABEL: func.func @loss_eval_step
// CHECK-NOT: @loss_sample_step
func.func @loss(%w: tensor<3x5xf32> {step.param = #step.param<"w", normal(0.1)>},
                %x: tensor<4x5xf32> {step.input = "x"},
                %y: tensor<4xi32> {step.input = "y"}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %w transpose_b : (tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<4x3xf32>
  %loss = step.cross_entropy %logits, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Inputs with no common batch dimension (a scalar input beside the batch):
// no sampling step, and no error (the model compiles; a sampler runs the
// eval step).
// CHECK-LABEL: func.func @loss_eval_step
// CHECK-SAME: tensor<f32> {step.input = "scale"}
// CHECK-NOT: @loss_sample_step
func.func @loss(%w: tensor<3x5xf32> {step.param = #step.param<"w", normal(0.1)>},
                %x: tensor<2x4x5xf32> {step.input = "x"},
                %s: tensor<f32> {step.input = "scale"},
                %y: tensor<2x4xi32> {step.input = "y"}) -> tensor<f32> attributes {step.loss} {
  %sb = step.broadcast %s : tensor<f32> -> tensor<2x4x5xf32>
  %xs = step.mul %x, %sb : tensor<2x4x5xf32>
  %logits = step.matmul %xs, %w transpose_b : (tensor<2x4x5xf32>, tensor<3x5xf32>) -> tensor<2x4x3xf32>
  %loss = step.cross_entropy %logits, %y : (tensor<2x4x3xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
