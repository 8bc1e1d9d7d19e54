// RUN: stepc-opt %s | stepc-opt | FileCheck %s

// CHECK-LABEL: func.func @fused
// CHECK: %[[F:.*]]:2 = stepk.fused %arg0, %arg1 : (tensor<8x16xf32>, tensor<128xf32>) -> (tensor<8x16xf32>, tensor<128xf32>) {
// CHECK: stepk.yield
func.func @fused(%x: tensor<8x16xf32>, %y: tensor<128xf32>) -> (tensor<8x16xf32>, tensor<128xf32>) {
  %0:2 = stepk.fused %x, %y : (tensor<8x16xf32>, tensor<128xf32>) -> (tensor<8x16xf32>, tensor<128xf32>) {
  ^bb0(%a: tensor<8x16xf32>, %b: tensor<128xf32>):
    %e = step.exp %a : tensor<8x16xf32>
    %r = step.reshape %e : tensor<8x16xf32> -> tensor<128xf32>
    %s = step.sub %r, %b : tensor<128xf32>
    stepk.yield %e, %s : tensor<8x16xf32>, tensor<128xf32>
  }
  return %0#0, %0#1 : tensor<8x16xf32>, tensor<128xf32>
}

// The kernels of GEMMs and attention round-trip, the epilogue as a keyword.
// CHECK-LABEL: func.func @kernels
// CHECK: stepk.gemm %arg0, %arg1 bias %arg2 epilogue gelu {shared_rhs}
// CHECK: stepk.gemm %arg0, %arg1 {shared_rhs}
// CHECK: %[[O:[a-z_0-9]+]], %[[LSE:[a-z_0-9]+]] = stepk.attention %arg3, %arg4, %arg4 heads 4 kv_heads 2 head_dim 8 causal scale 5.000000e-01
// CHECK: stepk.attention_grad %arg3, %arg3, %arg4, %arg4 saved %[[O]], %[[LSE]] heads 4 kv_heads 2 head_dim 8 causal scale 5.000000e-01
func.func @kernels(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>, %q: tensor<2x8x32xbf16>, %k: tensor<2x8x16xbf16>) -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<2x8x32xf32>) {
  %g, %pre = stepk.gemm %x, %w bias %b epilogue gelu {shared_rhs} : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>)
  %h = stepk.gemm %x, %w epilogue none {shared_rhs} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %o, %lse = stepk.attention %q, %k, %k heads 4 kv_heads 2 head_dim 8 causal scale 0.5 : (tensor<2x8x32xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  %dq, %dk, %dv = stepk.attention_grad %q, %q, %k, %k saved %o, %lse heads 4 kv_heads 2 head_dim 8 causal scale 0.5 : (tensor<2x8x32xbf16>, tensor<2x8x32xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x32xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  return %g, %h, %dq : tensor<8x32xf32>, tensor<8x32xf32>, tensor<2x8x32xf32>
}

// An fp8 GEMM operand packed by stepk.pack_fp8 (bytes and a scale per 1x128
// block: along the last dim, or along the rows, transposed), read by the
// GEMMs with its scales.
// CHECK-LABEL: func.func @packed_fp8
// CHECK: %[[B:.*]], %[[S:.*]] = stepk.pack_fp8 %arg0 : (tensor<256x128xf32>) -> (tensor<256x128xf8E4M3FN>, tensor<1x256xf32>)
// CHECK: %[[BT:.*]], %[[ST:.*]] = stepk.pack_fp8 %arg0 transposed : (tensor<256x128xf32>) -> (tensor<128x256xf8E4M3FN>, tensor<2x128xf32>)
// CHECK: %[[WB:.*]], %[[WS:.*]] = stepk.pack_fp8 %arg2 blocks : (tensor<64x128xf32>) -> (tensor<64x128xf8E4M3FN>, tensor<1x4xf32>)
// CHECK: stepk.gemm %[[B]], %[[WB]] lhs_scales %[[S]] rhs_scales %[[WS]] {fp8 = array<i32: 0, 0, 0>, shared_rhs, transpose_b}
// CHECK: stepk.gemm %[[BT]], %[[BT]] lhs_scales %[[ST]] rhs_scales %[[ST]] {fp8 = array<i32: 0, 0, 1>, shared_rhs, transpose_b}
func.func @packed_fp8(%x: tensor<256x128xf32>, %w: tensor<64x128xbf16>, %wf: tensor<64x128xf32>) -> (tensor<256x64xbf16>, tensor<128x128xf32>) {
  %b, %s = stepk.pack_fp8 %x : (tensor<256x128xf32>) -> (tensor<256x128xf8E4M3FN>, tensor<1x256xf32>)
  %bt, %st = stepk.pack_fp8 %x transposed : (tensor<256x128xf32>) -> (tensor<128x256xf8E4M3FN>, tensor<2x128xf32>)
  %wb, %ws = stepk.pack_fp8 %wf blocks : (tensor<64x128xf32>) -> (tensor<64x128xf8E4M3FN>, tensor<1x4xf32>)
  %y = stepk.gemm %b, %wb lhs_scales %s rhs_scales %ws {fp8 = array<i32: 0, 0, 0>, shared_rhs, transpose_b} : (tensor<256x128xf8E4M3FN>, tensor<64x128xf8E4M3FN>, tensor<1x256xf32>, tensor<1x4xf32>) -> tensor<256x64xbf16>
  %g = stepk.gemm %bt, %bt lhs_scales %st rhs_scales %st {fp8 = array<i32: 0, 0, 1>, shared_rhs, transpose_b} : (tensor<128x256xf8E4M3FN>, tensor<128x256xf8E4M3FN>, tensor<2x128xf32>, tensor<2x128xf32>) -> tensor<128x128xf32>
  return %y, %g : tensor<256x64xbf16>, tensor<128x128xf32>
}
