// Elementwise loops over 65536 elements or more run in chunks of 256, each
// fetching its arrays' chunk 4096 elements ahead (stepc_prefetch_r for what
// the loop reads, _w for what it writes, in place or not); a loop with a
// folded broadcast fetches whole rows that far ahead; smaller loops are
// plain vector loops.
// RUN: stepc --target=cpu %s --emit=source -o - | FileCheck %s

// The bias add and GELU: rows of 8192 (the bias), one row ahead.
// CHECK: // fused: 2 elementwise ops
// CHECK-NEXT: #pragma omp parallel for
// CHECK-NEXT: for (int64_t r = 0; r < 8; ++r) {
// CHECK-NEXT: stepc_prefetch_w(((float *)[[X:b[0-9]+]]), r * 8192 + 8192, (r + 1) * 8192 + 8192, 65536, 4);
// CHECK-NEXT: stepc_prefetch_w(((float *)[[G:b[0-9]+]]), r * 8192 + 8192, (r + 1) * 8192 + 8192, 65536, 4);
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t j = 0; j < 8192; ++j) {
// CHECK-NEXT: const int64_t i = r * 8192 + j;
// The GELU gradient in place over the output gradient, reading the
// pre-activation.
// CHECK: // step.gelu_grad
// CHECK-NEXT: #pragma omp parallel for
// CHECK-NEXT: for (int64_t c = 0; c < 65536; c += 256) {
// CHECK-NEXT: const int64_t e = c + 256 < 65536 ? c + 256 : 65536;
// CHECK-NEXT: stepc_prefetch_w(((float *)[[DY:b[0-9]+]]), c + 4096, e + 4096, 65536, 4);
// CHECK-NEXT: stepc_prefetch_r(((float *)[[X]]), c + 4096, e + 4096, 65536, 4);
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t i = c; i < e; ++i) {
// CHECK-NEXT: ((float *)[[DY]])[i] = stepc_gelu_grad<float>(((float *)[[DY]])[i], ((float *)[[X]])[i], 0);
// The bias's gradient terms for the norm (8192 elements): one plain loop.
// CHECK: #pragma omp parallel for simd
// CHECK-NEXT: for (int64_t i = 0; i < 8192; ++i)
// CHECK-NOT: stepc_prefetch
// CHECK: return 0;
func.func @loss(%w: tensor<16x8192xf32> {step.param = #step.param<"w", normal(0.02)>},
                %b: tensor<8192xf32> {step.param = #step.param<"b", zeros>},
                %tokens: tensor<2x4xi32> {step.input = "tokens"},
                %targets: tensor<2x4xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %w, %tokens : (tensor<16x8192xf32>, tensor<2x4xi32>) -> tensor<2x4x8192xf32>
  %bb = step.broadcast %b : tensor<8192xf32> -> tensor<2x4x8192xf32>
  %y = step.add %x, %bb : tensor<2x4x8192xf32>
  %g = step.gelu %y : tensor<2x4x8192xf32>
  %logits = step.matmul %g, %w transpose_b : (tensor<2x4x8192xf32>, tensor<16x8192xf32>) -> tensor<2x4x16xf32>
  %l = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
