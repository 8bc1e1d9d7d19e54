func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", normal(1.0)>}) -> tensor<f32> attributes {step.loss} {
  %0 = arith.addf %w, %w : tensor<2xf32>
  %s = step.reduce_sum %0 dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
