// RUN: stepc-opt %s -step-autodiff -step-shard-fully=ranks=2 | FileCheck %s
// RUN: stepc-opt %s -step-autodiff "-step-shard-fully=ranks=2 reshard=false" | FileCheck %s --check-prefix=ZERO2
// RUN: stepc-opt %s -step-autodiff "-step-shard-fully=ranks=2 replicas=2" | FileCheck %s --check-prefix=HSDP

// FSDP (ZeRO-3) over 2 ranks. Each parameter becomes this rank's shard of
// ceil(d0/2) rows (step.shard_of: the whole's d0; w2's 3 rows as shards of
// 2, the last row padding), all-gathered before its first forward use and
// sliced back to d0 rows; w2, which the backward reads (dH = dO·w2ᵀ), is
// gathered again there. Each gradient is padded to 2·s rows,
// reduce-scattered and scaled by 1/2; the loss is averaged.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: %[[W1:[^:]*]]: tensor<2x3xf32> {step.param = #step.param<"w1", normal(1.0)>, step.shard_of = 4 : i64}
// CHECK-SAME: %[[W2:[^:]*]]: tensor<2x5xf32> {step.param = #step.param<"w2", normal(1.0)>, step.shard_of = 3 : i64}
// CHECK-SAME: %[[B:[^:]*]]: tensor<2xf32> {step.param = #step.param<"b", zeros>, step.shard_of = 3 : i64}
// CHECK: %[[GW2:.*]] = mesh.all_gather %[[W2]] on @world mesh_axes = [0] gather_axis = 0 {{.*}} : tensor<2x5xf32> -> tensor<4x5xf32>
// CHECK: %[[FW2:.*]] = step.slice %[[GW2]] offsets [0, 0] sizes [3, 5]
// CHECK: %[[GW1:.*]] = mesh.all_gather %[[W1]] on @world mesh_axes = [0] gather_axis = 0 {{.*}} : tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK: step.matmul %{{.*}}, %[[GW1]] {step.phase = #step.phase<forward>}
// CHECK: step.matmul %{{.*}}, %[[FW2]] {step.phase = #step.phase<forward>}
// CHECK: %[[AGAIN:.*]] = mesh.all_gather %[[W2]] on @world
// CHECK: %[[BW2:.*]] = step.slice %[[AGAIN]] offsets [0, 0] sizes [3, 5]
// CHECK: step.matmul %{{.*}}, %[[BW2]] transpose_b {step.phase = #step.phase<backward>}
// CHECK: mesh.all_reduce %{{.*}} : tensor<f32> -> tensor<f32>
// CHECK: mesh.reduce_scatter %{{.*}} on @world mesh_axes = [0] scatter_axis = 0 {{.*}} : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK: %[[PAD:.*]] = step.pad %{{.*}} low [0, 0] high [1, 0] {{.*}} : (tensor<3x5xf32>) -> tensor<4x5xf32>
// CHECK: mesh.reduce_scatter %[[PAD]] {{.*}} : tensor<4x5xf32> -> tensor<2x5xf32>
// CHECK: return {{.*}} : tensor<f32>, tensor<2x3xf32>, tensor<2x5xf32>, tensor<2xf32>

// ZeRO-2 keeps the forward's gathered w2 for the backward.
// ZERO2-LABEL: func.func @loss_grad
// ZERO2-COUNT-3: mesh.all_gather
// ZERO2-NOT: mesh.all_gather
// ZERO2: step.matmul %{{.*}} transpose_b {step.phase = #step.phase<backward>}

// Hybrid sharding (replicas=2): shards within groups of 2 ranks (the mesh's
// second axis), the gradient shards then all-reduced across the 2 groups.
// HSDP: mesh.mesh @world(shape = 2x2)
// HSDP-LABEL: func.func @loss_grad
// HSDP: mesh.all_gather %{{.*}} on @world mesh_axes = [1]
// HSDP: %[[RS:.*]] = mesh.reduce_scatter %{{.*}} on @world mesh_axes = [1]
// HSDP-NEXT: mesh.all_reduce %[[RS]] on @world mesh_axes = [0]

func.func @loss(%w1: tensor<4x3xf32> {step.param = #step.param<"w1", normal(1.0)>},
                %w2: tensor<3x5xf32> {step.param = #step.param<"w2", normal(1.0)>},
                %b: tensor<3xf32> {step.param = #step.param<"b", zeros>},
                %x: tensor<2x4xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %y = step.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %bb = step.broadcast %b : tensor<3xf32> -> tensor<2x3xf32>
  %z = step.add %y, %bb : tensor<2x3xf32>
  %h = step.tanh %z : tensor<2x3xf32>
  %o = step.matmul %h, %w2 : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  %s = step.reduce_sum %o dims [0, 1] : (tensor<2x5xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
