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
