// A model whose heads, kv heads, feature widths or vocabulary tp does not
// divide is an error naming both numbers.
// RUN: stepc-opt %s -split-input-file -verify-diagnostics -step-shard-tensor=tp=2

func.func @loss(%x: tensor<2x4x8xf32> {step.input = "x"},
                %wq: tensor<6x8xf32> {step.param = #step.param<"wq", normal(0.02)>},
                %wo: tensor<8x6xf32> {step.param = #step.param<"wo", normal(0.02)>})
    -> tensor<f32> attributes {step.loss} {
  %q = step.matmul %x, %wq transpose_b : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  // expected-error @+1 {{has 3 heads, which tp:2 does not divide}}
  %a = step.attention %q, %q, %q heads 3 kv_heads 3 head_dim 2 causal : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %o = step.matmul %a, %wo transpose_b : (tensor<2x4x6xf32>, tensor<8x6xf32>) -> tensor<2x4x8xf32>
  %l = step.reduce_mean %o dims [0, 1, 2] : (tensor<2x4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @loss(%x: tensor<2x4x8xf32> {step.input = "x"},
                %wq: tensor<12x8xf32> {step.param = #step.param<"wq", normal(0.02)>},
                %wk: tensor<6x8xf32> {step.param = #step.param<"wk", normal(0.02)>},
                %wo: tensor<8x12xf32> {step.param = #step.param<"wo", normal(0.02)>})
    -> tensor<f32> attributes {step.loss} {
  %q = step.matmul %x, %wq transpose_b : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %k = step.matmul %x, %wk transpose_b : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  // expected-error @+1 {{has 3 kv heads, which tp:2 does not divide (kv heads are split when tp divides them, replicated only when there is one)}}
  %a = step.attention %q, %k, %k heads 6 kv_heads 3 head_dim 2 causal : (tensor<2x4x12xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x12xf32>
  %o = step.matmul %a, %wo transpose_b : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
  %l = step.reduce_mean %o dims [0, 1, 2] : (tensor<2x4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An MLP 7 wide.
func.func @loss(%x: tensor<2x4x8xf32> {step.input = "x"},
                %w1: tensor<7x8xf32> {step.param = #step.param<"w1", normal(0.02)>},
                %w2: tensor<8x7xf32> {step.param = #step.param<"w2", normal(0.02)>})
    -> tensor<f32> attributes {step.loss} {
  // expected-error @+1 {{splits parameter 'w1' along dimension 0 in parts of 7, which tp:2 does not divide}}
  %h = step.matmul %x, %w1 transpose_b : (tensor<2x4x8xf32>, tensor<7x8xf32>) -> tensor<2x4x7xf32>
  %g = step.gelu %h : tensor<2x4x7xf32>
  %o = step.matmul %g, %w2 transpose_b : (tensor<2x4x7xf32>, tensor<8x7xf32>) -> tensor<2x4x8xf32>
  %l = step.reduce_mean %o dims [0, 1, 2] : (tensor<2x4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A vocabulary of 33 tokens.
func.func @loss(%wte: tensor<33x8xf32> {step.param = #step.param<"wte", normal(0.02)>},
                %tokens: tensor<2x4xi32> {step.input = "tokens"},
                %targets: tensor<2x4xi32> {step.input = "targets"})
    -> tensor<f32> attributes {step.loss} {
  // expected-error @+1 {{reads 'wte', whose vocabulary of 33 rows tp:2 does not divide (the embedding and the head are split along it)}}
  %x = step.embedding %wte, %tokens : (tensor<33x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = step.matmul %x, %wte transpose_b : (tensor<2x4x8xf32>, tensor<33x8xf32>) -> tensor<2x4x33xf32>
  %l = step.cross_entropy %logits, %targets : (tensor<2x4x33xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
