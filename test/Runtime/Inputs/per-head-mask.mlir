// A one-layer Llama whose attention has a mask per head (an ALiBi-like
// constant bias, [1, 2, 8, 8]): tp:2 cannot split it (attention-mask.test).
// From examples/gen_model.py --arch llama --vocab 32 --seq 8 --dim 16 --layers 1 --heads 2 --batch 2 --ffn-multiple 16 --pad-token 0, the mask edited.
// Do not edit: regenerate with `make examples`.

func.func @loss(
    %tok_embeddings: tensor<32x16xf32> {step.param = #step.param<"tok_embeddings", normal(0.02)>},
    %layers_0_attention_norm: tensor<16xf32> {step.param = #step.param<"layers.0.attention_norm", ones, block 0>},
    %layers_0_attention_wq: tensor<16x16xf32> {step.param = #step.param<"layers.0.attention.wq", normal(0.02), block 0>},
    %layers_0_attention_wk: tensor<16x16xf32> {step.param = #step.param<"layers.0.attention.wk", normal(0.02), block 0>},
    %layers_0_attention_wv: tensor<16x16xf32> {step.param = #step.param<"layers.0.attention.wv", normal(0.02), block 0>},
    %layers_0_attention_wo: tensor<16x16xf32> {step.param = #step.param<"layers.0.attention.wo", scaled_normal(0.02, 1), block 0>},
    %layers_0_ffn_norm: tensor<16xf32> {step.param = #step.param<"layers.0.ffn_norm", ones, block 0>},
    %layers_0_feed_forward_w1: tensor<48x16xf32> {step.param = #step.param<"layers.0.feed_forward.w1", normal(0.02), block 0>},
    %layers_0_feed_forward_w2: tensor<16x48xf32> {step.param = #step.param<"layers.0.feed_forward.w2", scaled_normal(0.02, 1), block 0>},
    %layers_0_feed_forward_w3: tensor<48x16xf32> {step.param = #step.param<"layers.0.feed_forward.w3", normal(0.02), block 0>},
    %norm: tensor<16xf32> {step.param = #step.param<"norm", ones>},
    %output: tensor<32x16xf32> {step.param = #step.param<"output", normal(0.02)>},
    %tokens: tensor<2x8xi32> {step.input = "tokens"},
    %targets: tensor<2x8xi32> {step.input = "targets"})
    -> tensor<f32> attributes {step.loss} {
  %bias = step.constant dense<-0.5> : tensor<1x2x8x8xf32>
  %tok_emb = step.embedding %tok_embeddings, %tokens : (tensor<32x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %l0_attention_norm = step.rms_norm %tok_emb, %layers_0_attention_norm : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %l0_q = step.matmul %l0_attention_norm, %layers_0_attention_wq transpose_b : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %l0_q_rot = step.rotary %l0_q head_dim 8 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %l0_k = step.matmul %l0_attention_norm, %layers_0_attention_wk transpose_b : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %l0_k_rot = step.rotary %l0_k head_dim 8 : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %l0_v = step.matmul %l0_attention_norm, %layers_0_attention_wv transpose_b : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %l0_att = step.attention %l0_q_rot, %l0_k_rot, %l0_v mask %bias heads 2 kv_heads 2 head_dim 8 causal : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<1x2x8x8xf32>) -> tensor<2x8x16xf32>
  %l0_attn_out = step.matmul %l0_att, %layers_0_attention_wo transpose_b : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %l0_x_attn = step.add %tok_emb, %l0_attn_out : tensor<2x8x16xf32>
  %l0_ffn_norm = step.rms_norm %l0_x_attn, %layers_0_ffn_norm : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %l0_w1 = step.matmul %l0_ffn_norm, %layers_0_feed_forward_w1 transpose_b : (tensor<2x8x16xf32>, tensor<48x16xf32>) -> tensor<2x8x48xf32>
  %l0_silu = step.silu %l0_w1 : tensor<2x8x48xf32>
  %l0_w3 = step.matmul %l0_ffn_norm, %layers_0_feed_forward_w3 transpose_b : (tensor<2x8x16xf32>, tensor<48x16xf32>) -> tensor<2x8x48xf32>
  %l0_swiglu = step.mul %l0_silu, %l0_w3 : tensor<2x8x48xf32>
  %l0_ffn_out = step.matmul %l0_swiglu, %layers_0_feed_forward_w2 transpose_b : (tensor<2x8x48xf32>, tensor<16x48xf32>) -> tensor<2x8x16xf32>
  %l0_x_ffn = step.add %l0_x_attn, %l0_ffn_out : tensor<2x8x16xf32>
  %norm_1 = step.rms_norm %l0_x_ffn, %norm : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %logits = step.matmul %norm_1, %output transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %loss = step.cross_entropy %logits, %targets : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
