// Frozen parameters (`#step.param<..., frozen>`): held and read, not trained.
// RUN: stepc-opt %s -split-input-file -step-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: stepc-opt %s -split-input-file -step-autodiff -step-optimizer | FileCheck %s --check-prefix=STEP
// RUN: stepc-opt %s -split-input-file -step-autodiff -step-shard-fully=ranks=2 -step-optimizer=mesh=world | FileCheck %s --check-prefix=FSDP
// RUN: stepc-opt %s -split-input-file -step-autodiff -step-shard-data-parallel=ranks=2 -step-optimizer | FileCheck %s --check-prefix=DDP

// A frozen first layer under a trained second: the gradient function returns
// the loss and dW1 only. Nothing needs the first layer's cotangents (no
// frozen weight's gradient, no input's): the backward is dW1's product alone.
// GRAD-LABEL: func.func @loss_grad
// GRAD-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<8x8xf32> {step.result = #step.result<grad, "w1">})
// GRAD: step.tanh
// GRAD: %[[DW1:.*]] = step.matmul {{.*}} transpose_a {step.phase = #step.phase<backward>}
// GRAD-NOT: step.phase<backward>
// GRAD: return %{{.*}}, %[[DW1]] :

// The training step takes the frozen parameters after the trained ones and
// keeps no optimizer state for them; it returns no new value of them (the
// runtime's copy stays as it was).
// STEP-LABEL: func.func @loss_train_step
// STEP-SAME: (%arg0: tensor<8x8xf32> {step.param = #step.param<"w1", normal(0.5)>}, %arg1: tensor<8x8xf32> {step.param = #step.param<"w0", normal(0.5), frozen>}, %arg2: tensor<8xf32> {step.param = #step.param<"b0", zeros, frozen>}, %arg3: tensor<8x8xf32> {step.state = #step.state<exp_avg, "w1">}, %arg4: tensor<8x8xf32> {step.state = #step.state<exp_avg_sq, "w1">}, %arg5: tensor<2x8xf32> {step.input = "x"},
// STEP-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<f32> {step.result = #step.result<grad_norm>}, tensor<8x8xf32> {step.result = #step.result<param, "w1">}, tensor<8x8xf32> {step.result = #step.result<exp_avg, "w1">}, tensor<8x8xf32> {step.result = #step.result<exp_avg_sq, "w1">})
// STEP: step.adamw
// STEP-NOT: step.adamw
// STEP: return

// fsdp: every parameter is stored as this rank's rows and gathered for the
// forward, the frozen ones too; only the trained one's gradient is
// reduce-scattered.
// FSDP-LABEL: func.func @loss_train_step
// FSDP-SAME: %arg1: tensor<4x8xf32> {step.param = #step.param<"w0", normal(0.5), frozen>, step.shard_of = 8 : i64}
// FSDP-SAME: %arg2: tensor<4xf32> {step.param = #step.param<"b0", zeros, frozen>, step.shard_of = 8 : i64}
// FSDP-DAG: mesh.all_gather %arg1
// FSDP-DAG: mesh.all_gather %arg2
// FSDP: mesh.reduce_scatter
// FSDP-NOT: mesh.reduce_scatter
// FSDP: return

// ddp: one gradient to all-reduce (besides the loss).
// DDP-LABEL: func.func @loss_train_step
// DDP-COUNT-2: mesh.all_reduce
// DDP-NOT: mesh.all_reduce
// DDP: step.adamw
func.func @loss(%w0: tensor<8x8xf32> {step.param = #step.param<"w0", normal(0.5), frozen>},
                %b0: tensor<8xf32> {step.param = #step.param<"b0", zeros, frozen>},
                %w1: tensor<8x8xf32> {step.param = #step.param<"w1", normal(0.5)>},
                %x: tensor<2x8xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %m = step.matmul %x, %w0 transpose_b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %bb = step.broadcast %b0 : tensor<8xf32> -> tensor<2x8xf32>
  %h = step.add %m, %bb : tensor<2x8xf32>
  %a = step.tanh %h : tensor<2x8xf32>
  %y = step.matmul %a, %w1 transpose_b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %s = step.reduce_sum %y dims [0, 1] : (tensor<2x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A frozen layer between two trained ones (a frozen base between adapters):
// its weight's gradient is never computed, but the cotangent passes through
// it to the first layer: four backward products, dH1 = dY·C, dC, dH0 =
// dH1·W (through the frozen weight, %arg1) and dA; no dW, no dX.
// GRAD-LABEL: func.func @loss_grad
// GRAD-SAME: -> (tensor<f32> {step.result = #step.result<loss>}, tensor<4x4xf32> {step.result = #step.result<grad, "a">}, tensor<4x4xf32> {step.result = #step.result<grad, "c">})
// GRAD: step.matmul {{.*}} {step.phase = #step.phase<backward>}
// GRAD-NEXT: step.matmul {{.*}} transpose_a {step.phase = #step.phase<backward>}
// GRAD-NEXT: step.matmul %{{.*}}, %arg1 {step.phase = #step.phase<backward>}
// GRAD-NEXT: step.matmul {{.*}} transpose_a {step.phase = #step.phase<backward>}
// GRAD-NOT: step.matmul
// GRAD: return
func.func @loss(%a: tensor<4x4xf32> {step.param = #step.param<"a", normal(0.5)>},
                %w: tensor<4x4xf32> {step.param = #step.param<"w", normal(0.5), frozen>},
                %c: tensor<4x4xf32> {step.param = #step.param<"c", normal(0.5)>},
                %x: tensor<2x4xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %h0 = step.matmul %x, %a transpose_b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %h1 = step.matmul %h0, %w transpose_b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %h2 = step.matmul %h1, %c transpose_b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = step.reduce_sum %h2 dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
