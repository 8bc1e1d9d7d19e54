func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", normal(1.0)>}) -> tensor<f32> attributes {step.loss} {
  %h = step.convert %w : tensor<2xf32> -> tensor<2xbf16>
  %f = step.convert %h : tensor<2xbf16> -> tensor<2xf32>
  %0 = step.reduce_sum %f dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
