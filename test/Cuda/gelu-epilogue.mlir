// A tanh-GELU MLP on the CUDA target: the forward GEMM carries bias and GELU
// in cuBLASLt's GELU_AUX_BIAS epilogue (the pre-activation kept in aux for
// the backward), the backward GEMM into gelu_grad its DGELU epilogue reading
// that aux; neither the add, the broadcast, the GELU nor gelu_grad is a
// kernel of its own. An exact (erf) GELU is not fused (cuBLASLt's is tanh).
// RUN: stepc %s --emit=source -o - | FileCheck %s
// RUN: sed 's/gelu %h approximate "tanh"/gelu %h/' %s > %t.exact.mlir
// RUN: stepc %t.exact.mlir --emit=source -o - | FileCheck %s --check-prefix=EXACT

// CHECK: // stepk.gemm {{.*}}gelu-epilogue.mlir:[[@LINE+16]]:
// CHECK-NEXT: STEPC_TRY(stepc_cuda_matmul(ctx, {{.*}}, a1, ((float *)b[[GELU:[0-9]+]]), 2, 4, 8, 4, 0, 1, 1, STEPC_CUDA_F32, STEPC_CUDA_F32, a2, STEPC_EPILOGUE_GELU, ((float *)b[[PRE:[0-9]+]])),
// CHECK-NOT: // step.gelu
// CHECK: STEPC_TRY(stepc_cuda_matmul(ctx, {{.*}}, a3, ((float *)b{{[0-9]+}}), 2, 4, 8, 4, 0, 0, 1, STEPC_CUDA_F32, STEPC_CUDA_F32, 0, STEPC_EPILOGUE_DGELU, ((float *)b[[PRE]])),
// CHECK-NOT: stepc_gelu
// CHECK: stepc_cuda_adamw
// EXACT-NOT: STEPC_EPILOGUE_GELU
// EXACT-NOT: STEPC_EPILOGUE_DGELU
// EXACT: stepc_gelu<float>(
func.func @loss(%wte: tensor<16x4xf32> {step.param = #step.param<"wte", normal(0.02)>},
                %w1: tensor<8x4xf32> {step.param = #step.param<"fc.w", normal(0.02)>},
                %b1: tensor<8xf32> {step.param = #step.param<"fc.b", zeros>},
                %w2: tensor<4x8xf32> {step.param = #step.param<"proj.w", normal(0.02)>},
                %tokens: tensor<2x4xi32> {step.input = "tokens"},
                %targets: tensor<2x4xi32> {step.input = "targets"}) -> tensor<f32> attributes {step.loss} {
  %x = step.embedding %wte, %tokens : (tensor<16x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
  %p = step.matmul %x, %w1 transpose_b : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %bb = step.broadcast %b1 : tensor<8xf32> -> tensor<2x4x8xf32>
  %h = step.add %p, %bb : tensor<2x4x8xf32>
  %g = step.gelu %h approximate "tanh" : tensor<2x4x8xf32>
  %y = step.matmul %g, %w2 transpose_b : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x4xf32>
  %logits = step.matmul %y, %wte transpose_b : (tensor<2x4x4xf32>, tensor<16x4xf32>) -> tensor<2x4x16xf32>
  %l = step.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
