// step-mixed-precision: GEMM operands narrowed once per value (the weight's
// copy is shared by the forward and both backward GEMMs; a reshaped value
// shares its source's copy), results widened at once; the loss, norms and
// AdamW stay f32.
// RUN: stepc-opt %s --step-autodiff --step-optimizer --step-mixed-precision | FileCheck %s
// RUN: not stepc-opt %s --step-mixed-precision 2>&1 | FileCheck %s --check-prefix=ORDER

// CHECK-LABEL: func.func @loss_train_step
// CHECK: %[[XB:.*]] = step.convert %{{.*}} {{.*}}: tensor<2x4x4xf32> -> tensor<2x4x4xbf16>
// CHECK: %[[WB:.*]] = step.convert %arg0 {{.*}}: tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK: %[[YB:.*]] = step.matmul %[[XB]], %[[WB]] transpose_b {{.*}}: (tensor<2x4x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4x4xbf16>
// CHECK-NEXT: %{{.*}} = step.convert %[[YB]] {{.*}}: tensor<2x4x4xbf16> -> tensor<2x4x4xf32>
// CHECK: step.cross_entropy %{{.*}} {{.*}}: (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
// The backward GEMMs reuse the forward's copy of w.
// CHECK: step.matmul %[[GB:.*]], %[[WB]] {{.*}}: (tensor<2x4x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4x4xbf16>
// CHECK-NEXT: step.convert {{.*}}: tensor<2x4x4xbf16> -> tensor<2x4x4xf32>
// The weight gradient reads the same two copies, flattened: no second
// rounding of x or of the gradient, and no f32 reshape left.
// CHECK-NEXT: %[[GR:.*]] = step.reshape %[[GB]] {{.*}}: tensor<2x4x4xbf16> -> tensor<8x4xbf16>
// CHECK-NEXT: %[[XR:.*]] = step.reshape %[[XB]] {{.*}}: tensor<2x4x4xbf16> -> tensor<8x4xbf16>
// CHECK-NEXT: step.matmul %[[GR]], %[[XR]] transpose_a {{.*}}-> tensor<4x4xbf16>
// CHECK: step.adamw %arg0, %{{[0-9]+}}, {{.*}} {{.*}}: (tensor<4x4xf32>, tensor<4x4xf32>,
// CHECK-NOT: step.adamw {{.*}}bf16
// ORDER: error: step-mixed-precision needs a training step
func.func @loss(%w: tensor<4x4xf32> {step.param = #step.param<"w", normal(0.02)>},
                %emb: tensor<8x4xf32> {step.param = #step.param<"emb", normal(0.02)>},
                %tokens: tensor<2x4xi32> {step.input = "tokens"},
                %targets: tensor<2x4xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %emb, %tokens : (tensor<8x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
  %y = step.matmul %x, %w transpose_b : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %l = step.cross_entropy %y, %targets : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
