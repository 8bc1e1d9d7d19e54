// examples/mlp-classifier/model.mlir with masks and index ops: the hidden
// units past 48 (an iota compared with a constant) are halved by a select;
// each row's largest logit (argmax, then gather) adds a small penalty; the
// batch accuracy (argmax equal to the label, converted to float) is an
// output (test/Runtime/index-ops.test).
func.func @loss(
    %fc1_w: tensor<64x16xf32> {step.param = #step.param<"fc1.weight", normal(0.25)>},
    %fc1_b: tensor<64xf32> {step.param = #step.param<"fc1.bias", zeros>},
    %fc2_w: tensor<4x64xf32> {step.param = #step.param<"fc2.weight", normal(0.125)>},
    %fc2_b: tensor<4xf32> {step.param = #step.param<"fc2.bias", zeros>},
    %x: tensor<64x16xf32> {step.input = "x"},
    %labels: tensor<64xi32> {step.input = "labels"})
    -> (tensor<f32>, tensor<f32> {step.result = #step.result<output, "accuracy">}) attributes {step.loss} {
  %h_mm = step.matmul %x, %fc1_w transpose_b : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x64xf32>
  %h_bias = step.broadcast %fc1_b : tensor<64xf32> -> tensor<64x64xf32>
  %h_pre = step.add %h_mm, %h_bias : tensor<64x64xf32>
  %h_act = step.gelu %h_pre : tensor<64x64xf32>
  %unit = step.iota dim 0 : tensor<64xf32>
  %units = step.broadcast %unit : tensor<64xf32> -> tensor<64x64xf32>
  %c48 = step.constant dense<48.0> : tensor<64x64xf32>
  %kept = step.compare lt, %units, %c48 : tensor<64x64xf32>
  %half = step.constant dense<0.5> : tensor<64x64xf32>
  %h_half = step.mul %h_act, %half : tensor<64x64xf32>
  %h = step.select %kept, %h_act, %h_half : tensor<64x64xi1>, tensor<64x64xf32>
  %o_mm = step.matmul %h, %fc2_w transpose_b : (tensor<64x64xf32>, tensor<4x64xf32>) -> tensor<64x4xf32>
  %o_bias = step.broadcast %fc2_b : tensor<4xf32> -> tensor<64x4xf32>
  %logits = step.add %o_mm, %o_bias : tensor<64x4xf32>
  %ce = step.cross_entropy %logits, %labels : (tensor<64x4xf32>, tensor<64xi32>) -> tensor<f32>
  %pred = step.argmax %logits dim 1 : (tensor<64x4xf32>) -> tensor<64xi32>
  %pred2 = step.reshape %pred : tensor<64xi32> -> tensor<64x1xi32>
  %top = step.gather %logits, %pred2 dim 1 : (tensor<64x4xf32>, tensor<64x1xi32>) -> tensor<64x1xf32>
  %top_mean = step.reduce_mean %top dims [0, 1] : (tensor<64x1xf32>) -> tensor<f32>
  %c001 = step.constant dense<0.01> : tensor<f32>
  %penalty = step.mul %top_mean, %c001 : tensor<f32>
  %loss = step.add %ce, %penalty : tensor<f32>
  %hit = step.compare eq, %pred, %labels : tensor<64xi32>
  %hits = step.convert %hit : tensor<64xi1> -> tensor<64xf32>
  %accuracy = step.reduce_mean %hits dims [0] : (tensor<64xf32>) -> tensor<f32>
  return %loss, %accuracy : tensor<f32>, tensor<f32>
}
