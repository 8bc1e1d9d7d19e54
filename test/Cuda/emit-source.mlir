// The CUDA emitter on a small model: library kernels with the op's location,
// the bias riding in the GEMM epilogue (no broadcast, no add kernel), one
// generated kernel per elementwise signature, ids checked on the device at
// named sites, a multi-tensor AdamW per hyperparameter set, the arena grown
// past the plan by the status word, cuBLASLt's 32 MiB workspace and the
// scratch; the loss, norm and status copied back at the end.
// RUN: stepc %s --emit=source -o - | FileCheck %s
// RUN: stepc %s --emit=source --precision=bf16 -o - | FileCheck %s --check-prefix=BF16

// CHECK: #include "cuda_kernels.h"
// CHECK: #define STEPC_TARGET "cuda"
// GELU and the residual add: one kernel, GELU's value never stored; 8
// elements a thread with 16-byte accesses when aligned, then the rest.
// CHECK: // fused gelu add
// CHECK-NEXT: __global__ void stepc_elementwise{{[0-9]+}}(const float *p0, const float *p1, float *o0, int64_t n) {
// CHECK-NEXT: int64_t first = 0;
// CHECK-NEXT: if ((((uintptr_t)p0 | (uintptr_t)p1 | (uintptr_t)o0) & 15) == 0) {
// CHECK-NEXT: first = n / 8 * 8;
// CHECK-NEXT: for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < n / 8;
// CHECK-NEXT: v += (int64_t)gridDim.x * blockDim.x) {
// CHECK-NEXT: float l0[8];
// CHECK-NEXT: stepc::cuda::LoadEight(p0 + 8 * v, l0);
// CHECK-NEXT: float l1[8];
// CHECK-NEXT: stepc::cuda::LoadEight(p1 + 8 * v, l1);
// CHECK-NEXT: float s0[8];
// CHECK-NEXT: for (int j = 0; j < 8; ++j) {
// CHECK-NEXT: const float v0 = stepc_gelu<float>(l0[j], 0);  // step.gelu
// CHECK-NEXT: const float v1 = stepc_add<float>(v0, l1[j]);  // step.add
// CHECK-NEXT: s0[j] = v1;
// CHECK-NEXT: }
// CHECK-NEXT: stepc::cuda::StoreEight(o0 + 8 * v, s0);
// CHECK: for (int64_t i = first + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
// CHECK-NEXT: i += (int64_t)gridDim.x * blockDim.x) {
// CHECK-NEXT: const float v0 = stepc_gelu<float>(p0[i], 0);  // step.gelu
// CHECK-NEXT: const float v1 = stepc_add<float>(v0, p1[i]);  // step.add
// CHECK-NEXT: o0[i] = v1;
// An unfused op: a kernel of its own.
// CHECK: __global__ void stepc_elementwise{{[0-9]+}}(const float *p0, const float *p1, float *o0, int64_t n) {
// CHECK: for (int64_t i = first + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
// CHECK-NEXT: i += (int64_t)gridDim.x * blockDim.x) {
// CHECK-NEXT: const float x0 = p0[i];
// CHECK-NEXT: const float x1 = p1[i];
// CHECK-NEXT: o0[i] = stepc_gelu_grad<float>(x0, x1, 0);
// The forward-only entry is emitted first: its sites come first, then the
// sampling entry's.
// CHECK: static const char *const kCheckSites[] = {
// CHECK-NEXT: "{{.*}}emit-source.mlir:136:8: 'step.embedding' id",
// CHECK-NEXT: "{{.*}}emit-source.mlir:145:8: 'step.cross_entropy' target",
// CHECK-NEXT: "{{.*}}emit-source.mlir:136:8: 'step.embedding' id",
// CHECK-NEXT: "{{.*}}emit-source.mlir:145:8: 'step.cross_entropy' target",
// CHECK-NEXT: "{{.*}}emit-source.mlir:136:8: 'step.embedding' id",
// CHECK-NEXT: "{{.*}}emit-source.mlir:145:8: 'step.cross_entropy' target",
// CHECK-NEXT: "{{.*}}emit-source.mlir:136:8: 'step.embedding_grad' id",
// CHECK: STEPC_ABI_VERSION, STEPC_TARGET, 19, kArgs, 33557248,
// CHECK: 7, kCheckSites, "fp32", {{[0-9]+}}, 3, kLogitsShape, 0, 0, 1, "", "", 1, 0, {{[1-9][0-9]*}}, 0, 0};
// CHECK: extern "C" int stepc_train_step_v12(
// CHECK: stepc_cuda_ctx ctx_ = {stream, arena + 2304, (int32_t *)(arena + 2048), error, error_len};
// CHECK: char *scratch = arena + 33556736;
// (no saved region: what a backward reads of its forward is in the plan)
// CHECK: STEPC_CUDA(cudaMemsetAsync(ctx->status, 0, 4 * sizeof(int32_t), stream), "step start");
// CHECK: // step.embedding
// CHECK-NEXT: STEPC_TRY(stepc_cuda_embedding(ctx, a0, a15, 8, 16, 4, ((float *)b{{[0-9]+}}), 5), "{{.*}}emit-source.mlir:136:8: 'step.embedding'");
// The projection: GEMM + bias epilogue (one stepk.gemm); its broadcast and
// add are gone from the IR.
// CHECK: // stepk.gemm
// CHECK-NEXT: STEPC_TRY(stepc_cuda_matmul(ctx, ((float *)b{{[0-9]+}}), a1, ((float *)b{{[0-9]+}}), 2, 4, 4, 4, 0, 1, 1, STEPC_CUDA_F32, STEPC_CUDA_F32, a2, STEPC_EPILOGUE_NONE, 0),
// CHECK-NOT: // step.broadcast
// CHECK-NOT: // step.add
// (the epilogue computes them)
// The forward returns its log-sum-exp (a buffer of the plan); the backward
// reads it and the forward's output instead of recomputing them.
// CHECK: // stepk.attention {{.*}}emit-source.mlir:141:8
// CHECK-NEXT: stepc_cuda_attention(ctx, ((float *)b{{[0-9]+}}), ((float *)b{{[0-9]+}}), ((float *)b{{[0-9]+}}), STEPC_CUDA_F32, 2, 4, 4, 2, 2, 2, 1, 7.071068e-01, ((float *)b[[OUT:[0-9]+]]), STEPC_CUDA_F32, ((float *)b[[LSE:[0-9]+]]))
// CHECK: // fused: 2 elementwise ops from {{.*}}emit-source.mlir:[[GELU:[0-9]+]]:8
// CHECK-NEXT: STEPC_LAUNCH(stepc_blocks(4), 256, 0, stream, stepc_elementwise{{[0-9]+}})(
// CHECK-NEXT: STEPC_LAUNCHED("{{.*}}:[[GELU]]:8: 'step.gelu'");
// The loss and its gradient: one kernel, one check site.
// CHECK: // step.cross_entropy
// CHECK-NEXT: STEPC_TRY(stepc_cuda_cross_entropy_fused(ctx, ((float *)b{{[0-9]+}}), a16, ((float *)b{{[0-9]+}}), 8, 16, (float *)scratch, ((float *)b{{[0-9]+}}), ((float *)b{{[0-9]+}}), 6),
// CHECK-NOT: stepc_cuda_cross_entropy_grad(
// CHECK: stepc_cuda_attention_grad(ctx, {{.*}}, STEPC_CUDA_F32, 2, 4, 4, 2, 2, 2, 1, 7.071068e-01, scratch, ((float *)b[[OUT]]), STEPC_CUDA_F32, ((float *)b[[LSE]]),
// CHECK: stepc_cuda_layer_norm_grad_add(ctx, {{.*}}, 8, 4, 1.000000e-05, (float *)scratch,
// CHECK: stepc_cuda_embedding_grad(ctx, {{.*}}, a15, 8, 16, 4, ((float *)b{{[0-9]+}}), 7)
// Decayed matrices in one launch, undecayed vectors in another.
// CHECK: // multi-tensor AdamW over 2 tensors
// CHECK-NEXT: const stepc_adamw_tensor [[T:adamw[0-9]+]][] = {
// CHECK-NEXT: {a0, ((float *)b{{[0-9]+}}), a5, a10, 64},
// CHECK-NEXT: {a1, ((float *)b{{[0-9]+}}), a6, a11, 16},
// CHECK: stepc_cuda_adamw(ctx, [[T]], 2, a17, a18, {{.*}}, 9.000000e-01, 9.500000e-01, 1.000000e-08, 1.000000e-01)
// CHECK: // multi-tensor AdamW over 3 tensors
// CHECK: stepc_cuda_adamw(ctx, adamw{{[0-9]+}}, 3, a17, a18, {{.*}}, 0.000000e+00)
// CHECK: cudaMemcpyAsync(loss,
// CHECK: cudaMemcpyAsync(grad_norm,
// CHECK: cudaMemcpyAsync(device->host_status, ctx->status, 4 * sizeof(int32_t)
// The forward-only entry: the loss, no gradient, no AdamW, no norm.
// CHECK: extern "C" int stepc_eval_step_v12(
// CHECK: STEPC_TRY(stepc_cuda_embedding(ctx, a0, a15, 8, 16, 4, ((float *)b{{[0-9]+}}), 1),
// CHECK: STEPC_TRY(stepc_cuda_cross_entropy(ctx, {{.*}}, 2),
// CHECK-NOT: stepc_cuda_adamw
// CHECK-NOT: grad_norm
// CHECK: cudaMemcpyAsync(loss,
// CHECK: }  // namespace stepc_eval
// The sampling entry: the same forward on one row of 4 tokens.
// CHECK: extern "C" int stepc_sample_step_v12(
// CHECK: STEPC_TRY(stepc_cuda_embedding(ctx, a0, a15, 4, 16, 4, ((float *)b{{[0-9]+}}), 3),
// CHECK: STEPC_TRY(stepc_cuda_cross_entropy(ctx, {{.*}}, 4),
// CHECK-NOT: stepc_cuda_adamw
// CHECK: }  // namespace stepc_sample

