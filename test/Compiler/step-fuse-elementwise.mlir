// RUN: stepc-opt %s -split-input-file -step-fuse-elementwise | FileCheck %s --check-prefixes=CHECK,CPU
// RUN: stepc-opt %s -split-input-file -step-fuse-cuda-kernels -step-fuse-elementwise | FileCheck %s --check-prefixes=CHECK,CUDA
// RUN: stepc-opt %s -split-input-file -step-fuse-elementwise=max-ops=2 | FileCheck %s --check-prefix=MAX2

// A run of three: the add's and the gelu's results are used after the run
// (results of the kernel); the mul's only inside it (a register).
// CHECK-LABEL: func.func @run_of_three
// CHECK: %[[F:.*]]:2 = stepk.fused %arg0, %arg1, %arg2 : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<8x16xf32>, %[[Y:.*]]: tensor<8x16xf32>, %[[Z:.*]]: tensor<8x16xf32>):
// CHECK-NEXT: %[[A:.*]] = step.add %[[X]], %[[Y]]
// CHECK-NEXT: %[[M:.*]] = step.mul %[[A]], %[[Z]]
// CHECK-NEXT: %[[G:.*]] = step.gelu %[[M]]
// CHECK-NEXT: stepk.yield %[[A]], %[[G]]
// CHECK: step.reduce_sum %[[F]]#0
// CHECK: step.reduce_sum %[[F]]#1
// Two ops at most a kernel: the gelu starts a run of one, left alone.
// MAX2-LABEL: func.func @run_of_three
// MAX2: stepk.fused
// MAX2: stepk.yield
// MAX2-NEXT: }
// MAX2-NEXT: step.gelu
func.func @run_of_three(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>, %z: tensor<8x16xf32>) -> (tensor<f32>, tensor<f32>) attributes {step.train_step} {
  %a = step.add %x, %y : tensor<8x16xf32>
  %m = step.mul %a, %z : tensor<8x16xf32>
  %g = step.gelu %m : tensor<8x16xf32>
  %s0 = step.reduce_sum %a dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  %s1 = step.reduce_sum %g dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  return %s0, %s1 : tensor<f32>, tensor<f32>
}

// -----

// Must not fire: the second op has another element count, so each op is a
// run of one.
// CHECK-LABEL: func.func @element_count_mismatch
// CHECK-NOT: stepk.fused
func.func @element_count_mismatch(%x: tensor<8x16xf32>, %v: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) attributes {step.train_step} {
  %e = step.exp %x : tensor<8x16xf32>
  %n = step.neg %v : tensor<16xf32>
  return %e, %n : tensor<8x16xf32>, tensor<16xf32>
}

// -----

// Must not fire: a non-elementwise op between the two ends the run.
// CHECK-LABEL: func.func @broken_by_a_reduction
// CHECK-NOT: stepk.fused
func.func @broken_by_a_reduction(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>) attributes {step.train_step} {
  %e = step.exp %x : tensor<8x16xf32>
  %s = step.reduce_sum %e dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  %t = step.tanh %e : tensor<8x16xf32>
  return %t, %s : tensor<8x16xf32>, tensor<8xf32>
}

// -----

