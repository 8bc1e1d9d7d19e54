// RUN: stepc-opt %s -step-fp8 -step-autodiff -step-fp8-weight-grads | FileCheck %s

// The weight gradient dW = dYᵀ·X sums over the 8 tokens: its operands are
// rounded again, flattened to [tokens, features], in [128, 1] tiles: the
// input right after its [1, 128] rounding (the forward keeps that copy for
// the backward), the output gradient after its own. The input gradient
// still reads the weight's [128, 128] blocks and the [1, 128]-rounded
// output gradient.
// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[XQ:.*]] = step.quantize_fp8 %[[E:.*]] format e4m3 tile [1, 128] {step.phase = #step.phase<forward>}
// CHECK: %[[X2:.*]] = step.reshape %[[E]] {step.phase = #step.phase<forward>} : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[XT:.*]] = step.quantize_fp8 %[[X2]] format e4m3 tile [128, 1] {step.phase = #step.phase<forward>}
// CHECK: %[[WQ:.*]] = step.quantize_fp8 %arg1 format e4m3 tile [128, 128]
// CHECK: step.matmul %[[XQ]], %[[WQ]] transpose_b
// CHECK: %[[DYQ:.*]] = step.quantize_fp8 %[[DY:.*]] format e5m2 tile [1, 128] {step.phase = #step.phase<backward>}
// CHECK: %[[DY2:.*]] = step.reshape %[[DY]] {step.phase = #step.phase<backward>} : tensor<2x4x32xf32> -> tensor<8x32xf32>
// CHECK: %[[DYT:.*]] = step.quantize_fp8 %[[DY2]] format e5m2 tile [128, 1] {step.phase = #step.phase<backward>}
// CHECK-DAG: step.matmul %[[DYQ]], %[[WQ]] {step.phase
// CHECK-DAG: step.matmul %[[DYT]], %[[XT]] transpose_a {step.phase
func.func @loss(%wte: tensor<16x8xf32> {step.param = #step.param<"wte", normal(0.02)>},
                %fc: tensor<32x8xf32> {step.param = #step.param<"fc", normal(0.02)>},
                %ids: tensor<2x4xi32> {step.input = "tokens"},
                %t: tensor<2x4xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %e = step.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %y = step.matmul %e, %fc transpose_b : (tensor<2x4x8xf32>, tensor<32x8xf32>) -> tensor<2x4x32xf32>
  %h = step.gelu %y : tensor<2x4x32xf32>
  %s = step.reduce_sum %h dims [2] : (tensor<2x4x32xf32>) -> tensor<2x4xf32>
  %l = step.reduce_sum %s dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
