// RUN: stepc-opt --step-derive-blocks --split-input-file %s | FileCheck %s

// Two residual MLP blocks with arbitrary names: the pattern (fc, proj)
// repeats twice, so fc/proj are blocks 0 and 1; the embedding and the
// final norm are outside. Names play no part.
// CHECK-LABEL: func.func @two_blocks
// CHECK-SAME: #step.param<"emb", normal(0.02)>
// CHECK-SAME: #step.param<"second_up", normal(0.02), block 1>
// CHECK-SAME: #step.param<"zz_first_up", normal(0.02), block 0>
// CHECK-SAME: #step.param<"aa_down", normal(0.02), block 0>
// CHECK-SAME: #step.param<"w", normal(0.02), block 1>
// CHECK-SAME: #step.param<"norm", ones>
func.func @two_blocks(
    %wte: tensor<32x16xf32> {step.param = #step.param<"emb", normal(0.02)>},
    // Declared out of order: the forward's order of use decides.
    %fc1: tensor<64x16xf32> {step.param = #step.param<"second_up", normal(0.02)>},
    %fc0: tensor<64x16xf32> {step.param = #step.param<"zz_first_up", normal(0.02)>},
    %proj0: tensor<16x64xf32> {step.param = #step.param<"aa_down", normal(0.02)>},
    %proj1: tensor<16x64xf32> {step.param = #step.param<"w", normal(0.02)>},
    %norm: tensor<16xf32> {step.param = #step.param<"norm", ones>},
    %tokens: tensor<4x8xi32> {step.input = "tokens"},
    %targets: tensor<4x8xi32> {step.input = "targets"})
    -> tensor<f32> attributes {step.loss} {
  %x0 = step.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %h0 = step.matmul %x0, %fc0 transpose_b : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %g0 = step.gelu %h0 : tensor<4x8x64xf32>
  %o0 = step.matmul %g0, %proj0 transpose_b : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %x1 = step.add %x0, %o0 : tensor<4x8x16xf32>
  %h1 = step.matmul %x1, %fc1 transpose_b : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %g1 = step.gelu %h1 : tensor<4x8x64xf32>
  %o1 = step.matmul %g1, %proj1 transpose_b : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %x2 = step.add %x1, %o1 : tensor<4x8x16xf32>
  %xf = step.rms_norm %x2, %norm : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %logits = step.matmul %xf, %wte transpose_b : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = step.cross_entropy %logits, %targets : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A front end's markers stand, even where the IR would say otherwise.
// CHECK-LABEL: func.func @marked
// CHECK-SAME: #step.param<"a", normal(0.02), block 5>
// CHECK-SAME: #step.param<"b", normal(0.02)>
func.func @marked(
    %a: tensor<4x4xf32> {step.param = #step.param<"a", normal(0.02), block 5>},
    %b: tensor<4x4xf32> {step.param = #step.param<"b", normal(0.02)>},
    %x: tensor<2x4xf32> {step.input = "x"})
    -> tensor<f32> attributes {step.loss} {
  %h = step.matmul %x, %a : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %o = step.matmul %h, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = step.reduce_sum %o dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Layers that differ (other widths) are not a repeated block.
// CHECK-LABEL: func.func @distinct
// CHECK-NOT: block
// CHECK-SAME: attributes {step.loss}
func.func @distinct(
    %a: tensor<8x4xf32> {step.param = #step.param<"a", normal(0.02)>},
    %b: tensor<4x8xf32> {step.param = #step.param<"b", normal(0.02)>},
    %x: tensor<2x4xf32> {step.input = "x"})
    -> tensor<f32> attributes {step.loss} {
  %h = step.matmul %x, %a transpose_b : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  %o = step.matmul %h, %b transpose_b : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %l = step.reduce_sum %o dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
