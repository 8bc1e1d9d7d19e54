// RUN: stepc-opt %s -step-autodiff -step-shard-data-parallel=ranks=2 -step-optimizer | FileCheck %s
// RUN: stepc-opt %s -step-autodiff "-step-shard-fully=ranks=2" -step-optimizer | FileCheck %s --check-prefix=FSDP

// A balanced routing bias (step.balance) is a frozen parameter the training
// step moves after the optimizer: bias + rate · sign(1/E − m), with m the
// metric as the ranks' mean (all-reduced before it), returned as the
// updated parameter.
// CHECK-LABEL: func.func @loss_train_step
// CHECK-SAME: tensor<4xf32> {step.result = #step.result<metric, "load">}, tensor<4xf32> {step.result = #step.result<param, "b">})
// CHECK: %[[SUM:.*]] = mesh.all_reduce %{{.*}} : tensor<4xf32> -> tensor<4xf32>
// CHECK: %[[LOAD:.*]] = step.mul %[[SUM]], %{{.*}} : tensor<4xf32>
// CHECK: %[[QUARTER:.*]] = step.constant dense<2.500000e-01> : tensor<4xf32>
// CHECK: %[[UNDER:.*]] = step.compare lt, %[[LOAD]], %[[QUARTER]]
// CHECK: %[[OVER:.*]] = step.compare gt, %[[LOAD]], %[[QUARTER]]
// CHECK: %[[OTHER:.*]] = step.select %[[OVER]]
// CHECK: %[[SIGN:.*]] = step.select %[[UNDER]], %{{.*}}, %[[OTHER]]
// CHECK: %[[STEP:.*]] = step.mul %[[SIGN]], %{{.*}} : tensor<4xf32>
// CHECK: %[[NEW:.*]] = step.add %arg1, %[[STEP]] {{.*}}: tensor<4xf32>
// CHECK: return {{.*}}, %[[LOAD]], %[[NEW]] :

// Under fsdp the bias stays whole on every rank (each moves it alike).
// FSDP-LABEL: func.func @loss_train_step
// FSDP-SAME: %arg1: tensor<4xf32> {step.balance = {metric = "load", rate = 1.000000e-03 : f64}, step.param = #step.param<"b", zeros, frozen>}

func.func @loss(%w: tensor<4x4xf32> {step.param = #step.param<"w", normal(1.0)>},
                %b: tensor<4xf32> {step.param = #step.param<"b", zeros, frozen>, step.balance = {metric = "load", rate = 1.0e-3 : f64}},
                %x: tensor<2x4xf32> {step.input = "x"})
    -> (tensor<f32>, tensor<4xf32> {step.result = #step.result<metric, "load">}) attributes {step.loss} {
  %a = step.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %bb = step.broadcast %b : tensor<4xf32> -> tensor<2x4xf32>
  %c = step.add %a, %bb : tensor<2x4xf32>
  %s = step.reduce_mean %c dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  %m = step.softmax %x dim 1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %load = step.reduce_mean %m dims [0] : (tensor<2x4xf32>) -> tensor<4xf32>
  return %s, %load : tensor<f32>, tensor<4xf32>
}
