// A model whose loss is no cross-entropy (the squared error of each
// token's embedding against its target's): its eval step returns the loss
// alone, no logits, so there is nothing to sample (test/Runtime/sample.test).
func.func @loss(%e: tensor<64x4xf32> {step.param = #step.param<"e", normal(0.02)>},
                %tokens: tensor<4x8xi32> {step.input = "tokens"},
                %targets: tensor<4x8xi32> {step.input = "targets"}) -> tensor<f32>
    attributes {step.loss} {
  %x = step.embedding %e, %tokens : (tensor<64x4xf32>, tensor<4x8xi32>) -> tensor<4x8x4xf32>
  %t = step.embedding %e, %targets : (tensor<64x4xf32>, tensor<4x8xi32>) -> tensor<4x8x4xf32>
  %d = step.sub %x, %t : tensor<4x8x4xf32>
  %sq = step.mul %d, %d : tensor<4x8x4xf32>
  %s = step.reduce_mean %sq dims [0, 1, 2] : (tensor<4x8x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
