// The CPU emitter: composite ops call library kernels at planned arena
// offsets, elementwise ops become loops, reshapes are free, AdamW updates the
// parameter and moment arguments in place, ids are checked with the op's
// location.
// RUN: stepc --target=cpu %s --emit=source -o - | FileCheck %s

// CHECK: #include "stepc_abi.h"
// The argument table is one string (kind, dtype, rank, shape table, init,
// the bits of init_std, id bound, global dim 0, tp parts, dim, segments,
// segment table, split axis (-1: tp); then the name), decoded on the first
// module-info call.
// CHECK: static const char kArgsText[] =
// CHECK-NEXT: "0 0 2 0 2 0x3f947ae147ae147b 0 -9223372036854775808 16 0 0 0 -1 -1 " "w" "\0"
// CHECK-NEXT: "0 0 1 1 0 0x0 0 -9223372036854775808 4 0 0 0 -1 -1 " "b" "\0"
// CHECK-NEXT: "1 0 2 0 0 0x0 0 -9223372036854775808 16 0 0 0 -1 -1 " "exp_avg.w" "\0"
// CHECK-NEXT: "1 0 1 1 0 0x0 0 -9223372036854775808 4 0 0 0 -1 -1 " "exp_avg.b" "\0"
// CHECK-NEXT: "2 0 2 0 0 0x0 0 -9223372036854775808 16 0 0 0 -1 -1 " "exp_avg_sq.w" "\0"
// CHECK-NEXT: "2 0 1 1 0 0x0 0 -9223372036854775808 4 0 0 0 -1 -1 " "exp_avg_sq.b" "\0"
// Equal shapes share a table; the ids' bound is the vocabulary (16).
// CHECK-NEXT: "3 3 2 2 0 0x0 16 -9223372036854775808 2 0 0 0 -1 -1 " "tokens" "\0"
// CHECK-NEXT: "3 3 2 2 0 0x0 16 -9223372036854775808 2 0 0 0 -1 -1 " "targets" "\0"
// CHECK-NEXT: "4 0 0 3 0 0x0 0 -9223372036854775808 1 0 0 0 -1 -1 " "lr" "\0"
// CHECK-NEXT: "5 0 0 3 0 0x0 0 -9223372036854775808 1 0 0 0 -1 -1 " "step" "\0"
// CHECK: static stepc_arg_info kArgs[10];
// CHECK: stepc_module_info_v12(void) {
// CHECK-NEXT: static const bool decoded = (stepc_decode_args(), true);
// CHECK: extern "C" int stepc_train_step_v12(
// CHECK: float *a0 = (float *)args[0];
// CHECK: int32_t *a6 = (int32_t *)args[6];
// CHECK: char *b0 = arena + {{[0-9]+}};
// CHECK: // step.embedding {{.*}}stepc-emit-source.mlir:[[@LINE+42]]:
// CHECK-NEXT: if (int64_t bad = stepc_cpu_embedding(a0, a6, 8, 16, 4, ((float *)b0)))
// CHECK-NEXT: return stepc_fail(error, error_len, "{{.*}}stepc-emit-source.mlir:[[@LINE+40]]:{{[0-9]+}}: 'step.embedding' id", a6[bad - 1], bad - 1, 16);
// The bias add and GELU are one loop; the add's result is kept (GELU's
// backward reads it), written over the embedding's dying buffer. The
// bias's broadcast is not materialised: the loop runs over rows of 4 and
// reads the bias at j.
// CHECK-NOT: stepc_cpu_broadcast(a1,
// CHECK: // fused: 2 elementwise ops from
// CHECK-NEXT: for (int64_t r = 0; r < 8; ++r) {
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT: for (int64_t j = 0; j < 4; ++j) {
// CHECK-NEXT: const int64_t i = r * 4 + j;
// CHECK-NEXT: const float v0 = stepc_add<float>(((float *)b0)[i], a1[j]);  // step.add
// CHECK-NEXT: const float v1 = stepc_gelu<float>(v0, 0);  // step.gelu
// CHECK-NEXT: ((float *)b0)[i] = v0;
// CHECK-NEXT: ((float *)b{{[0-9]+}})[i] = v1;
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK: // stepk.gemm
// CHECK-NEXT: stepc_cpu_matmul(((float *)b{{[0-9]+}}), a0, ((float *)b{{[0-9]+}}), 2, 4, 16, 4, 0, 1, 1);
// The loss and its gradient in one kernel, checking the targets.
// CHECK: // step.cross_entropy
// CHECK-NEXT: if (int64_t bad = stepc_cpu_cross_entropy_fused(((float *)b{{[0-9]+}}), a7, ((float *)b{{[0-9]+}}), 8, 16, ((float *)b{{[0-9]+}}), ((float *)b{{[0-9]+}})))
// CHECK-NEXT: return stepc_fail(error, error_len, "{{.*}}stepc-emit-source.mlir:{{[0-9]+}}:{{[0-9]+}}: 'step.cross_entropy' target", a7[bad - 1], bad - 1, 16);
// CHECK-NOT: stepc_cpu_cross_entropy_grad
// Backward of the head: dX = dC @ W, dW = dCᵀ X on the flattened batch.
// CHECK: stepc_cpu_matmul(((float *)b{{[0-9]+}}), a0, ((float *)b{{[0-9]+}}), 2, 4, 4, 16, 0, 0, 1);
// CHECK: stepc_cpu_matmul(((float *)b{{[0-9]+}}), ((float *)b{{[0-9]+}}), ((float *)b{{[0-9]+}}), 1, 16, 4, 8, 1, 0, 1);
// CHECK: // step.gelu_grad
// CHECK: // step.reduce_sum
// CHECK: // step.embedding_grad
// In place: the parameter and moment arguments, lr and step arguments.
// CHECK: stepc_cpu_adamw(a0, ((float *)b{{[0-9]+}}), a2, a4, 64, a8, a9, ((float *)b{{[0-9]+}}), 9.000000e-01, 9.500000e-01, 1.000000e-08, 1.000000e-01);
// CHECK: stepc_cpu_adamw(a1, ((float *)b{{[0-9]+}}), a3, a5, 4, a8, a9, ((float *)b{{[0-9]+}}), 9.000000e-01, 9.500000e-01, 1.000000e-08, 0.000000e+00);
// CHECK: *loss = ((float *)b{{[0-9]+}})[0];
// CHECK-NEXT: *grad_norm = ((float *)b{{[0-9]+}})[0];
// CHECK-NEXT: return 0;
func.func @loss(%w: tensor<16x4xf32> {step.param = #step.param<"w", normal(0.02)>},
                %b: tensor<4xf32> {step.param = #step.param<"b", zeros>},
                %tokens: tensor<2x4xi32> {step.input = "tokens"},
                %targets: tensor<2x4xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %w, %tokens : (tensor<16x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
  %bb = step.broadcast %b : tensor<4xf32> -> tensor<2x4x4xf32>
  %y = step.add %x, %bb : tensor<2x4x4xf32>
  %g = step.gelu %y : tensor<2x4x4xf32>
  %logits = step.matmul %g, %w transpose_b : (tensor<2x4x4xf32>, tensor<16x4xf32>) -> tensor<2x4x16xf32>
  %l = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
