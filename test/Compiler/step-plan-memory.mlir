// step-plan-memory records the plan in the IR: every value's buffer (or the
// argument it lives in), the buffers' offsets, sizes and lifetimes, the
// arena and the planned peak (arguments + arena); with a budget below that
// peak, an error at the step.
// RUN: stepc-opt %s --step-plan-memory | FileCheck %s
// RUN: stepc-opt %s --step-plan-memory=target=cuda | FileCheck %s --check-prefix=CUDA
// RUN: not stepc-opt %s --step-plan-memory=budget=1000 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: stepc-opt %s --step-plan-memory=budget=1536 -o %t.mlir

// Two [8x16] f32 buffers (512 B each): %e dies at %m, which reuses it in
// place; %s is live with %m, so it goes beside it; the reshape aliases the
// argument. Arguments 512 B + arena 1024 B.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: step.memory_plan = {arena_bytes = 1024 : i64, buffers = array<i64: 0, 512, 1, 5, 512, 512, 2, 3>, in_place_buffers = 1 : i64, live_bytes_peak = 1024 : i64, live_bytes_peak_at = 2 : i64, planned_peak_bytes = 1536 : i64}
// CHECK: step.reshape {{.*}}step.buffer = array<i64: -1>, step.in_arg = array<i64: 0>
// CHECK: step.exp {{.*}}step.buffer = array<i64: 0>
// CHECK: step.tanh {{.*}}step.buffer = array<i64: 1>
// CHECK: step.mul {{.*}}step.buffer = array<i64: 0>
// The CUDA layout: [plan 1024][status 256][workspace 32 MiB][scratch, at
// least 256].
// CUDA: step.memory_plan = {arena_bytes = 1024 : i64, buffers = {{.*}}, cuda = {arena_bytes = 33555968 : i64, scratch_bytes = 0 : i64, scratch_offset = 33555712 : i64, status_offset = 1024 : i64, workspace_offset = 1280 : i64}
// BUDGET: error: the cpu back end's plan needs 1536 bytes per rank, over the memory budget of 1000 bytes
func.func @step(%x: tensor<8x16xf32> {step.input = "x"}) -> tensor<8x16xf32> attributes {step.train_step} {
  %r = step.reshape %x : tensor<8x16xf32> -> tensor<128xf32>
  %e = step.exp %x : tensor<8x16xf32>
  %s = step.tanh %x : tensor<8x16xf32>
  %m = step.mul %e, %s : tensor<8x16xf32>
  return %m : tensor<8x16xf32>
}
