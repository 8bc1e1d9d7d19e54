func.func @loss(%x: tensor<2xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %0 = step.reduce_sum %x dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