// Only training steps are lowered: a loss function is left as written.
// CHECK-LABEL: func.func @not_a_step
// CHECK-NOT: stepk.fused
func.func @not_a_step(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = step.exp %x : tensor<8x16xf32>
  %t = step.tanh %e : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

// Reshapes do not break a run: one read inside the run is cloned into the
// body; one of a result, read after the run, moves behind the kernel.
// CHECK-LABEL: func.func @through_reshapes
// CHECK: %[[F:.*]]:2 = stepk.fused %arg0, %arg1 : (tensor<8x16xf32>, tensor<128xf32>) -> (tensor<8x16xf32>, tensor<128xf32>)
// CHECK: %[[E:.*]] = step.exp
// CHECK-NEXT: %[[R:.*]] = step.reshape %[[E]] : tensor<8x16xf32> -> tensor<128xf32>
// CHECK-NEXT: %[[S:.*]] = step.sub %[[R]], %{{.*}} : tensor<128xf32>
// CHECK-NEXT: stepk.yield %[[E]], %[[S]]
// CHECK-NEXT: }
// CHECK-NEXT: step.reshape %[[F]]#0 : tensor<8x16xf32> -> tensor<16x8xf32>
func.func @through_reshapes(%x: tensor<8x16xf32>, %y: tensor<128xf32>) -> (tensor<16x8xf32>, tensor<128xf32>) attributes {step.train_step} {
  %e = step.exp %x : tensor<8x16xf32>
  %later = step.reshape %e : tensor<8x16xf32> -> tensor<16x8xf32>
  %r = step.reshape %e : tensor<8x16xf32> -> tensor<128xf32>
  %s = step.sub %r, %y : tensor<128xf32>
  return %later, %s : tensor<16x8xf32>, tensor<128xf32>
}

// -----

// A bias add after a GEMM: cuBLASLt's BIAS epilogue computes it on CUDA, so
// there it is the GEMM's (step-fuse-cuda-kernels) and the exact GELU stays
// alone; on the CPU it joins the GELU.
// CHECK-LABEL: func.func @bias_epilogue
// CPU: step.matmul
// CPU: stepk.fused
// CPU: step.add
// CPU-NEXT: step.gelu
// CUDA-NOT: stepk.fused
// CUDA: stepk.gemm %arg0, %arg1 bias %arg2
// CUDA-NEXT: step.gelu
func.func @bias_epilogue(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> attributes {step.train_step} {
  %h = step.matmul %x, %w transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %bb = step.broadcast %b : tensor<32xf32> -> tensor<8x32xf32>
  %a = step.add %h, %bb : tensor<8x32xf32>
  %g = step.gelu %a : tensor<8x32xf32>
  return %g : tensor<8x32xf32>
}

// -----

// A run nothing reads afterwards (dead code) is left as it is: a kernel
// storing no result is not one.
// CHECK-LABEL: func.func @dead_run
// CHECK-NOT: stepk.fused
// CHECK: step.exp
// CHECK-NEXT: step.tanh
// CHECK-NEXT: return %arg0
func.func @dead_run(%x: tensor<8xf32>) -> tensor<8xf32> attributes {step.train_step} {
  %e = step.exp %x : tensor<8xf32>
  %t = step.tanh %e : tensor<8xf32>
  return %x : tensor<8xf32>
}

// -----

// A gradient reduced in f32 (a bias's) and rounded for the next GEMM: the
// convert after the reduction moves before it and joins the run, so the
// gradient is read once; a convert of something else stays after it. On
// CUDA (step-fuse-cuda-kernels) the bias gradient is summed from the
// rounding, as on the CPU under bf16 (step-fold-widening-gemms): the sum
// reads the widened bf16 values (in the whole pipeline,
// step-lower-library-calls' reduce_of_bf16 reads the bf16 ones).
// CHECK-LABEL: func.func @convert_joins_across_reduce
// CHECK: %[[F:.*]]:2 = stepk.fused %arg0, %arg1
// CHECK: %[[G:.*]] = step.gelu_grad
// CHECK-NEXT: %[[C:.*]] = step.convert %[[G]]
// CPU-NEXT: stepk.yield %[[G]], %[[C]]
// CPU: step.reduce_sum %[[F]]#0
// CUDA-NEXT: %[[W:.*]] = step.convert %[[C]] : tensor<8x16xbf16> -> tensor<8x16xf32>
// CUDA-NEXT: stepk.yield %[[C]], %[[W]]
// CUDA: step.reduce_sum %[[F]]#1
// CHECK-NEXT: step.convert %arg1
// CHECK: return
func.func @convert_joins_across_reduce(%dy: tensor<8x16xf32>, %x: tensor<8x16xf32>) -> (tensor<16xf32>, tensor<8x16xbf16>, tensor<8x16xbf16>) attributes {step.train_step} {
  %g = step.gelu_grad %dy, %x : tensor<8x16xf32>
  %s = step.reduce_sum %g dims [0] : (tensor<8x16xf32>) -> tensor<16xf32>
  %c = step.convert %g : tensor<8x16xf32> -> tensor<8x16xbf16>
  %d = step.convert %x : tensor<8x16xf32> -> tensor<8x16xbf16>
  return %s, %c, %d : tensor<16xf32>, tensor<8x16xbf16>, tensor<8x16xbf16>
}

// -----

// Llama's SwiGLU (PlaceElementwise.cpp): silu(g) sinks past u's GEMM into
// the mul's kernel, and the backward recomputes it from g (which silu's
// gradient reads anyway) instead of reading it stored; dh*u sinks past the
// backward GEMM into silu's gradient, and that kernel rises above the GEMM
// to join the one computing u's gradient: dh, g and u read once for both
// gradients (what it holds longer, g's gradient, u no longer holds). No
// silu(g) between kernels.
// CHECK-LABEL: func.func @swiglu
// CHECK: %[[U:.*]] = step.matmul %arg1, %arg2
// CHECK-NEXT: %[[H:.*]] = stepk.fused %arg0, %[[U]] {{.*}}{
// CHECK-NEXT: ^bb0(%[[G:.*]]: tensor<8x16xf32>, %[[UU:.*]]: tensor<8x16xf32>):
// CHECK-NEXT: %[[S:.*]] = step.silu %[[G]]
// CHECK-NEXT: step.mul %[[S]], %[[UU]]
// CHECK: step.reduce_sum %[[H]]
// CHECK-NEXT: %[[D:.*]]:2 = stepk.fused %arg0, %arg3, %[[U]] {{.*}}{
// CHECK-NEXT: ^bb0(%[[G2:.*]]: tensor<8x16xf32>, %[[DH:.*]]: tensor<8x16xf32>, %[[U2:.*]]: tensor<8x16xf32>):
// CHECK-NEXT: %[[S2:.*]] = step.silu %[[G2]] {step.phase = #step.phase<backward>}
// CHECK-NEXT: step.mul %[[DH]], %[[S2]]
// CHECK-NEXT: %[[DS:.*]] = step.mul %[[DH]], %[[U2]]
// CHECK-NEXT: step.silu_grad %[[DS]], %[[G2]]
// CHECK: step.matmul %[[D]]#0, %arg2
// CHECK-NOT: stepk.fused
// CHECK: return
func.func @swiglu(%g: tensor<8x16xf32>, %x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %dh: tensor<8x16xf32>) -> (tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>) attributes {step.train_step} {
  %s = step.silu %g {step.phase = #step.phase<forward>} : tensor<8x16xf32>
  %u = step.matmul %x, %w transpose_b {step.phase = #step.phase<forward>} : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %h = step.mul %s, %u {step.phase = #step.phase<forward>} : tensor<8x16xf32>
  %l = step.reduce_sum %h dims [0, 1] {step.phase = #step.phase<forward>} : (tensor<8x16xf32>) -> tensor<f32>
  %ds = step.mul %dh, %u {step.phase = #step.phase<backward>} : tensor<8x16xf32>
  %du = step.mul %dh, %s {step.phase = #step.phase<backward>} : tensor<8x16xf32>
  %dx = step.matmul %du, %w {step.phase = #step.phase<backward>} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %dg = step.silu_grad %ds, %g {step.phase = #step.phase<backward>} : tensor<8x16xf32>
  return %l, %dg, %du, %dx : tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>
}

// -----

// Recomputed only where that holds no more bytes: exp(a) + -a at the
// backward's mul would keep exp(a) and -a (nothing else reads them) instead
// of their sum, so the backward reads the sum; in the forward, the chain
// sinks whole into the mul's kernel (it reads only a, an argument).
// CHECK-LABEL: func.func @inputs_bigger_than_the_value
// CHECK: step.matmul
// CHECK-NEXT: %[[F:.*]]:2 = stepk.fused %arg0
// CHECK: step.add
// CHECK: step.matmul %[[F]]#1
// CHECK-NEXT: step.mul %arg3, %[[F]]#0
func.func @inputs_bigger_than_the_value(%a: tensor<8x16xf32>, %x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %dh: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>) attributes {step.train_step} {
  %e = step.exp %a {step.phase = #step.phase<forward>} : tensor<8x16xf32>
  %n = step.neg %a {step.phase = #step.phase<forward>} : tensor<8x16xf32>
  %v = step.add %e, %n {step.phase = #step.phase<forward>} : tensor<8x16xf32>
  %u = step.matmul %x, %w transpose_b {step.phase = #step.phase<forward>} : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %h = step.mul %v, %u {step.phase = #step.phase<forward>} : tensor<8x16xf32>
  %dx = step.matmul %h, %w {step.phase = #step.phase<backward>} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %dv = step.mul %dh, %v {step.phase = #step.phase<backward>} : tensor<8x16xf32>
  return %h, %dv, %dx : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>
}

// -----

// The backward's second SwiGLU kernel stays below the GEMM where rising
// would hold more bytes: u is read after it (returned), so g's gradient
// would wait through the GEMM with nothing freed for it.
// CHECK-LABEL: func.func @sibling_would_hold_more
// CHECK: stepk.fused %arg0, %arg3 {{.*}}{
// CHECK: step.matmul
// CHECK: stepk.fused %arg3, %{{.*}}, %arg0 {{.*}}{
// CHECK: step.silu_grad
func.func @sibling_would_hold_more(%g: tensor<8x16xf32>, %x: tensor<8x4xf32>, %w: tensor<16x4xf32>, %dh: tensor<8x16xf32>) -> (tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x16xf32>) attributes {step.train_step} {
  %s = step.silu %g {step.phase = #step.phase<forward>} : tensor<8x16xf32>
  %u = step.matmul %x, %w transpose_b {step.phase = #step.phase<forward>} : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %h = step.mul %s, %u {step.phase = #step.phase<forward>} : tensor<8x16xf32>
  %l = step.reduce_sum %h dims [0, 1] {step.phase = #step.phase<forward>} : (tensor<8x16xf32>) -> tensor<f32>
  %ds = step.mul %dh, %u {step.phase = #step.phase<backward>} : tensor<8x16xf32>
  %du = step.mul %dh, %s {step.phase = #step.phase<backward>} : tensor<8x16xf32>
  %dx = step.matmul %du, %w {step.phase = #step.phase<backward>} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %dg = step.silu_grad %ds, %g {step.phase = #step.phase<backward>} : tensor<8x16xf32>
  return %l, %dg, %du, %dx, %u : tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x16xf32>
}
