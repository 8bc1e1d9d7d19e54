// RUN: stepc-opt %s -step-autodiff -step-shard-data-parallel=ranks=2 | FileCheck %s
// RUN: stepc-opt %s -step-autodiff "-step-shard-data-parallel=ranks=2 bucket-bytes=1" | FileCheck %s --check-prefix=UNBUCKETED
// RUN: not stepc-opt %s -step-shard-data-parallel=ranks=2 2>&1 | FileCheck %s --check-prefix=NO-GRAD
// RUN: not stepc-opt %s -step-autodiff -step-shard-data-parallel=ranks=0 2>&1 | FileCheck %s --check-prefix=RANKS

// The world mesh of the ranks; the loss and each gradient become their
// means over it: SUM all-reduce, then · 1/N. Gradients smaller than a
// bucket are flattened and concatenated in the order they become final
// (the bias's reduce_sum before the weight's matmul), one all-reduce for
// the bucket, and sliced back to their shapes for the return.
// CHECK: mesh.mesh @world(shape = 2)
// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[LOSS:.*]] = step.reduce_sum %{{.*}} dims [0, 1] {step.phase = #step.phase<forward>}
// CHECK: %[[DB:.*]] = step.reduce_sum %{{.*}} dims [0] {step.phase = #step.phase<backward>}
// CHECK: %[[DW:.*]] = step.matmul %{{.*}} transpose_a {step.phase = #step.phase<backward>}
// CHECK: %[[LSUM:.*]] = mesh.all_reduce %[[LOSS]] on @world mesh_axes = [0] {step.phase = #step.phase<collective>} : tensor<f32> -> tensor<f32>
// CHECK: %[[HALF:.*]] = step.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[LMEAN:.*]] = step.mul %[[LSUM]], %[[HALF]]
// CHECK: %[[FB:.*]] = step.reshape %[[DB]] {{.*}} : tensor<3xf32> -> tensor<3xf32>
// CHECK: %[[FW:.*]] = step.reshape %[[DW]] {{.*}} : tensor<4x3xf32> -> tensor<12xf32>
// CHECK: %[[BUCKET:.*]] = step.concat %[[FB]], %[[FW]] dim 0 {{.*}} -> tensor<15xf32>
// CHECK: %[[BSUM:.*]] = mesh.all_reduce %[[BUCKET]] on @world mesh_axes = [0] {{.*}} : tensor<15xf32> -> tensor<15xf32>
// CHECK: %[[BMEAN:.*]] = step.mul %[[BSUM]], %{{.*}} : tensor<15xf32>
// CHECK: %[[SB:.*]] = step.slice %[[BMEAN]] offsets [0] sizes [3]
// CHECK: %[[GB:.*]] = step.reshape %[[SB]] {{.*}} -> tensor<3xf32>
// CHECK: %[[SW:.*]] = step.slice %[[BMEAN]] offsets [3] sizes [12]
// CHECK: %[[GW:.*]] = step.reshape %[[SW]] {{.*}} -> tensor<4x3xf32>
// CHECK: return %[[LMEAN]], %[[GW]], %[[GB]] : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>

// With buckets of one byte every gradient is all-reduced alone.
// UNBUCKETED-LABEL: func.func @loss_grad
// UNBUCKETED: mesh.all_reduce %{{.*}} : tensor<f32> -> tensor<f32>
// UNBUCKETED: mesh.all_reduce %{{.*}} : tensor<3xf32> -> tensor<3xf32>
// UNBUCKETED: mesh.all_reduce %{{.*}} : tensor<4x3xf32> -> tensor<4x3xf32>
// UNBUCKETED-NOT: step.concat

// NO-GRAD: no function is marked 'step.gradient' (run step-autodiff first)
// RANKS: step-shard-data-parallel expects ranks >= 1, got 0

func.func @loss(%w: tensor<4x3xf32> {step.param = #step.param<"w", normal(1.0)>},
                %b: tensor<3xf32> {step.param = #step.param<"b", zeros>},
                %x: tensor<2x4xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %y = step.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %bb = step.broadcast %b : tensor<3xf32> -> tensor<2x3xf32>
  %z = step.add %y, %bb : tensor<2x3xf32>
  %s = step.reduce_sum %z dims [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
