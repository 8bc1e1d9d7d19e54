// A small MLP classifier on float features: 16 features, one hidden layer
// of 64 GELU units, 4 classes, batch 64. Trained by examples/mlp-classifier/
// run.sh on the task make_data.py generates (docs/training.md).
func.func @loss(
    %fc1_w: tensor<64x16xf32> {step.param = #step.param<"fc1.weight", normal(0.25)>},
    %fc1_b: tensor<64xf32> {step.param = #step.param<"fc1.bias", zeros>},
    %fc2_w: tensor<4x64xf32> {step.param = #step.param<"fc2.weight", normal(0.125)>},
    %fc2_b: tensor<4xf32> {step.param = #step.param<"fc2.bias", zeros>},
    %x: tensor<64x16xf32> {step.input = "x"},
    %labels: tensor<64xi32> {step.input = "labels"}) -> tensor<f32> attributes {step.loss} {
  %h_mm = step.matmul %x, %fc1_w transpose_b : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x64xf32>
  %h_bias = step.broadcast %fc1_b : tensor<64xf32> -> tensor<64x64xf32>
  %h_pre = step.add %h_mm, %h_bias : tensor<64x64xf32>
  %h = step.gelu %h_pre : tensor<64x64xf32>
  %o_mm = step.matmul %h, %fc2_w transpose_b : (tensor<64x64xf32>, tensor<4x64xf32>) -> tensor<64x4xf32>
  %o_bias = step.broadcast %fc2_b : tensor<4xf32> -> tensor<64x4xf32>
  %logits = step.add %o_mm, %o_bias : tensor<64x4xf32>
  %loss = step.cross_entropy %logits, %labels : (tensor<64x4xf32>, tensor<64xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
