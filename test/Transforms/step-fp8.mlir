// RUN: stepc-opt %s -step-fp8 | FileCheck %s

// A linear layer's product (its weight a rank-2 parameter) reads its input
// rounded to e4m3 in [1, 128] tiles and its weight in [128, 128] blocks;
// its result goes on through quantize_grad_fp8 (e5m2 gradients). The
// embedding's table, the head tied to it and an untied head's logits stay
// as they are.
// CHECK-LABEL: func.func @loss
// CHECK: %[[E:.*]] = step.embedding %arg0
// CHECK: %[[XQ:.*]] = step.quantize_fp8 %[[E]] format e4m3 tile [1, 128]
// CHECK: %[[WQ:.*]] = step.quantize_fp8 %arg1 format e4m3 tile [128, 128]
// CHECK: %[[Y:.*]] = step.matmul %[[XQ]], %[[WQ]] transpose_b
// CHECK: %[[YQ:.*]] = step.quantize_grad_fp8 %[[Y]] format e5m2 tile [1, 128]
// CHECK: %[[H:.*]] = step.gelu %[[YQ]]
// CHECK-NOT: quantize
// CHECK: step.matmul %[[H]], %arg2 transpose_b
// CHECK-NOT: quantize
// CHECK: step.matmul %{{.*}}, %arg0 transpose_b
func.func @loss(%wte: tensor<16x8xf32> {step.param = #step.param<"wte", normal(0.02)>},
                %fc: tensor<32x8xf32> {step.param = #step.param<"fc", normal(0.02)>},
                %head: tensor<16x32xf32> {step.param = #step.param<"head", normal(0.02)>},
                %ids: tensor<2x4xi32> {step.input = "tokens"},
                %t: tensor<2x4xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %e = step.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %y = step.matmul %e, %fc transpose_b : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %h = step.gelu %y : tensor<2x4x32xf32>
  %logits = step.matmul %h, %head transpose_b : (tensor<2x4x32xf32>, tensor<16x32xf32>) -> tensor<2x4x16xf32>
  %l1 = step.cross_entropy %logits, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %tied = step.matmul %e, %wte transpose_b : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %l2 = step.cross_entropy %tied, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %l = step.add %l1, %l2 : tensor<f32>
  return %l : tensor<f32>
}
