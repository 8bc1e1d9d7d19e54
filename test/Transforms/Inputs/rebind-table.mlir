// A table with a leading 1 broadcast over the batch (a rotary embedding's
// cos table [1, T, 1, D] written out): rebinding the batch rebinds it.
func.func @loss(%w: tensor<8x8xf32> {step.param = #step.param<"w", normal(0.1)>},
                %x: tensor<4x8xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %h = step.matmul %x, %w transpose_b : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c = step.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]> : tensor<1x8xf32>
  %b = step.broadcast %c : tensor<1x8xf32> -> tensor<4x8xf32>
  %m = step.mul %h, %b : tensor<4x8xf32>
  %s = step.reduce_sum %m dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
