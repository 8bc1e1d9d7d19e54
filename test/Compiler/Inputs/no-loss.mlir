func.func @f(%w: tensor<2xf32>) -> tensor<2xf32> {
  return %w : tensor<2xf32>
}
