// Expert parallelism (ep:2) with a capacity of 1 pair per expert in each
// sequence of 3 tokens: 6 tokens, 4 experts, so one rank dispatches
// min(N·K, (N/S)·E·C) = min(12, 2·4·1) = 8 rows and each destination's block
// has min(12, 2·2·1) = 4, so the all-to-alls move 8 rows instead of
// dropless's 24. The grouped dispatch and combine
// keep the capacity. The counts the loss reads outside the experts (a
// metric of the pairs kept) are this rank's own; the products read the
// received ones.
// RUN: stepc-opt %s -step-shard-experts=ep=2 | FileCheck %s

// CHECK-LABEL: func.func @loss(
// CHECK: %[[GATE:[a-z0-9_]+]], %[[EXPERT:[a-z0-9_]+]] = step.top_k
// CHECK: %[[ROWS:[a-z0-9_]+]], %[[COUNTS:[a-z0-9_]+]] = step.moe_dispatch %{{.*}}, %[[EXPERT]] experts 4 groups 2 capacity 1 per 3 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
// CHECK: %[[RECV:.*]] = mesh.all_to_all %[[ROWS]] on @world mesh_axes = [0] split_axis = 0 concat_axis = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: %[[BLOCKS:.*]] = step.reshape %[[COUNTS]] : tensor<4xi32> -> tensor<2x2xi32>
// CHECK: %[[RCOUNTS:.*]] = mesh.all_to_all %[[BLOCKS]]
// CHECK: %[[H:.*]] = step.grouped_matmul %[[RECV]], %{{.*}}, %[[RCOUNTS]] transpose_b : (tensor<8x4xf32>, tensor<2x8x4xf32>, tensor<2x2xi32>) -> tensor<8x8xf32>
// CHECK: %[[HOME:.*]] = mesh.all_to_all %{{.*}} on @world mesh_axes = [0] {{.*}} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: step.moe_combine %[[HOME]], %[[GATE]], %[[EXPERT]] experts 4 groups 2 capacity 1 per 3 : (tensor<8x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
// CHECK: step.convert %[[COUNTS]] : tensor<4xi32> -> tensor<4xf32>
func.func @loss(%x: tensor<6x4xf32> {step.input = "x"},
    %wr: tensor<4x4xf32> {step.param = #step.param<"wr", normal(0.02)>},
    %w1: tensor<4x8x4xf32> {step.param = #step.param<"w1", normal(0.02)>},
    %w2: tensor<4x4x8xf32> {step.param = #step.param<"w2", normal(0.02)>}) -> tensor<f32> attributes {step.loss} {
  %logits = step.matmul %x, %wr transpose_b : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %probs = step.softmax %logits dim 1 : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %gate, %expert = step.top_k %probs k 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  %rows, %counts = step.moe_dispatch %x, %expert experts 4 capacity 1 per 3 : (tensor<6x4xf32>, tensor<6x2xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
  %h = step.grouped_matmul %rows, %w1, %counts transpose_b : (tensor<8x4xf32>, tensor<4x8x4xf32>, tensor<4xi32>) -> tensor<8x8xf32>
  %a = step.gelu %h : tensor<8x8xf32>
  %o = step.grouped_matmul %a, %w2, %counts transpose_b : (tensor<8x8xf32>, tensor<4x4x8xf32>, tensor<4xi32>) -> tensor<8x4xf32>
  %y = step.moe_combine %o, %gate, %expert experts 4 capacity 1 per 3 : (tensor<8x4xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<6x4xf32>) -> tensor<f32>
  %kf = step.convert %counts : tensor<4xi32> -> tensor<4xf32>
  %k = step.reduce_sum %kf dims [0] : (tensor<4xf32>) -> tensor<f32>
  %t = step.add %s, %k : tensor<f32>
  return %t : tensor<f32>
}
