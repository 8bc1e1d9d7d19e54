// Expert parallelism (ep:2) on one mixture-of-experts layer of 4 experts:
// the dispatch grouped in 2 blocks of N·K = 12 rows (one per destination
// rank), rows and counts exchanged by all-to-all, each rank's 2 experts'
// weights (step.tp_shard along the experts, axis 0), the products over the
// received [2, 2] counts and the gelu between them at 24 rows, the rows
// sent home and combined where the grouped dispatch put them.
// RUN: stepc-opt %s -step-shard-experts=ep=2 | FileCheck %s
// The backward: the combine's row gradient goes back to the experts' ranks
// by the same exchange, the products' gradients read the received counts.
// RUN: stepc-opt %s -step-shard-experts=ep=2 -step-autodiff | FileCheck %s --check-prefix=GRAD
// ddp:2 beside ep:2 (mesh [2, 2], ep the last axis): the router's gradient
// is averaged over both axes, the experts' over the ddp axis only (their
// rank's experts already hold every ep rank's tokens), each · 1/4.
// RUN: stepc-opt %s "-step-shard-experts=ep=2 axis=1 mesh-shape=2,2" -step-autodiff -step-shard-data-parallel=ranks=4 | FileCheck %s --check-prefix=DDP
// hsdp:2x2 beside ep:2 (mesh [R, ep, S] = [2, 2, 2]): every parameter's rows
// sharded over S (axis 2), each gradient reduce-scattered along it; the
// router's shard then summed over the groups and ep (axes 0, 1), the
// experts' over the groups only (axis 0: ep's ranks hold other experts).
// RUN: stepc-opt %s "-step-shard-experts=ep=2 axis=1 mesh-shape=2,2,2" -step-autodiff "-step-shard-fully=ranks=2 replicas=4 replica-shape=2,2" | FileCheck %s --check-prefix=HSDP
// RUN: not stepc-opt %s -step-autodiff "-step-shard-fully=ranks=2 replicas=4 replica-shape=3,2" 2>&1 | FileCheck %s --check-prefix=REPLICAS
// RUN: not stepc-opt %s -step-shard-experts=ep=3 2>&1 | FileCheck %s --check-prefix=DIVIDE

// CHECK: mesh.mesh @world(shape = 2) {step.ep_axis = 0 : i64}
// CHECK-LABEL: func.func @loss(
// CHECK-SAME: tensor<4x4xf32> {step.param = #step.param<"wr", normal(0.02)>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<2x8x4xf32> {step.param = #step.param<"w1", normal(0.02)>, step.tp_shard = {axis = 0 : i64, dim = 0 : i64, segments = array<i64: 4>}}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<2x4x8xf32> {step.param = #step.param<"w2", normal(0.02)>, step.tp_shard = {axis = 0 : i64, dim = 0 : i64, segments = array<i64: 4>}}
// CHECK: %[[GATE:[a-z0-9_]+]], %[[EXPERT:[a-z0-9_]+]] = step.top_k
// CHECK: %[[ROWS:[a-z0-9_]+]], %[[COUNTS:[a-z0-9_]+]] = step.moe_dispatch %{{.*}}, %[[EXPERT]] experts 4 groups 2 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<24x4xf32>, tensor<4xi32>)
// CHECK: %[[RECV:.*]] = mesh.all_to_all %[[ROWS]] on @world mesh_axes = [0] split_axis = 0 concat_axis = 0 : tensor<24x4xf32> -> tensor<24x4xf32>
// CHECK: %[[BLOCKS:.*]] = step.reshape %[[COUNTS]] : tensor<4xi32> -> tensor<2x2xi32>
// CHECK: %[[RCOUNTS:.*]] = mesh.all_to_all %[[BLOCKS]] on @world mesh_axes = [0] split_axis = 0 concat_axis = 0 : tensor<2x2xi32> -> tensor<2x2xi32>
// CHECK: %[[H:.*]] = step.grouped_matmul %[[RECV]], %[[W1]], %[[RCOUNTS]] transpose_b : (tensor<24x4xf32>, tensor<2x8x4xf32>, tensor<2x2xi32>) -> tensor<24x8xf32>
// CHECK: %[[A:.*]] = step.gelu %[[H]] : tensor<24x8xf32>
// CHECK: %[[O:.*]] = step.grouped_matmul %[[A]], %[[W2]], %[[RCOUNTS]] transpose_b : (tensor<24x8xf32>, tensor<2x4x8xf32>, tensor<2x2xi32>) -> tensor<24x4xf32>
// CHECK: %[[HOME:.*]] = mesh.all_to_all %[[O]] on @world mesh_axes = [0]
// CHECK: step.moe_combine %[[HOME]], %[[GATE]], %[[EXPERT]] experts 4 groups 2 : (tensor<24x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
// CHECK-NOT: step.moe_dispatch

