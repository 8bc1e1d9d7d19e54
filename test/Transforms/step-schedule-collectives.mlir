// RUN: stepc-opt %s -step-autodiff -step-shard-fully=ranks=2 -step-optimizer=mesh=world -step-schedule-collectives | FileCheck %s
// RUN: stepc-opt %s -step-autodiff -step-shard-data-parallel="ranks=2 bucket-bytes=64" -step-optimizer -step-schedule-collectives | FileCheck %s --check-prefix=DDP

// FSDP, two layers. Forward: w1's gather is issued before layer 0 computes.
// Backward: w1's gather one use ahead, and dW1's reduce-scatter as soon as
// dW1 is final, before layer 0's backward. w0 is not gathered again: no
// gradient of the input x is needed, so layer 0's backward is dW0 alone.
// CHECK-LABEL: func.func @loss_train_step
// CHECK: %[[G0:.*]] = mesh.all_gather %arg0
// CHECK-NEXT: %[[G1:.*]] = mesh.all_gather %arg1
// CHECK-NEXT: step.matmul %{{.*}}, %[[G0]] transpose_b
// CHECK-NEXT: step.tanh
// CHECK-NEXT: %[[G1B:.*]] = mesh.all_gather %arg1
// CHECK-NEXT: step.matmul %{{.*}}, %[[G1]] transpose_b
// CHECK-NOT: mesh.all_gather
// CHECK: step.matmul %{{.*}}, %[[G1B]] {{.*}}:
// CHECK-NEXT: %[[DW1:.*]] = step.matmul {{.*}} transpose_a
// CHECK-NEXT: mesh.reduce_scatter %[[DW1]]
// CHECK-NOT: mesh.all_gather
// CHECK: %[[DW0:.*]] = step.matmul {{.*}} transpose_a
// CHECK-NEXT: mesh.reduce_scatter %[[DW0]]
// CHECK: step.adamw

// DDP with 64-byte buckets: each 4x4 gradient (64 bytes) is its own bucket,
// all-reduced as soon as it is final.
// DDP-LABEL: func.func @loss_train_step
// DDP: %[[DW1:.*]] = step.matmul {{.*}} transpose_a
// DDP-NEXT: mesh.all_reduce %[[DW1]]
// DDP: %[[DW0:.*]] = step.matmul {{.*}} transpose_a
// DDP-NEXT: mesh.all_reduce %[[DW0]]
func.func @loss(%w0: tensor<4x4xf32> {step.param = #step.param<"w0", normal(0.5)>},
                %w1: tensor<4x4xf32> {step.param = #step.param<"w1", normal(0.5)>},
                %x: tensor<2x4xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %h = step.matmul %x, %w0 transpose_b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a = step.tanh %h : tensor<2x4xf32>
  %y = step.matmul %a, %w1 transpose_b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
