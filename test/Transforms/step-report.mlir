// RUN: stepc-opt %s -split-input-file -step-report -o %t.discard | FileCheck %s
// With -split-input-file each split rewrites the file: it holds the last.
// RUN: stepc-opt %s -split-input-file -step-report="output=%t.json" -o %t.discard && FileCheck %s --check-prefix=FILE < %t.json
// RUN: stepc-opt %s -split-input-file -step-report -o - | FileCheck %s --check-prefix=IR

// Hand count. Parameters: wte 32x16 (512), w 48x16 (768, via a transpose),
// b 48, pos 8x16 (128): 1456 in all, 5824 bytes; matmul params are wte
// (tied head), w: 1280.
// Forward FLOPs: projection 2·(2·8)·48·16 = 24576; attention with B=2,
// heads=4, T=8, Dh=4: QKᵀ 2·8·8·8·4 = 4096 and AV 4096; head
// 2·16·32·16 = 16384: 49152. Model FLOPs are three times that: 147456.
// CHECK: "function": "loss"
// CHECK-NEXT: "params": 1456
// CHECK-NEXT: "param_tensors": 4
// CHECK-NEXT: "param_bytes": 5824
// CHECK-NEXT: "matmul_params": 1280
// CHECK-NEXT: "forward_flops": 49152
// CHECK-NEXT: "model_flops_per_step": 147456
// CHECK-NEXT: "tokens_per_step": 16
// CHECK-NEXT: "model_flops_per_token": 9216
// The IR is unchanged.
// IR: step.attention
func.func @loss(%wte: tensor<32x16xf32> {step.param = #step.param<"wte", normal(0.02)>},
                %w: tensor<16x48xf32> {step.param = #step.param<"w", normal(0.02)>},
                %b: tensor<48xf32> {step.param = #step.param<"b", zeros>},
                %pos: tensor<8x16xf32> {step.param = #step.param<"pos", normal(0.02)>},
                %tokens: tensor<2x8xi32> {step.input = "tokens"},
                %targets: tensor<2x8xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %p = step.broadcast %pos : tensor<8x16xf32> -> tensor<2x8x16xf32>
  %h = step.add %x, %p : tensor<2x8x16xf32>
  %wt = step.transpose %w [1, 0] : (tensor<16x48xf32>) -> tensor<48x16xf32>
  %qkv = step.matmul %h, %wt transpose_b : (tensor<2x8x16xf32>, tensor<48x16xf32>) -> tensor<2x8x48xf32>
  %bb = step.broadcast %b : tensor<48xf32> -> tensor<2x8x48xf32>
  %qkvb = step.add %qkv, %bb : tensor<2x8x48xf32>
  %q = step.slice %qkvb offsets [0, 0, 0] sizes [2, 8, 16] : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %k = step.slice %qkvb offsets [0, 0, 16] sizes [2, 8, 16] : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %v = step.slice %qkvb offsets [0, 0, 32] sizes [2, 8, 16] : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %a = step.attention %q, %k, %v heads 4 kv_heads 4 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %logits = step.matmul %a, %wte transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %loss = step.cross_entropy %logits, %targets : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A frozen weight gets no gradient: its product's backward is the other
// operand's gradient alone. Forward 2·4·16·8 = 1024, backward 1024 (not
// 2048): 2048 model FLOPs.
// CHECK: "function": "frozen"
// CHECK-NEXT: "params": 192
// CHECK: "forward_flops": 1024
// CHECK-NEXT: "model_flops_per_step": 2048
func.func @frozen(%w: tensor<16x8xf32> {step.param = #step.param<"w", normal(0.02), frozen>},
                  %v: tensor<4x16xf32> {step.param = #step.param<"v", normal(0.02)>},
                  %x: tensor<4x8xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %h = step.matmul %x, %w transpose_b : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %y = step.mul %h, %v : tensor<4x16xf32>
  %l = step.reduce_sum %y dims [0, 1] : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Grouped-query attention counts query heads: B=1, heads=4 (kv_heads=1),
// T=4, Dh=2: QKᵀ 2·4·4·4·2 = 256, AV 256, backward 1024: 1536. A
// batch_matmul [3, 2x5]·[3, 5x4] is 2·3·2·4·5 = 240 forward, 720 in all.
// The f64 parameter is 32 values of 8 bytes.
// CHECK: "function": "gqa"
// FILE: "function": "gqa"
// FILE-NEXT: "params": 32
// CHECK: "param_bytes": 256
// CHECK: "matmul_params": 0
// CHECK: "forward_flops": 752
// CHECK-NEXT: "model_flops_per_step": 2256
// CHECK-NEXT: "tokens_per_step": 0
// CHECK-NOT: model_flops_per_token
func.func @gqa(%q: tensor<1x4x8xf64> {step.param = #step.param<"q", normal(1.0)>},
               %kv: tensor<1x4x2xf32> {step.input = "kv"},
               %a: tensor<3x2x5xf32> {step.input = "a"},
               %b: tensor<3x5x4xf32> {step.input = "b"}) -> tensor<f32> attributes {step.loss} {
  %qf = step.convert %q : tensor<1x4x8xf64> -> tensor<1x4x8xf32>
  %o = step.attention %qf, %kv, %kv heads 4 kv_heads 1 head_dim 2 causal : (tensor<1x4x8xf32>, tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x8xf32>
  %m = step.batch_matmul %a, %b : (tensor<3x2x5xf32>, tensor<3x5x4xf32>) -> tensor<3x2x4xf32>
  %s = step.reduce_sum %o dims [0, 1, 2] : (tensor<1x4x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
