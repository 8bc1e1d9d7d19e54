// Tensor parallelism on one GPT block (tp:2): the QKV projection is
// column-parallel in three segments (Q, K, V each split), attention runs
// on this rank's head, the output projection is row-parallel and its
// partial sums all-reduced; the MLP likewise; the tied embedding and head
// are split along the vocabulary, with the parallel cross-entropy.
// RUN: stepc-opt %s -step-shard-tensor=tp=2 | FileCheck %s
// The backward: each replicated value entering a split region has its
// gradient summed over tp; nothing else communicates.
// RUN: stepc-opt %s -step-shard-tensor=tp=2 -step-autodiff | FileCheck %s --check-prefix=GRAD
// Sequence parallelism: partial sums reduce-scattered along the sequence
// (outermost for the collective), norms on this rank's 4 of 8 positions
// with their weights' gradients summed over tp, an all-gather entering
// each tp region; in the backward the entry's gradient is one
// reduce-scatter.
// RUN: stepc-opt %s "-step-shard-tensor=tp=2 sequence-parallel=true" | FileCheck %s --check-prefix=SP
// RUN: stepc-opt %s "-step-shard-tensor=tp=2 sequence-parallel=true" -step-autodiff | FileCheck %s --check-prefix=SPGRAD
// On a 2x2 mesh (fsdp:2,tp:2) the tp collectives run along axis 1.
// RUN: stepc-opt %s "-step-shard-tensor=tp=2 mesh-shape=2,2" | FileCheck %s --check-prefix=MESH

