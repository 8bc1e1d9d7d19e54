// Two 2^20-square GEMMs: each op's FLOPs fit int64 (3 x 2^61), their sum
// does not. stepc-errors.test checks the error.
func.func @loss(%w1: tensor<1048576x1048576xf32> {step.param = #step.param<"w1", normal(0.02)>},
                %w2: tensor<1048576x1048576xf32> {step.param = #step.param<"w2", normal(0.02)>},
                %x: tensor<1048576x1048576xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %h1 = step.matmul %x, %w1 transpose_b : (tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>) -> tensor<1048576x1048576xf32>
  %h2 = step.matmul %h1, %w2 transpose_b : (tensor<1048576x1048576xf32>, tensor<1048576x1048576xf32>) -> tensor<1048576x1048576xf32>
  %s = step.reduce_sum %h2 dims [0, 1] : (tensor<1048576x1048576xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
