// RUN: stepc-opt %s -split-input-file -step-fold-widening-gemms | FileCheck %s

// A bf16 GEMM only widened writes f32: one stepk.gemm replaces the GEMM
// and both converts. A GEMM another GEMM reads in bf16 stays; an f32 GEMM
// has nothing to fold.
// CHECK-LABEL: func.func @widened
// CHECK: %[[Y:.*]] = stepk.gemm %arg0, %arg1 {shared_rhs, transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xf32>
// CHECK-NOT: step.convert %[[Y]]
// CHECK: %[[Z:.*]] = step.batch_matmul %arg2, %arg3 : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
// CHECK: step.batch_matmul %[[Z]], %arg3
// CHECK: step.matmul %arg4, %arg5 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK: return %[[Y]], %[[Y]]
func.func @widened(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %a: tensor<2x8x8xbf16>, %b: tensor<2x8x8xbf16>, %f: tensor<8x16xf32>, %g: tensor<16x4xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<2x8x8xf32>, tensor<2x8x8xbf16>, tensor<8x4xf32>) attributes {step.train_step} {
  %y = step.matmul %x, %w transpose_b : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %y1 = step.convert %y : tensor<8x32xbf16> -> tensor<8x32xf32>
  %y2 = step.convert %y : tensor<8x32xbf16> -> tensor<8x32xf32>
  %z = step.batch_matmul %a, %b : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %z1 = step.convert %z : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %zz = step.batch_matmul %z, %b : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %h = step.matmul %f, %g : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %y1, %y2, %z1, %zz, %h : tensor<8x32xf32>, tensor<8x32xf32>, tensor<2x8x8xf32>, tensor<2x8x8xbf16>, tensor<8x4xf32>
}