// CHECK: mesh.mesh @world(shape = 2)
// CHECK-LABEL: func.func @loss(
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<16x16xf32> {step.param = #step.param<"wte", normal(0.02)>, step.tp_shard = {dim = 0 : i64, segments = array<i64: 32>}}
// CHECK-SAME: %[[WPE:[a-z0-9]+]]: tensor<8x16xf32> {step.param = #step.param<"wpe", normal(0.02)>}
// CHECK-SAME: tensor<24x16xf32> {step.param = #step.param<"h.0.attn.c_attn.weight", normal(0.02)>, step.tp_shard = {dim = 0 : i64, segments = array<i64: 16, 16, 16>}}
// CHECK-SAME: tensor<24xf32> {step.param = #step.param<"h.0.attn.c_attn.bias", zeros>, step.tp_shard = {dim = 0 : i64, segments = array<i64: 16, 16, 16>}}
// CHECK-SAME: tensor<16x8xf32> {step.param = #step.param<"h.0.attn.c_proj.weight", scaled_normal(0.02, 1)>, step.tp_shard = {dim = 1 : i64, segments = array<i64: 16>}}
// CHECK-SAME: tensor<16xf32> {step.param = #step.param<"h.0.attn.c_proj.bias", zeros>}
// CHECK-SAME: tensor<32x16xf32> {step.param = #step.param<"h.0.mlp.c_fc.weight", normal(0.02)>, step.tp_shard = {dim = 0 : i64, segments = array<i64: 64>}}
// CHECK-SAME: tensor<16x32xf32> {step.param = #step.param<"h.0.mlp.c_proj.weight", scaled_normal(0.02, 1)>, step.tp_shard = {dim = 1 : i64, segments = array<i64: 64>}}
// This rank's first vocabulary row, then the lookup of its rows, summed.
// CHECK: %[[STARTS:.*]] = step.constant dense<[0, 16]> : tensor<2xi32>
// CHECK: %[[MINE:.*]] = mesh.all_slice %[[STARTS]] on @world mesh_axes = [0] slice_axis = 0
// CHECK: %[[FIRST:.*]] = step.reshape %[[MINE]] : tensor<1xi32> -> tensor<i32>
// CHECK: %[[PART:.*]] = step.embedding %[[WTE]], %{{.*}} shard %[[FIRST]] of 32
// CHECK: mesh.all_reduce %[[PART]] on @world mesh_axes = [0]
// Column-parallel QKV: f, then this rank's 24 of 48 columns.
// CHECK: %[[LN1:.*]] = step.layer_norm
// CHECK: %[[IN:.*]] = step.copy_to_parallel %[[LN1]] mesh @world axes [0] : tensor<2x8x16xf32>
// CHECK: step.matmul %[[IN]], %{{.*}} transpose_b : (tensor<2x8x16xf32>, tensor<24x16xf32>) -> tensor<2x8x24xf32>
// CHECK: step.slice %{{.*}} offsets [0, 0, 0] sizes [2, 8, 8]
// CHECK: step.slice %{{.*}} offsets [0, 0, 8] sizes [2, 8, 8]
// CHECK: step.slice %{{.*}} offsets [0, 0, 16] sizes [2, 8, 8]
// CHECK: step.attention %{{.*}} heads 1 kv_heads 1 head_dim 8 causal : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
// Row-parallel output projection: partial sums, all-reduced before the bias.
// CHECK: %[[PROJ:.*]] = step.matmul %{{.*}} transpose_b : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
// CHECK: %[[SUM:.*]] = mesh.all_reduce %[[PROJ]] on @world mesh_axes = [0]
// CHECK: step.add %[[SUM]]
// CHECK: step.copy_to_parallel
// CHECK: step.matmul {{.*}} -> tensor<2x8x32xf32>
// CHECK: step.gelu {{.*}} : tensor<2x8x32xf32>
// CHECK: %[[FC2:.*]] = step.matmul {{.*}} : (tensor<2x8x32xf32>, tensor<16x32xf32>) -> tensor<2x8x16xf32>
// CHECK: mesh.all_reduce %[[FC2]]
// The head: this rank's 16 logits of 32; the loss from gathered
// log-sum-exps and the target logit of the shard lookup, summed.
// CHECK: %[[H:.*]] = step.copy_to_parallel
// CHECK: %[[LOGITS:.*]] = step.matmul %[[H]], %[[WTE]] transpose_b {step.vocab_logits = 0 : i64} : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NOT: step.cross_entropy
// CHECK: mesh.all_gather %{{.*}} on @world mesh_axes = [0] gather_axis = 0 : tensor<1x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[ROWS:.*]] = step.embedding %[[WTE]], %{{.*}} shard %[[FIRST]] of 32
// CHECK: step.mul %[[H]], %[[ROWS]]
// CHECK: mesh.all_reduce
// CHECK: step.reduce_mean %{{.*}} dims [0, 1] {step.loss_tokens = 16 : i64}

// GRAD-LABEL: func.func @loss_grad(
// GRAD-NOT: step.copy_to_parallel
// GRAD: mesh.all_slice
// GRAD: step.embedding_grad {{.*}} num_embeddings 16 shard {{.*}} of 32
// GRAD: return

// SP-LABEL: func.func @loss(
// SP-SAME: %[[WTE:[a-z0-9]+]]: tensor<16x16xf32>
// SP-SAME: %[[WPE:[a-z0-9]+]]: tensor<8x16xf32>
// SP: %[[PART:.*]] = step.embedding {{.*}} shard
// SP: %[[T:.*]] = step.transpose %[[PART]] [1, 0, 2] : (tensor<2x8x16xf32>) -> tensor<8x2x16xf32>
// SP: %[[RS:.*]] = mesh.reduce_scatter %[[T]] on @world mesh_axes = [0] scatter_axis = 0 : tensor<8x2x16xf32> -> tensor<4x2x16xf32>
// SP: step.transpose %[[RS]] [1, 0, 2] : (tensor<4x2x16xf32>) -> tensor<2x4x16xf32>
// The position embedding's rows of this rank (no communication).
// SP-NOT: step.broadcast %{{.*}} : tensor<8x16xf32> -> tensor<2x8x16xf32>
// SP: %[[WPE4:.*]] = mesh.all_slice %[[WPE]] on @world mesh_axes = [0] slice_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// SP: step.broadcast %[[WPE4]] : tensor<4x16xf32> -> tensor<2x4x16xf32>
// SP: %[[W:.*]] = step.copy_to_parallel %{{.*}} mesh @world axes [0] : tensor<16xf32>
// SP: step.layer_norm %{{.*}}, %[[W]], %{{.*}} : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// SP: %[[AG:.*]] = mesh.all_gather %{{.*}} on @world mesh_axes = [0] gather_axis = 0 : tensor<4x2x16xf32> -> tensor<8x2x16xf32>
// SP: step.copy_to_parallel %[[AG]] mesh @world axes [0] : tensor<8x2x16xf32>
// SP: step.attention
// SP: mesh.reduce_scatter
// SP-NOT: mesh.all_reduce %{{.*}} : tensor<2x8x16xf32>

// SPGRAD-LABEL: func.func @loss_grad(
// SPGRAD: mesh.reduce_scatter %{{.*}} on @world mesh_axes = [0] scatter_axis = 0 {step.phase = #step.phase<backward>} : tensor<8x2x16xf32> -> tensor<4x2x16xf32>
// SPGRAD-NOT: mesh.all_reduce %{{.*}} : tensor<8x2x16xf32>
// SPGRAD: return

// MESH: mesh.mesh @world(shape = 2x2)
// MESH: step.copy_to_parallel %{{.*}} mesh @world axes [1]
// MESH: mesh.all_reduce %{{.*}} on @world mesh_axes = [1]

func.func @loss(
    %wte: tensor<32x16xf32> {step.param = #step.param<"wte", normal(0.02)>},
    %wpe: tensor<8x16xf32> {step.param = #step.param<"wpe", normal(0.02)>},
    %h_0_ln_1_weight: tensor<16xf32> {step.param = #step.param<"h.0.ln_1.weight", ones>},
    %h_0_ln_1_bias: tensor<16xf32> {step.param = #step.param<"h.0.ln_1.bias", zeros>},
    %h_0_attn_c_attn_weight: tensor<48x16xf32> {step.param = #step.param<"h.0.attn.c_attn.weight", normal(0.02)>},
    %h_0_attn_c_attn_bias: tensor<48xf32> {step.param = #step.param<"h.0.attn.c_attn.bias", zeros>},
    %h_0_attn_c_proj_weight: tensor<16x16xf32> {step.param = #step.param<"h.0.attn.c_proj.weight", scaled_normal(0.02, 1)>},
    %h_0_attn_c_proj_bias: tensor<16xf32> {step.param = #step.param<"h.0.attn.c_proj.bias", zeros>},
    %h_0_ln_2_weight: tensor<16xf32> {step.param = #step.param<"h.0.ln_2.weight", ones>},
    %h_0_ln_2_bias: tensor<16xf32> {step.param = #step.param<"h.0.ln_2.bias", zeros>},
    %h_0_mlp_c_fc_weight: tensor<64x16xf32> {step.param = #step.param<"h.0.mlp.c_fc.weight", normal(0.02)>},
    %h_0_mlp_c_fc_bias: tensor<64xf32> {step.param = #step.param<"h.0.mlp.c_fc.bias", zeros>},
    %h_0_mlp_c_proj_weight: tensor<16x64xf32> {step.param = #step.param<"h.0.mlp.c_proj.weight", scaled_normal(0.02, 1)>},
    %h_0_mlp_c_proj_bias: tensor<16xf32> {step.param = #step.param<"h.0.mlp.c_proj.bias", zeros>},
    %ln_f_weight: tensor<16xf32> {step.param = #step.param<"ln_f.weight", ones>},
    %ln_f_bias: tensor<16xf32> {step.param = #step.param<"ln_f.bias", zeros>},
    %tokens: tensor<2x8xi32> {step.input = "tokens"},
    %targets: tensor<2x8xi32> {step.input = "targets"})
    -> tensor<f32> attributes {step.loss} {
  %tok_emb = step.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %pos_emb = step.broadcast %wpe : tensor<8x16xf32> -> tensor<2x8x16xf32>
  %x = step.add %tok_emb, %pos_emb : tensor<2x8x16xf32>
  %h0_ln_1 = step.layer_norm %x, %h_0_ln_1_weight, %h_0_ln_1_bias : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %h0_qkv = step.matmul %h0_ln_1, %h_0_attn_c_attn_weight transpose_b : (tensor<2x8x16xf32>, tensor<48x16xf32>) -> tensor<2x8x48xf32>
  %h0_qkv_bias = step.broadcast %h_0_attn_c_attn_bias : tensor<48xf32> -> tensor<2x8x48xf32>
  %h0_qkv_biased = step.add %h0_qkv, %h0_qkv_bias : tensor<2x8x48xf32>
  %h0_q = step.slice %h0_qkv_biased offsets [0, 0, 0] sizes [2, 8, 16] : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %h0_k = step.slice %h0_qkv_biased offsets [0, 0, 16] sizes [2, 8, 16] : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %h0_v = step.slice %h0_qkv_biased offsets [0, 0, 32] sizes [2, 8, 16] : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %h0_att = step.attention %h0_q, %h0_k, %h0_v heads 2 kv_heads 2 head_dim 8 causal : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %h0_attn_out = step.matmul %h0_att, %h_0_attn_c_proj_weight transpose_b : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %h0_attn_out_bias = step.broadcast %h_0_attn_c_proj_bias : tensor<16xf32> -> tensor<2x8x16xf32>
  %h0_attn_out_biased = step.add %h0_attn_out, %h0_attn_out_bias : tensor<2x8x16xf32>
  %h0_x_attn = step.add %x, %h0_attn_out_biased : tensor<2x8x16xf32>
  %h0_ln_2 = step.layer_norm %h0_x_attn, %h_0_ln_2_weight, %h_0_ln_2_bias : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %h0_fc = step.matmul %h0_ln_2, %h_0_mlp_c_fc_weight transpose_b : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  %h0_fc_bias = step.broadcast %h_0_mlp_c_fc_bias : tensor<64xf32> -> tensor<2x8x64xf32>
  %h0_fc_biased = step.add %h0_fc, %h0_fc_bias : tensor<2x8x64xf32>
  %h0_gelu = step.gelu %h0_fc_biased : tensor<2x8x64xf32>
  %h0_mlp_out = step.matmul %h0_gelu, %h_0_mlp_c_proj_weight transpose_b : (tensor<2x8x64xf32>, tensor<16x64xf32>) -> tensor<2x8x16xf32>
  %h0_mlp_out_bias = step.broadcast %h_0_mlp_c_proj_bias : tensor<16xf32> -> tensor<2x8x16xf32>
  %h0_mlp_out_biased = step.add %h0_mlp_out, %h0_mlp_out_bias : tensor<2x8x16xf32>
  %h0_x_mlp = step.add %h0_x_attn, %h0_mlp_out_biased : tensor<2x8x16xf32>
  %ln_f = step.layer_norm %h0_x_mlp, %ln_f_weight, %ln_f_bias : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %logits = step.matmul %ln_f, %wte transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %loss = step.cross_entropy %logits, %targets : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

