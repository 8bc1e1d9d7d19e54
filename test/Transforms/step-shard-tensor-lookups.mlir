// RUN: stepc-opt --step-shard-tensor="tp=2" %s | FileCheck %s

// Two vocabulary-split tables looked up (token embedding, and positions
// looked up by constant ids, as an imported nanoGPT does): each lookup
// reads its own shard with its own first row. (The second first-row
// computation once used an insertion point at the erased first lookup.)
// CHECK: step.embedding %arg0, %arg2 shard %[[F8:.*]] of 8 : (tensor<4x4xf32>, tensor<2x4xi32>, tensor<i32>)
// CHECK: step.embedding %arg1, %{{.*}} shard %[[F4:.*]] of 4 : (tensor<2x4xf32>, tensor<4xi32>, tensor<i32>)
// CHECK: step.vocab_logits
func.func @loss(
    %wte: tensor<8x4xf32> {step.param = #step.param<"wte", normal(0.02)>},
    %wpe: tensor<4x4xf32> {step.param = #step.param<"wpe", normal(0.02)>},
    %tokens: tensor<2x4xi32> {step.input = "tokens"},
    %targets: tensor<2x4xi32> {step.input = "targets"})
    -> tensor<f32> attributes {step.loss} {
  %tok = step.embedding %wte, %tokens : (tensor<8x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
  %ids = step.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
  %pe = step.embedding %wpe, %ids : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<4x4xf32>
  %pos = step.broadcast %pe : tensor<4x4xf32> -> tensor<2x4x4xf32>
  %x = step.add %tok, %pos : tensor<2x4x4xf32>
  %logits = step.matmul %x, %wte transpose_b : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %loss = step.cross_entropy %logits, %targets : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
