func.func @loss(%w: tensor<16x512xf32> {step.param = #step.param<"w", normal(0.02)>},
                %tokens: tensor<2x4xi32> {step.input = "tokens"},
                %targets: tensor<2x4xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %w, %tokens : (tensor<16x512xf32>, tensor<2x4xi32>) -> tensor<2x4x512xf32>
  %a = step.attention %x, %x, %x heads 1 kv_heads 1 head_dim 512 causal : (tensor<2x4x512xf32>, tensor<2x4x512xf32>, tensor<2x4x512xf32>) -> tensor<2x4x512xf32>
  %logits = step.matmul %a, %w transpose_b : (tensor<2x4x512xf32>, tensor<16x512xf32>) -> tensor<2x4x16xf32>
  %l = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
