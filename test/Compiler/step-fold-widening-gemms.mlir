// RUN: stepc-opt %s -split-input-file -step-fold-widening-gemms | FileCheck %s

// A bf16 GEMM only widened writes f32: one stepk.gemm replaces the GEMM
// and both converts. A GEMM another GEMM reads in bf16 stays; an f32 GEMM
// has nothing to fold.
// CHECK-LABEL: func.func @widened
// CHECK: %[[Y:.*]] = stepk.gemm %arg0, %arg1 {shared_rhs, transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xf32>
// CHECK-NOT: step.convert %[[Y]]
// CHECK: %[[Z:.*]] = step.batch_matmul %arg2, %arg3 : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
// CHECK: step.batch_matmul %[[Z]], %arg3
// CHECK: step.matmul %arg4, %arg5 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK: return %[[Y]], %[[Y]]
func.func @widened(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %a: tensor<2x8x8xbf16>, %b: tensor<2x8x8xbf16>, %f: tensor<8x16xf32>, %g: tensor<16x4xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<2x8x8xf32>, tensor<2x8x8xbf16>, tensor<8x4xf32>) attributes {step.train_step} {
  %y = step.matmul %x, %w transpose_b : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %y1 = step.convert %y : tensor<8x32xbf16> -> tensor<8x32xf32>
  %y2 = step.convert %y : tensor<8x32xbf16> -> tensor<8x32xf32>
  %z = step.batch_matmul %a, %b : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %z1 = step.convert %z : tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
  %zz = step.batch_matmul %z, %b : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
  %h = step.matmul %f, %g : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %y1, %y2, %z1, %zz, %h : tensor<8x32xf32>, tensor<8x32xf32>, tensor<2x8x8xf32>, tensor<2x8x8xbf16>, tensor<8x4xf32>
}

// -----

// A bias broadcast along the rows and added to a widened GEMM's sum is the
// GEMM's (oneDNN adds it to the f32 sum); where the biased sum is only
// narrowed to bf16, the GEMM writes bf16. A bias added where the sum has
// other users stays an add; the GEMM, read only by elementwise ops then,
// writes bf16 that each reader widens (and a narrowing reader reads as is).
// CHECK-LABEL: func.func @biased
// CHECK: %[[Q:.*]] = stepk.gemm %arg0, %arg1 bias %arg2 {shared_rhs, transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<32xf32>) -> tensor<8x32xbf16>
// CHECK-NEXT: %[[H:.*]] = stepk.gemm %arg0, %arg1 bias %arg2 {shared_rhs, transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: %[[G:.*]] = step.gelu %[[H]]
// CHECK-NEXT: %[[P:.*]] = stepk.gemm %arg0, %arg1 {shared_rhs, transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
// CHECK-NEXT: %[[B:.*]] = step.broadcast %arg2
// CHECK-NEXT: %[[W:.*]] = step.convert %[[P]] : tensor<8x32xbf16> -> tensor<8x32xf32>
// CHECK-NEXT: %[[S:.*]] = step.add %[[W]], %[[B]]
// CHECK-NEXT: return %[[Q]], %[[H]], %[[G]], %[[S]], %[[P]]
func.func @biased(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xf32>)
    -> (tensor<8x32xbf16>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xbf16>) attributes {step.train_step} {
  %q = step.matmul %x, %w transpose_b : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %q1 = step.convert %q : tensor<8x32xbf16> -> tensor<8x32xf32>
  %qb = step.broadcast %b : tensor<32xf32> -> tensor<8x32xf32>
  %q2 = step.add %q1, %qb : tensor<8x32xf32>
  %q3 = step.convert %q2 : tensor<8x32xf32> -> tensor<8x32xbf16>
  %h = step.matmul %x, %w transpose_b : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %h1 = step.convert %h : tensor<8x32xbf16> -> tensor<8x32xf32>
  %hb = step.broadcast %b : tensor<32xf32> -> tensor<8x32xf32>
  %h2 = step.add %hb, %h1 : tensor<8x32xf32>
  %g = step.gelu %h2 : tensor<8x32xf32>
  %p = step.matmul %x, %w transpose_b : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %p1 = step.convert %p : tensor<8x32xbf16> -> tensor<8x32xf32>
  %pb = step.broadcast %b : tensor<32xf32> -> tensor<8x32xf32>
  %p2 = step.add %p1, %pb : tensor<8x32xf32>
  %p3 = step.convert %p1 : tensor<8x32xf32> -> tensor<8x32xbf16>
  return %q3, %h2, %g, %p2, %p3 : tensor<8x32xbf16>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xbf16>
}

// -----

