// RUN: stepc-opt %s -step-autodiff -step-optimizer | FileCheck %s
// RUN: stepc-opt %s -step-autodiff -step-optimizer="beta2=0.99 weight-decay=0.0 max-grad-norm=0" | FileCheck %s --check-prefix=OPTS

// Signature: params, exp_avg, exp_avg_sq, inputs, lr, step; results: loss,
// pre-clip norm, new params, new moments.
// CHECK-LABEL: func.func @loss_train_step
// CHECK-SAME: (%[[W:.*]]: tensor<3x2xf32> {step.param = #step.param<"w", normal(0.02)>}, %[[B:.*]]: tensor<3xf32> {step.param = #step.param<"b", zeros>},
// CHECK-SAME: %[[MW:.*]]: tensor<3x2xf32> {step.state = #step.state<exp_avg, "w">}, %[[MB:.*]]: tensor<3xf32> {step.state = #step.state<exp_avg, "b">},
// CHECK-SAME: %[[VW:.*]]: tensor<3x2xf32> {step.state = #step.state<exp_avg_sq, "w">}, %[[VB:.*]]: tensor<3xf32> {step.state = #step.state<exp_avg_sq, "b">},
// CHECK-SAME: %[[X:.*]]: tensor<4x2xf32> {step.input = "x"},
// CHECK-SAME: %[[LR:.*]]: tensor<f32> {step.hyper = #step.hyper<lr>}, %[[T:.*]]: tensor<f32> {step.hyper = #step.hyper<step>})
// CHECK-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<f32> {step.result = #step.result<grad_norm>}, tensor<3x2xf32> {step.result = #step.result<param, "w">}, tensor<3xf32> {step.result = #step.result<param, "b">}, tensor<3x2xf32> {step.result = #step.result<exp_avg, "w">}, tensor<3xf32> {step.result = #step.result<exp_avg, "b">}, tensor<3x2xf32> {step.result = #step.result<exp_avg_sq, "w">}, tensor<3xf32> {step.result = #step.result<exp_avg_sq, "b">})
// CHECK-SAME: attributes {step.train_step}
// Global norm over both gradients, then min(1, 1.0 / (norm + 1e-6)).
// CHECK: %[[NORM:.*]] = step.sqrt
// CHECK: %[[COEF:.*]] = step.div
// CHECK: %[[SCALE:.*]] = step.minimum %[[COEF]]
// Weight decay only on the matrix.
// CHECK: step.adamw %[[W]], %{{.*}}, %[[MW]], %[[VW]], %[[LR]], %[[T]], %[[SCALE]] {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, epsilon = 1.000000e-08 : f64, {{.*}}weight_decay = 1.000000e-01 : f64}
// CHECK: step.adamw %[[B]], %{{.*}}, %[[MB]], %[[VB]], %[[LR]], %[[T]], %[[SCALE]] {{.*}} weight_decay = 0.000000e+00 {{.*}}: f64}
// CHECK: return %{{.*}}, %[[NORM]],

// Options reach the update; max-grad-norm=0 turns clipping off.
// OPTS-LABEL: func.func @loss_train_step
// OPTS-NOT: step.minimum
// OPTS: step.adamw {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.98999999999999999 : f64, epsilon = 1.000000e-08 : f64, {{.*}}weight_decay = 0.000000e+00 : f64}
func.func @loss(%w: tensor<3x2xf32> {step.param = #step.param<"w", normal(0.02)>},
                %b: tensor<3xf32> {step.param = #step.param<"b", zeros>},
                %x: tensor<4x2xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %y = step.matmul %x, %w transpose_b : (tensor<4x2xf32>, tensor<3x2xf32>) -> tensor<4x3xf32>
  %bb = step.broadcast %b : tensor<3xf32> -> tensor<4x3xf32>
  %z = step.add %y, %bb : tensor<4x3xf32>
  %s = step.reduce_mean %z dims [0, 1] : (tensor<4x3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
