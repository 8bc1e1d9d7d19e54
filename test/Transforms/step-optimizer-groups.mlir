// RUN: stepc-opt %s -step-autodiff -step-optimizer | FileCheck %s

// A parameter's own optimizer settings (a torch.optim parameter group):
// `weight_decay` replaces the rank rule (the matrix is not decayed, the
// vector is), `lr_scale` multiplies the schedule's lr for that parameter
// only.
// CHECK-LABEL: func.func @loss_train_step
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {step.hyper = #step.hyper<lr>}
// CHECK: step.adamw %{{.*}}, %[[LR]], {{.*}} weight_decay = 0.000000e+00 : f64}
// CHECK: %[[SCALE:.*]] = step.constant dense<1.000000e-01> : tensor<f32>
// CHECK: %[[BLR:.*]] = step.mul %[[LR]], %[[SCALE]] {{.*}}: tensor<f32>
// CHECK: step.adamw %{{.*}}, %[[BLR]], {{.*}} weight_decay = 2.500000e-01 : f64}
func.func @loss(%w: tensor<3x2xf32> {step.param = #step.param<"w", normal(0.02), weight_decay 0.0>},
                %b: tensor<3xf32> {step.param = #step.param<"b", zeros, weight_decay 0.25, lr_scale 0.1>},
                %x: tensor<4x2xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %y = step.matmul %x, %w transpose_b : (tensor<4x2xf32>, tensor<3x2xf32>) -> tensor<4x3xf32>
  %bb = step.broadcast %b : tensor<3xf32> -> tensor<4x3xf32>
  %z = step.add %y, %bb : tensor<4x3xf32>
  %s = step.reduce_mean %z dims [0, 1] : (tensor<4x3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
