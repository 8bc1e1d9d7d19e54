func.func @loss(%w: tensor<16x8xf32> {step.param = #step.param<"w", normal(0.02)>},
                %tokens: tensor<2x4xi32> {step.input = "tokens"},
                %targets: tensor<2x4xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %w, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %xb = step.convert %x : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  %t = step.tanh %xb : tensor<2x4x8xbf16>
  %tf = step.convert %t : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
  %logits = step.matmul %tf, %w transpose_b : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %l = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
