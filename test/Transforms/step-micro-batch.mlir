// RUN: stepc-opt %s -split-input-file -step-autodiff -step-micro-batch=count=2 -verify-diagnostics | FileCheck %s

// Two micro-batches: each slices its rows of every input, runs the forward
// and backward of a batch-1 loss, and each of its results is accumulated
// right after the op that makes it (the micro-batch's gradient dead there);
// the loss and the gradient are the means. The micro-batch's own functions
// are gone.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: %[[W:.*]]: tensor<4x3xf32> {step.param = {{.*}}}, %[[X:.*]]: tensor<2x4xf32> {step.input = "x"}
// CHECK: %[[X0:.*]] = step.slice %[[X]] offsets [0, 0] sizes [1, 4] {{.*}}: (tensor<2x4xf32>) -> tensor<1x4xf32>
// CHECK: step.matmul %[[X0]], %[[W]] {{.*}}: (tensor<1x4xf32>, tensor<4x3xf32>) -> tensor<1x3xf32>
// CHECK: %[[L0:.*]] = step.reduce_sum
// CHECK: %[[G0:.*]] = step.matmul %[[X0]], %{{.*}} transpose_a
// CHECK: %[[X1:.*]] = step.slice %[[X]] offsets [1, 0] sizes [1, 4]
// CHECK: %[[L1:.*]] = step.reduce_sum
// CHECK-NEXT: %[[LS:.*]] = step.add %[[L0]], %[[L1]]
// CHECK: %[[G1:.*]] = step.matmul %[[X1]], %{{.*}} transpose_a
// CHECK-NEXT: %[[GS:.*]] = step.add %[[G0]], %[[G1]]
// CHECK: %[[HALF:.*]] = step.constant dense<5.000000e-01> {{.*}}: tensor<f32>
// CHECK: %[[LOSS:.*]] = step.mul %[[LS]], %[[HALF]]
// CHECK: %[[HALF2:.*]] = step.constant dense<5.000000e-01> {{.*}}: tensor<4x3xf32>
// CHECK: %[[GRAD:.*]] = step.mul %[[GS]], %[[HALF2]]
// CHECK: return %[[LOSS]], %[[GRAD]]
// CHECK-NOT: func.func @loss_micro
func.func @loss(%w: tensor<4x3xf32> {step.param = #step.param<"w", normal(1.0)>},
                %x: tensor<2x4xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %y = step.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// expected-error @+1 {{the batch of 3 per rank does not split into 2 micro-batches}}
func.func @loss(%w: tensor<4x3xf32> {step.param = #step.param<"w", normal(1.0)>},
                %x: tensor<3x4xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %y = step.matmul %x, %w : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<3x3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Outputs besides the loss have no rule for joining the micro-batches'.
// expected-error @+1 {{returns outputs besides the loss: micro-batches cannot split them}}
func.func @loss(%w: tensor<4x3xf32> {step.param = #step.param<"w", normal(1.0)>},
                %x: tensor<2x4xf32> {step.input = "x"})
    -> (tensor<f32>, tensor<2x3xf32> {step.result = #step.result<output, "y">}) attributes {step.loss} {
  %y = step.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %s, %y : tensor<f32>, tensor<2x3xf32>
}

// -----

// Nothing to split.
// expected-error @+1 {{has no inputs: cannot split into micro-batches}}
func.func @loss(%w: tensor<4x3xf32> {step.param = #step.param<"w", normal(1.0)>}) -> tensor<f32> attributes {step.loss} {
  %s = step.reduce_sum %w dims [0, 1] : (tensor<4x3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
