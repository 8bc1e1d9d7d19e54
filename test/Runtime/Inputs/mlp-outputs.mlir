// examples/mlp-classifier/model.mlir with a second output: the class
// probabilities, which the runtime reads (test/Runtime/outputs.test).
func.func @loss(
    %fc1_w: tensor<64x16xf32> {step.param = #step.param<"fc1.weight", normal(0.25)>},
    %fc1_b: tensor<64xf32> {step.param = #step.param<"fc1.bias", zeros>},
    %fc2_w: tensor<4x64xf32> {step.param = #step.param<"fc2.weight", normal(0.125)>},
    %fc2_b: tensor<4xf32> {step.param = #step.param<"fc2.bias", zeros>},
    %x: tensor<64x16xf32> {step.input = "x"},
    %labels: tensor<64xi32> {step.input = "labels"})
    -> (tensor<f32>, tensor<64x4xf32> {step.result = #step.result<output, "probabilities">}) attributes {step.loss} {
  %h_mm = step.matmul %x, %fc1_w transpose_b : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x64xf32>
  %h_bias = step.broadcast %fc1_b : tensor<64xf32> -> tensor<64x64xf32>
  %h_pre = step.add %h_mm, %h_bias : tensor<64x64xf32>
  %h = step.gelu %h_pre : tensor<64x64xf32>
  %o_mm = step.matmul %h, %fc2_w transpose_b : (tensor<64x64xf32>, tensor<4x64xf32>) -> tensor<64x4xf32>
  %o_bias = step.broadcast %fc2_b : tensor<4xf32> -> tensor<64x4xf32>
  %logits = step.add %o_mm, %o_bias : tensor<64x4xf32>
  %loss = step.cross_entropy %logits, %labels : (tensor<64x4xf32>, tensor<64xi32>) -> tensor<f32>
  %probabilities = step.softmax %logits dim 1 : (tensor<64x4xf32>) -> tensor<64x4xf32>
  return %loss, %probabilities : tensor<f32>, tensor<64x4xf32>
}
