func.func @loss(%w: tensor<4xf32> {step.param = #step.param<"w", zeros>},
                %a: tensor<3x4xf32> {step.input = "a"},
                %b: tensor<5x4xf32> {step.input = "b"}) -> tensor<f32> attributes {step.loss} {
  %0 = step.reduce_sum %w dims [0] : (tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