// GRAD-LABEL: func.func @loss_grad(
// GRAD: %[[RCOUNTS:.*]] = mesh.all_to_all %{{.*}} : tensor<2x2xi32> -> tensor<2x2xi32>
// GRAD: %[[DROWS:[a-z0-9_]+]], %{{.*}} = step.moe_combine_grad %{{.*}} experts 4 groups 2
// GRAD: %[[BACK:.*]] = mesh.all_to_all %[[DROWS]] on @world mesh_axes = [0] split_axis = 0 concat_axis = 0 {step.phase = #step.phase<backward>} : tensor<24x4xf32> -> tensor<24x4xf32>
// GRAD: step.grouped_matmul %[[BACK]], %{{.*}}, %[[RCOUNTS]] {step.phase = #step.phase<backward>}
// GRAD: step.grouped_matmul_weight_grad %{{.*}}, %[[BACK]], %[[RCOUNTS]] transpose_b {{.*}} -> tensor<2x4x8xf32>
// GRAD: step.grouped_matmul_weight_grad {{.*}} -> tensor<2x8x4xf32>

// DDP: mesh.mesh @world(shape = 2x2) {step.ep_axis = 1 : i64}
// DDP-LABEL: func.func @loss_grad(
// DDP: mesh.all_reduce %{{.*}} on @world mesh_axes = [0] {{.*}} : tensor<2x8x4xf32> -> tensor<2x8x4xf32>
// DDP: step.constant dense<2.500000e-01> : tensor<2x8x4xf32>
// DDP: mesh.all_reduce %{{.*}} on @world mesh_axes = [0] {{.*}} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// DDP: mesh.all_reduce %{{.*}} on @world mesh_axes = [0, 1] {{.*}} : tensor<4x4xf32> -> tensor<4x4xf32>

// DIVIDE: error: 'step.moe_dispatch' op routes to 4 experts, which ep:3 does not divide

// HSDP: mesh.mesh @world(shape = 2x2x2) {step.ep_axis = 1 : i64}
// HSDP: mesh.all_gather %{{.*}} on @world mesh_axes = [2] gather_axis = 0 {{.*}} : tensor<1x4x8xf32> -> tensor<2x4x8xf32>
// HSDP: mesh.all_reduce %{{.*}} on @world mesh_axes = [0, 1, 2] {{.*}} : tensor<f32> -> tensor<f32>
// HSDP: %[[RS:.*]] = mesh.reduce_scatter %{{.*}} on @world mesh_axes = [2] scatter_axis = 0 {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// HSDP: mesh.all_reduce %[[RS]] on @world mesh_axes = [0, 1] {{.*}} : tensor<2x4xf32> -> tensor<2x4xf32>
// HSDP: %[[RS1:.*]] = mesh.reduce_scatter %{{.*}} on @world mesh_axes = [2] scatter_axis = 0 {{.*}} : tensor<2x8x4xf32> -> tensor<1x8x4xf32>
// HSDP: mesh.all_reduce %[[RS1]] on @world mesh_axes = [0] {{.*}} : tensor<1x8x4xf32> -> tensor<1x8x4xf32>
// HSDP: %[[RS2:.*]] = mesh.reduce_scatter %{{.*}} on @world mesh_axes = [2] scatter_axis = 0 {{.*}} : tensor<2x4x8xf32> -> tensor<1x4x8xf32>
// HSDP: mesh.all_reduce %[[RS2]] on @world mesh_axes = [0] {{.*}} : tensor<1x4x8xf32> -> tensor<1x4x8xf32>

// REPLICAS: error: step-shard-fully expects replica-shape of positive sizes whose product is replicas (4)
func.func @loss(%x: tensor<6x4xf32> {step.input = "x"},
    %wr: tensor<4x4xf32> {step.param = #step.param<"wr", normal(0.02)>},
    %w1: tensor<4x8x4xf32> {step.param = #step.param<"w1", normal(0.02)>},
    %w2: tensor<4x4x8xf32> {step.param = #step.param<"w2", normal(0.02)>}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %wr transpose_b : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %probs = step.softmax %logits dim 1 : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %gate, %expert = step.top_k %probs k 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  %rows, %counts = step.moe_dispatch %x, %expert experts 4 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<12x4xf32>, tensor<4xi32>)
  %h = step.grouped_matmul %rows, %w1, %counts transpose_b : (tensor<12x4xf32>, tensor<4x8x4xf32>, tensor<4xi32>) -> tensor<12x8xf32>
  %a = step.gelu %h : tensor<12x8xf32>
  %o = step.grouped_matmul %a, %w2, %counts transpose_b : (tensor<12x8xf32>, tensor<4x4x8xf32>, tensor<4xi32>) -> tensor<12x4xf32>
  %y = step.moe_combine %o, %gate, %expert experts 4 : (tensor<12x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<6x4xf32>) -> tensor<f32>
  return %s : tensor<f32>

}
