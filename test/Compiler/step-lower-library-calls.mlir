// RUN: stepc-opt %s -split-input-file -step-lower-library-calls | FileCheck %s --check-prefixes=CHECK,CPU
// RUN: stepc-opt %s -split-input-file -step-lower-library-calls=target=cuda | FileCheck %s --check-prefixes=CHECK,CUDA

// A norm and its gradient: (rows, d, eps), and on CUDA the gradient's
// scratch (PlanNormGrad: the statistics and the column partial sums).
// CHECK-LABEL: func.func @layer_norm
// CHECK: %[[Y:.*]] = stepk.call "layer_norm"(%arg0, %arg1, %arg2) {scalars = [16, 32, 1.000000e-05]}
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: step.layer_norm
// CHECK-NEXT: stepk.yield
// CPU: stepk.call "layer_norm_grad"(%arg3, %arg0, %arg1) {scalars = [16, 32, 1.000000e-05]}
// CUDA: stepk.call "layer_norm_grad"(%arg3, %arg0, %arg1) {scalars = [16, 32, 1.000000e-05], scratch_bytes = {{[0-9]+}} : i64}
func.func @layer_norm(%x: tensor<16x32xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>, %dy: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>) attributes {step.train_step} {
  %y = step.layer_norm %x, %w, %b : (tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %dx, %dw, %db = step.layer_norm_grad %dy, %x, %w : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<32xf32>) -> (tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>)
  return %y, %dx, %dw, %db : tensor<16x32xf32>, tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>
}

// -----

// A softmax along the middle dim: (outer, length, inner).
// CHECK-LABEL: func.func @softmax
// CHECK: stepk.call "softmax"(%arg0) {scalars = [2, 8, 4]}
func.func @softmax(%x: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> attributes {step.train_step} {
  %y = step.softmax %x dim 1 : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %y : tensor<2x8x4xf32>
}

// -----

// Must not fire: ops outside the table, and functions that are not a step.
// CHECK-LABEL: func.func @not_in_table
// CHECK-NOT: stepk.call
// CHECK-LABEL: func.func @not_a_step
// CHECK-NOT: stepk.call
func.func @not_in_table(%x: tensor<16xf32>) -> tensor<8x16xf32> attributes {step.train_step} {
  %b = step.broadcast %x : tensor<16xf32> -> tensor<8x16xf32>
  return %b : tensor<8x16xf32>
}
func.func @not_a_step(%x: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  %y = step.softmax %x dim 1 : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %y : tensor<2x8x4xf32>
}

// -----

// Kernels that check ids carry what they check: the embedding its ids
// against the table's rows, the cross-entropy its targets against the
// classes (on CUDA also its scratch, one float per row).
// CHECK-LABEL: func.func @ids
// CHECK: stepk.call "embedding"(%arg0, %arg1) {id_bound = 16 : i64, id_check = "id", id_operand = 1 : i64, scalars = [8, 16, 4]}
// CPU: stepk.call "cross_entropy"(%{{.*}}, %arg2) {id_bound = 16 : i64, id_check = "target", id_operand = 1 : i64, scalars = [8, 16]}
// CUDA: stepk.call "cross_entropy"(%{{.*}}, %arg2) {id_bound = 16 : i64, id_check = "target", id_operand = 1 : i64, scalars = [8, 16], scratch_bytes = 32 : i64}
func.func @ids(%wte: tensor<16x4xf32>, %tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {step.train_step} {
  %x = step.embedding %wte, %tokens : (tensor<16x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
  %logits = step.matmul %x, %wte transpose_b : (tensor<2x4x4xf32>, tensor<16x4xf32>) -> tensor<2x4x16xf32>
  %loss = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Static arrays are scalars too: a reduction's input shape and mask of
// reduced dims, and a transpose's permutation (on CUDA the reduction also
// takes scratch for its partial sums).
// CHECK-LABEL: func.func @arrays
// CPU: stepk.call "reduce"(%arg0) {scalars = [array<i64: 2, 8, 4>, 3, array<i32: 1, 0, 1>, 0]}
// CUDA: stepk.call "reduce"(%arg0) {scalars = [array<i64: 2, 8, 4>, 3, array<i32: 1, 0, 1>, 0], scratch_bytes = {{[0-9]+}} : i64}
// CHECK: stepk.call "transpose"(%arg0) {scalars = [array<i64: 2, 8, 4>, 3, array<i64: 2, 0, 1>]}
func.func @arrays(%x: tensor<2x8x4xf32>) -> (tensor<8xf32>, tensor<4x2x8xf32>) attributes {step.train_step} {
  %s = step.reduce_sum %x dims [0, 2] : (tensor<2x8x4xf32>) -> tensor<8xf32>
  %t = step.transpose %x [2, 0, 1] : (tensor<2x8x4xf32>) -> tensor<4x2x8xf32>
  return %s, %t : tensor<8xf32>, tensor<4x2x8xf32>
}
