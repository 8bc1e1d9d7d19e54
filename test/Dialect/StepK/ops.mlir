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