// A packed projection: slices of the biased sum, each only narrowed for an
// attention (which reads them in place, step-lower-library-calls), are
// slices of the GEMM's bf16 result.
// CHECK-LABEL: func.func @packed
// CHECK: %[[QKV:.*]] = stepk.gemm %arg0, %arg1 bias %arg2 {shared_rhs, transpose_b} : (tensor<2x4x16xbf16>, tensor<48x16xbf16>, tensor<48xf32>) -> tensor<2x4x48xbf16>
// CHECK-NEXT: %[[Q:.*]] = step.slice %[[QKV]] offsets [0, 0, 0] sizes [2, 4, 16] : (tensor<2x4x48xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[K:.*]] = step.slice %[[QKV]] offsets [0, 0, 16] sizes [2, 4, 16] : (tensor<2x4x48xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NOT: step.convert
// CHECK: step.attention %[[Q]], %[[K]], %[[K]] heads
func.func @packed(%x: tensor<2x4x16xbf16>, %w: tensor<48x16xbf16>, %b: tensor<48xf32>)
    -> tensor<2x4x16xbf16> attributes {step.train_step} {
  %y = step.matmul %x, %w transpose_b : (tensor<2x4x16xbf16>, tensor<48x16xbf16>) -> tensor<2x4x48xbf16>
  %y1 = step.convert %y : tensor<2x4x48xbf16> -> tensor<2x4x48xf32>
  %yb = step.broadcast %b : tensor<48xf32> -> tensor<2x4x48xf32>
  %y2 = step.add %y1, %yb : tensor<2x4x48xf32>
  %q = step.slice %y2 offsets [0, 0, 0] sizes [2, 4, 16] : (tensor<2x4x48xf32>) -> tensor<2x4x16xf32>
  %k = step.slice %y2 offsets [0, 0, 16] sizes [2, 4, 16] : (tensor<2x4x48xf32>) -> tensor<2x4x16xf32>
  %q1 = step.convert %q : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %k1 = step.convert %k : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %k2 = step.convert %k : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %o = step.attention %q1, %k1, %k2 heads 2 kv_heads 2 head_dim 8 causal : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
  return %o : tensor<2x4x16xbf16>
}

// -----

// A masked attention reads separate operands: the slices stay f32 (the CPU
// target copies no bf16 slice) and are narrowed after.
// CHECK-LABEL: func.func @packed_masked
// CHECK: %[[QKV:.*]] = stepk.gemm %arg0, %arg1 bias %arg2 {shared_rhs, transpose_b} : (tensor<2x4x16xbf16>, tensor<48x16xbf16>, tensor<48xf32>) -> tensor<2x4x48xf32>
// CHECK-NEXT: %[[Q:.*]] = step.slice %[[QKV]] offsets [0, 0, 0] sizes [2, 4, 16] : (tensor<2x4x48xf32>) -> tensor<2x4x16xf32>
// CHECK: step.convert %[[Q]] : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
func.func @packed_masked(%x: tensor<2x4x16xbf16>, %w: tensor<48x16xbf16>, %b: tensor<48xf32>,
    %m: tensor<2x1x1x4xf32>) -> tensor<2x4x16xbf16> attributes {step.train_step} {
  %y = step.matmul %x, %w transpose_b : (tensor<2x4x16xbf16>, tensor<48x16xbf16>) -> tensor<2x4x48xbf16>
  %y1 = step.convert %y : tensor<2x4x48xbf16> -> tensor<2x4x48xf32>
  %yb = step.broadcast %b : tensor<48xf32> -> tensor<2x4x48xf32>
  %y2 = step.add %y1, %yb : tensor<2x4x48xf32>
  %q = step.slice %y2 offsets [0, 0, 0] sizes [2, 4, 16] : (tensor<2x4x48xf32>) -> tensor<2x4x16xf32>
  %k = step.slice %y2 offsets [0, 0, 16] sizes [2, 4, 16] : (tensor<2x4x48xf32>) -> tensor<2x4x16xf32>
  %q1 = step.convert %q : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %k1 = step.convert %k : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %o = step.attention %q1, %k1, %k1 mask %m heads 2 kv_heads 2 head_dim 8 causal : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<2x1x1x4xf32>) -> tensor<2x4x16xbf16>
  return %o : tensor<2x4x16xbf16>
}

// -----

