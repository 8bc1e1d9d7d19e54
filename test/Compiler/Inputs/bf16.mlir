func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", normal(1.0)>}) -> tensor<f32> attributes {step.loss} {
  %h = step.convert %w : tensor<2xf32> -> tensor<2xbf16>
  %s = step.reduce_sum %h dims [0] : (tensor<2xbf16>) -> tensor<bf16>
  %0 = step.convert %s : tensor<bf16> -> tensor<f32>
  return %0 : tensor<f32>
}
