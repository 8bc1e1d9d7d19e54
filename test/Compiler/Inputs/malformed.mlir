func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}) -> tensor<f32> attributes {step.loss} {
  %0 = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  %1 = step.frobnicate %0
  return %1 : tensor<f32>
}
