func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", normal(1.0)>},
                %n: tensor<2xi32> {step.input = "n"}) -> tensor<f32> attributes {step.loss} {
  %f = step.convert %n : tensor<2xi32> -> tensor<2xf32>
  %p = step.mul %w, %f : tensor<2xf32>
  %s = step.reduce_sum %p dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
