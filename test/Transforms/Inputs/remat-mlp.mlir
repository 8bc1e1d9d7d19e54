// Two residual MLP blocks, a final norm and a tied head: small enough to read the recomputed
// ops in a lit test (step-remat.mlir).
func.func @loss(
    %wte: tensor<32x16xf32> {step.param = #step.param<"wte", normal(0.02)>},
    %fc0: tensor<64x16xf32> {step.param = #step.param<"h.0.fc.weight", normal(0.02)>},
    %proj0: tensor<16x64xf32> {step.param = #step.param<"h.0.proj.weight", normal(0.02)>},
    %fc1: tensor<64x16xf32> {step.param = #step.param<"h.1.fc.weight", normal(0.02)>},
    %proj1: tensor<16x64xf32> {step.param = #step.param<"h.1.proj.weight", normal(0.02)>},
    %norm: tensor<16xf32> {step.param = #step.param<"norm.weight", ones>},
    %tokens: tensor<4x8xi32> {step.input = "tokens"},
    %targets: tensor<4x8xi32> {step.input = "targets"})
    -> tensor<f32> attributes {step.loss} {
  %x0 = step.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %h0 = step.matmul %x0, %fc0 transpose_b : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %g0 = step.gelu %h0 : tensor<4x8x64xf32>
  %o0 = step.matmul %g0, %proj0 transpose_b : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %x1 = step.add %x0, %o0 : tensor<4x8x16xf32>
  %h1 = step.matmul %x1, %fc1 transpose_b : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %g1 = step.gelu %h1 : tensor<4x8x64xf32>
  %o1 = step.matmul %g1, %proj1 transpose_b : (tensor<4x8x64xf32>, tensor<16x64xf32>) -> tensor<4x8x16xf32>
  %x2 = step.add %x1, %o1 : tensor<4x8x16xf32>
  %xf = step.rms_norm %x2, %norm : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %logits = step.matmul %xf, %wte transpose_b : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = step.cross_entropy %logits, %targets : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