// bf16: the weights' bf16 copies in one multi-tensor launch (no convert
// kernel of their own); the GEMM reads bf16 and, since its biased sum is
// only rounded for the attention, writes that bf16 copy through the bias
// epilogue (its widening convert, the bias broadcast, the add and the
// narrowing convert are all gone from the IR), which the attention reads.
// BF16: "bf16", {{[0-9]+}}, {{[0-9]+}}, {{.*}}};
// BF16: // bf16 copies of 2 parameters
// BF16: STEPC_TRY(stepc_cuda_bf16_copies(ctx, copies0, 2),
// BF16: // stepk.gemm
// BF16-NEXT: STEPC_TRY(stepc_cuda_matmul(ctx, ((__nv_bfloat16 *)b{{[0-9]+}}), ((__nv_bfloat16 *)b{{[0-9]+}}), ((__nv_bfloat16 *)b[[Y:[0-9]+]]), 2, 4, 4, 4, 0, 1, 1, STEPC_CUDA_BF16, STEPC_CUDA_BF16, a2, STEPC_EPILOGUE_NONE, 0),
// BF16-NEXT: // stepk.attention {{.*}}emit-source.mlir:141:8
// (the attention's widening convert is its kernel's too)
// BF16-NEXT: stepc_cuda_attention(ctx, ((__nv_bfloat16 *)b[[Y]]), ((__nv_bfloat16 *)b[[Y]]), ((__nv_bfloat16 *)b[[Y]]), STEPC_CUDA_BF16, 2, 4, 4, 2, 2, 2, 1, 7.071068e-01, ((float *)b{{[0-9]+}}), STEPC_CUDA_F32, ((float *)b{{[0-9]+}}))
// Under bf16 the classifier's GEMM writes bf16 logits, read as they are,
// and the gradient is written bf16 for the GEMMs after it.
// BF16: 2, 4, 16, 4, 0, 1, 1, STEPC_CUDA_BF16, STEPC_CUDA_BF16, 0, STEPC_EPILOGUE_NONE, 0), "{{.*}}emit-source.mlir:144:13: 'stepk.gemm'");
// BF16: stepc_cuda_cross_entropy_fused_of_bf16_bf16(ctx, ((__nv_bfloat16 *)b{{[0-9]+}}), a16,
// BF16: stepc_cuda_attention_grad(ctx,
// BF16-SAME: STEPC_CUDA_BF16,
func.func @loss(%wte: tensor<16x4xf32> {step.param = #step.param<"wte", normal(0.02)>},
                %w: tensor<4x4xf32> {step.param = #step.param<"w", normal(0.02)>},
                %b: tensor<4xf32> {step.param = #step.param<"b", zeros>},
                %g: tensor<4xf32> {step.param = #step.param<"ln.w", ones>},
                %beta: tensor<4xf32> {step.param = #step.param<"ln.b", zeros>},
                %tokens: tensor<2x4xi32> {step.input = "tokens"},
                %targets: tensor<2x4xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %wte, %tokens : (tensor<16x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
  %h = step.layer_norm %x, %g, %beta : (tensor<2x4x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  %p = step.matmul %h, %w transpose_b : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %bb = step.broadcast %b : tensor<4xf32> -> tensor<2x4x4xf32>
  %y = step.add %p, %bb : tensor<2x4x4xf32>
  %a = step.attention %y, %y, %y heads 2 kv_heads 2 head_dim 2 causal : (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %z = step.gelu %a : tensor<2x4x4xf32>
  %r = step.add %z, %x : tensor<2x4x4xf32>
  %logits = step.matmul %r, %wte transpose_b : (tensor<2x4x4xf32>, tensor<16x4xf32>) -> tensor<2x4x16xf32>
  %l = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