// A GEMM's result that only elementwise ops read (a pre-activation read by
// the GELU and, in backward, its gradient) is written in bf16, each reader
// widening it just before itself (its loop reads bf16). A result that a
// reduction or the function's return reads too stays f32.
// CHECK-LABEL: func.func @loops
// CHECK: %[[H:.*]] = stepk.gemm %arg0, %arg1 bias %arg2 {shared_rhs, transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<32xf32>) -> tensor<8x32xbf16>
// CHECK-NEXT: %[[H1:.*]] = step.convert %[[H]] : tensor<8x32xbf16> -> tensor<8x32xf32>
// CHECK-NEXT: %[[G:.*]] = step.gelu %[[H1]]
// CHECK-NEXT: %[[D:.*]] = stepk.gemm %arg0, %arg1 {shared_rhs, transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xf32>
// CHECK-NEXT: %[[H2:.*]] = step.convert %[[H]] : tensor<8x32xbf16> -> tensor<8x32xf32>
// CHECK-NEXT: %[[DG:.*]] = step.gelu_grad %[[D]], %[[H2]]
// CHECK-NEXT: step.reduce_sum %[[D]]
// CHECK-NEXT: %[[R:.*]] = stepk.gemm %arg0, %arg1 {shared_rhs, transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xf32>
// CHECK-NEXT: step.exp %[[R]]
// CHECK-NEXT: return
func.func @loops(%x: tensor<8x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) attributes {step.train_step} {
  %h = step.matmul %x, %w transpose_b : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %h1 = step.convert %h : tensor<8x32xbf16> -> tensor<8x32xf32>
  %hb = step.broadcast %b : tensor<32xf32> -> tensor<8x32xf32>
  %h2 = step.add %h1, %hb : tensor<8x32xf32>
  %g = step.gelu %h2 : tensor<8x32xf32>
  %d = step.matmul %x, %w transpose_b : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %d1 = step.convert %d : tensor<8x32xbf16> -> tensor<8x32xf32>
  %dg = step.gelu_grad %d1, %h2 : tensor<8x32xf32>
  %s = step.reduce_sum %d1 dims [0] : (tensor<8x32xf32>) -> tensor<32xf32>
  %r = step.matmul %x, %w transpose_b : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
  %r1 = step.convert %r : tensor<8x32xbf16> -> tensor<8x32xf32>
  %e = step.exp %r1 : tensor<8x32xf32>
  return %g, %dg, %s, %e, %r1 : tensor<8x32xf32>, tensor<8x32xf32>, tensor<32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// A gradient that is otherwise only rounded for GEMMs (directly and
// through a reshape) is summed from its rounding: the rounding moves
// before the sum, which widens it. A gradient another op reads in f32
// keeps its f32 sum.
// CHECK-LABEL: func.func @sums
// CHECK: %[[G:.*]] = step.gelu_grad %arg0, %arg1
// CHECK-NEXT: %[[R:.*]] = step.convert %[[G]] : tensor<8x32xf32> -> tensor<8x32xbf16>
// CHECK-NEXT: %[[W:.*]] = step.convert %[[R]] : tensor<8x32xbf16> -> tensor<8x32xf32>
// CHECK-NEXT: step.reduce_sum %[[W]] dims [0]
// CHECK: %[[H:.*]] = step.gelu_grad %arg1, %arg0
// CHECK-NEXT: step.reduce_sum %[[H]] dims [0]
func.func @sums(%dy: tensor<8x32xf32>, %x: tensor<8x32xf32>)
    -> (tensor<32xf32>, tensor<8x32xbf16>, tensor<256xbf16>, tensor<32xf32>, tensor<8x32xbf16>, tensor<8x32xf32>) attributes {step.train_step} {
  %g = step.gelu_grad %dy, %x : tensor<8x32xf32>
  %s = step.reduce_sum %g dims [0] : (tensor<8x32xf32>) -> tensor<32xf32>
  %r = step.convert %g : tensor<8x32xf32> -> tensor<8x32xbf16>
  %f = step.reshape %g : tensor<8x32xf32> -> tensor<256xf32>
  %fr = step.convert %f : tensor<256xf32> -> tensor<256xbf16>
  %h = step.gelu_grad %x, %dy : tensor<8x32xf32>
  %hs = step.reduce_sum %h dims [0] : (tensor<8x32xf32>) -> tensor<32xf32>
  %hr = step.convert %h : tensor<8x32xf32> -> tensor<8x32xbf16>
  return %s, %r, %fr, %hs, %hr, %h : tensor<32xf32>, tensor<8x32xbf16>, tensor<256xbf16>, tensor<32xf32>, tensor<8x32xbf16>, tensor<8x32xf32>
}

// -----

// fp32: an f32 GEMM whose only user adds a bias broadcast along its rows
// takes the bias (one f32 stepk.gemm, the add and broadcast gone); one whose
// sum has another user, or whose added operand is no [N] bias, stays a
// step.matmul and its add.
// CHECK-LABEL: func.func @f32_biased
// CHECK: %[[H:.*]] = stepk.gemm %arg0, %arg1 bias %arg2 {shared_rhs, transpose_b} : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: %[[G:.*]] = step.gelu %[[H]]
// CHECK-NEXT: %[[P:.*]] = step.matmul %arg0, %arg1 transpose_b
// CHECK-NEXT: %[[B:.*]] = step.broadcast %arg2
// CHECK-NEXT: %[[S:.*]] = step.add %[[P]], %[[B]]
// CHECK-NEXT: %[[R:.*]] = step.matmul %arg0, %arg1 transpose_b
// CHECK-NEXT: %[[T:.*]] = step.add %[[R]], %arg3
// CHECK-NEXT: return %[[G]], %[[S]], %[[P]], %[[T]]
func.func @f32_biased(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>, %r: tensor<8x32xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) attributes {step.train_step} {
  %h = step.matmul %x, %w transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %hb = step.broadcast %b : tensor<32xf32> -> tensor<8x32xf32>
  %h2 = step.add %hb, %h : tensor<8x32xf32>
  %g = step.gelu %h2 : tensor<8x32xf32>
  %p = step.matmul %x, %w transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %pb = step.broadcast %b : tensor<32xf32> -> tensor<8x32xf32>
  %p2 = step.add %p, %pb : tensor<8x32xf32>
  %q = step.matmul %x, %w transpose_b : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %q2 = step.add %q, %r : tensor<8x32xf32>
  return %g, %p2, %p, %q2 : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}
