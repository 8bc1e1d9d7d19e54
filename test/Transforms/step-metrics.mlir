// RUN: stepc-opt %s -step-autodiff -step-shard-data-parallel=ranks=2 | FileCheck %s --check-prefix=DP
// RUN: stepc-opt %s -step-autodiff -step-micro-batch=count=2 | FileCheck %s --check-prefix=MB
// RUN: stepc-opt %s -step-autodiff "-step-micro-batch=count=2 pipeline=true" "-step-pipeline-stages=stages=2 schedule=gpipe" > %t.mlir
// RUN: FileCheck %s --check-prefix=STAGE0 < %t.mlir
// RUN: FileCheck %s --check-prefix=STAGE1 < %t.mlir

// A metric (#step.result<metric, "name">) is a mean over the batch, reduced
// as the loss is. step-autodiff carries it after the gradients, never
// differentiated.
// DP-LABEL: func.func @loss_grad
// DP-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<4x4xf32> {{.*}}, tensor<4x4xf32> {{.*}}, tensor<4xf32> {step.result = #step.result<metric, "h_mean">})
// Data parallelism: its mean over the ranks (SUM, then 1/2).
// DP: %[[SUM:.*]] = mesh.all_reduce %{{.*}} on @world mesh_axes = [0] {{.*}} : tensor<4xf32> -> tensor<4xf32>
// DP: %[[MEAN:.*]] = step.mul %[[SUM]], %{{.*}} : tensor<4xf32>
// DP: return {{.*}}, %[[MEAN]] : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>

// Micro-batches: each one's metric, added, then 1/2 (as the loss).
// MB-LABEL: func.func @loss_grad
// MB: %[[M0:.*]] = step.reduce_mean %{{.*}} dims [0] {{.*}} : (tensor<1x4xf32>) -> tensor<4xf32>
// MB: %[[M1:.*]] = step.reduce_mean %{{.*}} dims [0] {{.*}} : (tensor<1x4xf32>) -> tensor<4xf32>
// MB: %[[ADD:.*]] = step.add %[[M0]], %[[M1]]
// MB: %[[HALF:.*]] = step.mul %[[ADD]], %{{.*}} : tensor<4xf32>
// MB: return {{.*}}, %[[HALF]] : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>

// A pipeline: stage 0 computes the metric (block 0's activation), stage 1
// the loss; each returns zero for what the other computes, and one
// all-reduce over the pipeline axis sums the loss and the metrics
// together (separate ones would start in a different order per stage).
// STAGE0-LABEL: module @stage0
// STAGE0-LABEL: func.func @loss_grad
// STAGE0-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<4x4xf32> {{.*}}, tensor<4xf32> {step.result = #step.result<metric, "h_mean">})
// STAGE0: %[[METRIC:.*]] = step.mul %{{.*}}, %{{.*}} : tensor<4xf32>
// STAGE0: %[[ZERO:.*]] = step.constant dense<0.000000e+00> : tensor<f32>
// STAGE0: %[[FL:.*]] = step.reshape %[[ZERO]] {{.*}} -> tensor<1xf32>
// STAGE0: %[[FM:.*]] = step.reshape %[[METRIC]] {{.*}} -> tensor<4xf32>
// STAGE0: %[[ALL:.*]] = step.concat %[[FL]], %[[FM]] dim 0
// STAGE0: %[[SUM:.*]] = mesh.all_reduce %[[ALL]] on @world mesh_axes = [0] {{.*}} : tensor<5xf32> -> tensor<5xf32>
// STAGE0-NOT: mesh.all_reduce
// STAGE0: step.slice %[[SUM]] offsets [0] sizes [1]
// STAGE0: step.slice %[[SUM]] offsets [1] sizes [4]
// STAGE1-LABEL: module @stage1
// STAGE1-LABEL: func.func @loss_grad
// STAGE1: %[[ZERO:.*]] = step.constant dense<0.000000e+00> : tensor<4xf32>
// STAGE1: %[[FM:.*]] = step.reshape %[[ZERO]] {{.*}} -> tensor<4xf32>
// STAGE1: %[[ALL:.*]] = step.concat %{{.*}}, %[[FM]] dim 0
// STAGE1: mesh.all_reduce %[[ALL]] on @world mesh_axes = [0] {{.*}} : tensor<5xf32> -> tensor<5xf32>

func.func @loss(%w0: tensor<4x4xf32> {step.param = #step.param<"w0", normal(1.0), block 0>},
                %w1: tensor<4x4xf32> {step.param = #step.param<"w1", normal(1.0), block 1>},
                %x: tensor<2x4xf32> {step.input = "x"})
    -> (tensor<f32>, tensor<4xf32> {step.result = #step.result<metric, "h_mean">})
    attributes {step.loss} {
  %a = step.matmul %x, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %h = step.tanh %a : tensor<2x4xf32>
  %m = step.reduce_mean %h dims [0] : (tensor<2x4xf32>) -> tensor<4xf32>
  %b = step.matmul %h, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = step.reduce_mean %b dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %s, %m : tensor<f32>, tensor<4xf32>
}
