// Finite-difference check of every autodiff rule, in f64 on the reference
// interpreter on f64 models (f32 constants inside rules would cost 1e-8):
// each function is a loss through one op (projected onto a
// random w_out), and every parameter's gradient must agree with fourth-order
// central differences within 1e-6 relative (the error of a parameter is
// max |ad - fd| over its elements, relative to the largest of them).
// RUN: stepc-interp %s --grad-check --tolerance=1e-6 --samples=200 --seed=3 | FileCheck %s
// CHECK: "max_rel_err"

// neg
func.func @neg(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.neg %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// exp
func.func @exp(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.exp %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// tanh
func.func @tanh(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.tanh %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// erf
func.func @erf(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.erf %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// silu
func.func @silu(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.silu %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// softplus, around 0 (log1p(exp(x))) and beyond the threshold of 20 (x)
func.func @softplus(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.softplus %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}
func.func @softplus_wide(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(30.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.softplus %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// abs, around 0 (both signs; no element is exactly 0)
func.func @abs(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.abs %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// relu
func.func @relu(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.relu %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// sigmoid
func.func @sigmoid(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.sigmoid %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// gelu
func.func @gelu(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.gelu %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// gelu_tanh
func.func @gelu_tanh(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.gelu %x approximate tanh : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// log
func.func @log(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %sq = step.mul %x, %x : tensor<3x4xf64>
  %c = step.constant dense<0.5> : tensor<3x4xf64>
  %p = step.add %sq, %c : tensor<3x4xf64>
  %y = step.log %p : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// sqrt
func.func @sqrt(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %sq = step.mul %x, %x : tensor<3x4xf64>
  %c = step.constant dense<0.5> : tensor<3x4xf64>
  %p = step.add %sq, %c : tensor<3x4xf64>
  %y = step.sqrt %p : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// rsqrt
func.func @rsqrt(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %sq = step.mul %x, %x : tensor<3x4xf64>
  %c = step.constant dense<0.5> : tensor<3x4xf64>
  %p = step.add %sq, %c : tensor<3x4xf64>
  %y = step.rsqrt %p : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// add
func.func @add(%a: tensor<3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<3x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.add %a, %b : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// sub
func.func @sub(%a: tensor<3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<3x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.sub %a, %b : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// mul
func.func @mul(%a: tensor<3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<3x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.mul %a, %b : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// div
func.func @div(%a: tensor<3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<3x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %e = step.exp %b : tensor<3x4xf64>
  %y = step.div %a, %e : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// maximum
func.func @maximum(%a: tensor<3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<3x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.maximum %a, %b : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// minimum
func.func @minimum(%a: tensor<3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<3x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.minimum %a, %b : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// fan_out
func.func @fan_out(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %a = step.mul %x, %x : tensor<3x4xf64>
  %y = step.add %a, %x : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// broadcast
func.func @broadcast(%x: tensor<4x1x5xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<2x4x3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.broadcast %x : tensor<4x1x5xf64> -> tensor<2x4x3x5xf64>
  %l = step.mul %y, %w_out : tensor<2x4x3x5xf64>
  %s = step.reduce_sum %l dims [0, 1, 2, 3] : (tensor<2x4x3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// reshape
func.func @reshape(%x: tensor<2x6xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.reshape %x : tensor<2x6xf64> -> tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// transpose
func.func @transpose(%x: tensor<2x3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<4x2x3xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.transpose %x [2, 0, 1] : (tensor<2x3x4xf64>) -> tensor<4x2x3xf64>
  %l = step.mul %y, %w_out : tensor<4x2x3xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<4x2x3xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// slice
func.func @slice(%x: tensor<4x6xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<2x3xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.slice %x offsets [1, 2] sizes [2, 3] : (tensor<4x6xf64>) -> tensor<2x3xf64>
  %l = step.mul %y, %w_out : tensor<2x3xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<2x3xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// pad
func.func @pad(%x: tensor<2x3xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.pad %x low [1, 0] high [0, 2] : (tensor<2x3xf64>) -> tensor<3x5xf64>
  %l = step.mul %y, %w_out : tensor<3x5xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// concat
func.func @concat(%a: tensor<2x3xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<2x2xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x8xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.concat %a, %b, %a dim 1 : (tensor<2x3xf64>, tensor<2x2xf64>, tensor<2x3xf64>) -> tensor<2x8xf64>
  %l = step.mul %y, %w_out : tensor<2x8xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<2x8xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// convert
func.func @convert(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %h = step.convert %x : tensor<3x4xf64> -> tensor<3x4xf32>
  %y = step.convert %h : tensor<3x4xf32> -> tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// reduce_sum
func.func @reduce_sum(%x: tensor<2x3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.reduce_sum %x dims [0, 2] : (tensor<2x3x4xf64>) -> tensor<3xf64>
  %l = step.mul %y, %w_out : tensor<3xf64>
  %s = step.reduce_sum %l dims [0] : (tensor<3xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// reduce_mean_keep
func.func @reduce_mean_keep(%x: tensor<2x3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<2x1x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.reduce_mean %x dims [1] keep_dims : (tensor<2x3x4xf64>) -> tensor<2x1x4xf64>
  %l = step.mul %y, %w_out : tensor<2x1x4xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x1x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// reduce_max
func.func @reduce_max(%x: tensor<2x3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<2x3xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.reduce_max %x dims [2] : (tensor<2x3x4xf64>) -> tensor<2x3xf64>
  %l = step.mul %y, %w_out : tensor<2x3xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<2x3xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// matmul
func.func @matmul(%a: tensor<2x3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<4x5xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.matmul %a, %b : (tensor<2x3x4xf64>, tensor<4x5xf64>) -> tensor<2x3x5xf64>
  %l = step.mul %y, %w_out : tensor<2x3x5xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// batch_matmul
func.func @batch_matmul(%a: tensor<2x3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<2x4x5xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.batch_matmul %a, %b : (tensor<2x3x4xf64>, tensor<2x4x5xf64>) -> tensor<2x3x5xf64>
  %l = step.mul %y, %w_out : tensor<2x3x5xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// matmul_tb
func.func @matmul_tb(%a: tensor<2x3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<5x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.matmul %a, %b transpose_b : (tensor<2x3x4xf64>, tensor<5x4xf64>) -> tensor<2x3x5xf64>
  %l = step.mul %y, %w_out : tensor<2x3x5xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// batch_matmul_tb
func.func @batch_matmul_tb(%a: tensor<2x3x4xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<2x5x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.batch_matmul %a, %b transpose_b : (tensor<2x3x4xf64>, tensor<2x5x4xf64>) -> tensor<2x3x5xf64>
  %l = step.mul %y, %w_out : tensor<2x3x5xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// matmul_ta
func.func @matmul_ta(%a: tensor<2x4x3xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<4x5xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.matmul %a, %b transpose_a : (tensor<2x4x3xf64>, tensor<4x5xf64>) -> tensor<2x3x5xf64>
  %l = step.mul %y, %w_out : tensor<2x3x5xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// batch_matmul_ta
func.func @batch_matmul_ta(%a: tensor<2x4x3xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<2x4x5xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.batch_matmul %a, %b transpose_a : (tensor<2x4x3xf64>, tensor<2x4x5xf64>) -> tensor<2x3x5xf64>
  %l = step.mul %y, %w_out : tensor<2x3x5xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// matmul_ta_tb
func.func @matmul_ta_tb(%a: tensor<2x4x3xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<5x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.matmul %a, %b transpose_a transpose_b : (tensor<2x4x3xf64>, tensor<5x4xf64>) -> tensor<2x3x5xf64>
  %l = step.mul %y, %w_out : tensor<2x3x5xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// batch_matmul_ta_tb
func.func @batch_matmul_ta_tb(%a: tensor<2x4x3xf64> {step.param = #step.param<"a", normal(1.0)>},
    %b: tensor<2x5x4xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x3x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.batch_matmul %a, %b transpose_a transpose_b : (tensor<2x4x3xf64>, tensor<2x5x4xf64>) -> tensor<2x3x5xf64>
  %l = step.mul %y, %w_out : tensor<2x3x5xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// softmax
func.func @softmax(%x: tensor<2x5x3xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<2x5x3xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.softmax %x dim 1 : (tensor<2x5x3xf64>) -> tensor<2x5x3xf64>
  %l = step.mul %y, %w_out : tensor<2x5x3xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x5x3xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// log_softmax (along a middle dim, and the last)
func.func @log_softmax(%x: tensor<2x5x3xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<2x5x3xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.log_softmax %x dim 1 : (tensor<2x5x3xf64>) -> tensor<2x5x3xf64>
  %l = step.mul %y, %w_out : tensor<2x5x3xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x5x3xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

func.func @log_softmax_last(%x: tensor<4x7xf64> {step.param = #step.param<"x", normal(3.0)>},
    %w_out: tensor<4x7xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.log_softmax %x dim 1 : (tensor<4x7xf64>) -> tensor<4x7xf64>
  %l = step.mul %y, %w_out : tensor<4x7xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<4x7xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// cumsum (along a middle dim, and the last)
func.func @cumsum(%x: tensor<2x5x3xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<2x5x3xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.cumsum %x dim 1 : (tensor<2x5x3xf64>) -> tensor<2x5x3xf64>
  %l = step.mul %y, %w_out : tensor<2x5x3xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x5x3xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

func.func @cumsum_last(%x: tensor<4x7xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<4x7xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.cumsum %x dim 1 : (tensor<4x7xf64>) -> tensor<4x7xf64>
  %l = step.mul %y, %w_out : tensor<4x7xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<4x7xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// layer_norm
func.func @layer_norm(%x: tensor<2x3x6xf64> {step.param = #step.param<"x", normal(1.0)>},
    %g: tensor<6xf64> {step.param = #step.param<"g", normal(1.0)>},
    %b: tensor<6xf64> {step.param = #step.param<"b", normal(1.0)>},
    %w_out: tensor<2x3x6xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.layer_norm %x, %g, %b : (tensor<2x3x6xf64>, tensor<6xf64>, tensor<6xf64>) -> tensor<2x3x6xf64>
  %l = step.mul %y, %w_out : tensor<2x3x6xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x6xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// rms_norm
func.func @rms_norm(%x: tensor<2x3x6xf64> {step.param = #step.param<"x", normal(1.0)>},
    %g: tensor<6xf64> {step.param = #step.param<"g", normal(1.0)>},
    %w_out: tensor<2x3x6xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.rms_norm %x, %g {epsilon = 1.0e-06 : f64} : (tensor<2x3x6xf64>, tensor<6xf64>) -> tensor<2x3x6xf64>
  %l = step.mul %y, %w_out : tensor<2x3x6xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x3x6xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// rotary
func.func @rotary(%x: tensor<2x5x8xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<2x5x8xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.rotary %x head_dim 4 : (tensor<2x5x8xf64>) -> tensor<2x5x8xf64>
  %l = step.mul %y, %w_out : tensor<2x5x8xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x5x8xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// rotary_inverse
func.func @rotary_inverse(%x: tensor<1x4x6xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<1x4x6xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.rotary %x head_dim 6 inverse {theta = 500.0 : f64} : (tensor<1x4x6xf64>) -> tensor<1x4x6xf64>
  %l = step.mul %y, %w_out : tensor<1x4x6xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<1x4x6xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// attention_gqa
func.func @attention_gqa(%q: tensor<2x5x12xf64> {step.param = #step.param<"q", normal(1.0)>},
    %k: tensor<2x5x6xf64> {step.param = #step.param<"k", normal(1.0)>},
    %v: tensor<2x5x6xf64> {step.param = #step.param<"v", normal(1.0)>},
    %w_out: tensor<2x5x12xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.attention %q, %k, %v heads 4 kv_heads 2 head_dim 3 causal : (tensor<2x5x12xf64>, tensor<2x5x6xf64>, tensor<2x5x6xf64>) -> tensor<2x5x12xf64>
  %l = step.mul %y, %w_out : tensor<2x5x12xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x5x12xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// attention_mqa
func.func @attention_mqa(%q: tensor<1x3x6xf64> {step.param = #step.param<"q", normal(1.0)>},
    %k: tensor<1x4x2xf64> {step.param = #step.param<"k", normal(1.0)>},
    %v: tensor<1x4x2xf64> {step.param = #step.param<"v", normal(1.0)>},
    %w_out: tensor<1x3x6xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.attention %q, %k, %v heads 3 kv_heads 1 head_dim 2 {scale = 0.3 : f64} : (tensor<1x3x6xf64>, tensor<1x4x2xf64>, tensor<1x4x2xf64>) -> tensor<1x3x6xf64>
  %l = step.mul %y, %w_out : tensor<1x3x6xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<1x3x6xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// attention_mask: a bias-and--inf mask per batch entry, broadcast over the
// heads (row 2 of entry 1 masked whole: 0 and no gradient), GQA.
func.func @attention_mask(%q: tensor<2x5x12xf64> {step.param = #step.param<"q", normal(1.0)>},
    %k: tensor<2x5x6xf64> {step.param = #step.param<"k", normal(1.0)>},
    %v: tensor<2x5x6xf64> {step.param = #step.param<"v", normal(1.0)>},
    %w_out: tensor<2x5x12xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %m = step.constant dense<[[[[-0.731, 0xFF800000, 0.695, 0.528, -0.490], [0xFF800000, -0.009, -0.101, 0.303, 0xFF800000], [0.577, -0.812, -0.943, 0xFF800000, 0.672], [-0.134, 0.525, 0xFF800000, -0.996, -0.109], [0.443, 0xFF800000, -0.542, 0.891, 0.803]]], [[[0xFF800000, -0.939, -0.949, 0.083, 0xFF800000], [0.878, -0.238, -0.567, 0xFF800000, -0.156], [0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [-0.942, 0xFF800000, -0.557, -0.124, -0.008], [0xFF800000, -0.534, -0.538, -0.562, 0xFF800000]]]]> : tensor<2x1x5x5xf32>
  %y = step.attention %q, %k, %v mask %m heads 4 kv_heads 2 head_dim 3 : (tensor<2x5x12xf64>, tensor<2x5x6xf64>, tensor<2x5x6xf64>, tensor<2x1x5x5xf32>) -> tensor<2x5x12xf64>
  %l = step.mul %y, %w_out : tensor<2x5x12xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x5x12xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// moe: a router (softmax, top-2 of 3 experts) dispatching 6 tokens to two
// grouped products (one transposed, one not) around a tanh, combined by
// the gates: every parameter's gradient through the routing (the router's
// through the gates only; the choice itself is piecewise constant).
func.func @moe(%x: tensor<6x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %wr: tensor<3x4xf64> {step.param = #step.param<"wr", normal(1.0)>},
    %w1: tensor<3x5x4xf64> {step.param = #step.param<"w1", normal(1.0)>},
    %w2: tensor<3x5x4xf64> {step.param = #step.param<"w2", normal(1.0)>},
    %w_out: tensor<6x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %logits = step.matmul %x, %wr transpose_b : (tensor<6x4xf64>, tensor<3x4xf64>) -> tensor<6x3xf64>
  %probs = step.softmax %logits dim 1 : (tensor<6x3xf64>) -> tensor<6x3xf64>
  %gate, %expert = step.top_k %probs k 2 : (tensor<6x3xf64>) -> (tensor<6x2xf64>, tensor<6x2xi32>)
  %rows, %counts = step.moe_dispatch %x, %expert experts 3 : (tensor<6x4xf64>, tensor<6x2xi32>) -> (tensor<12x4xf64>, tensor<3xi32>)
  %h = step.grouped_matmul %rows, %w1, %counts transpose_b : (tensor<12x4xf64>, tensor<3x5x4xf64>, tensor<3xi32>) -> tensor<12x5xf64>
  %a = step.tanh %h : tensor<12x5xf64>
  %o = step.grouped_matmul %a, %w2, %counts : (tensor<12x5xf64>, tensor<3x5x4xf64>, tensor<3xi32>) -> tensor<12x4xf64>
  %y = step.moe_combine %o, %gate, %expert experts 3 : (tensor<12x4xf64>, tensor<6x2xf64>, tensor<6x2xi32>) -> tensor<6x4xf64>
  %l = step.mul %y, %w_out : tensor<6x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<6x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// moe in groups (expert parallelism's layout on one rank): 4 experts in 2
// groups, the rows in 2 blocks of 12, the products over [2, 2] counts (block
// b's expert j multiplied by w[j]).
func.func @moe_groups(%x: tensor<6x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %wr: tensor<4x4xf64> {step.param = #step.param<"wr", normal(1.0)>},
    %w1: tensor<2x5x4xf64> {step.param = #step.param<"w1", normal(1.0)>},
    %w2: tensor<2x5x4xf64> {step.param = #step.param<"w2", normal(1.0)>},
    %w_out: tensor<6x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %logits = step.matmul %x, %wr transpose_b : (tensor<6x4xf64>, tensor<4x4xf64>) -> tensor<6x4xf64>
  %probs = step.softmax %logits dim 1 : (tensor<6x4xf64>) -> tensor<6x4xf64>
  %gate, %expert = step.top_k %probs k 2 : (tensor<6x4xf64>) -> (tensor<6x2xf64>, tensor<6x2xi32>)
  %rows, %counts = step.moe_dispatch %x, %expert experts 4 groups 2 : (tensor<6x4xf64>, tensor<6x2xi32>) -> (tensor<24x4xf64>, tensor<4xi32>)
  %blocks = step.reshape %counts : tensor<4xi32> -> tensor<2x2xi32>
  %h = step.grouped_matmul %rows, %w1, %blocks transpose_b : (tensor<24x4xf64>, tensor<2x5x4xf64>, tensor<2x2xi32>) -> tensor<24x5xf64>
  %a = step.tanh %h : tensor<24x5xf64>
  %o = step.grouped_matmul %a, %w2, %blocks : (tensor<24x5xf64>, tensor<2x5x4xf64>, tensor<2x2xi32>) -> tensor<24x4xf64>
  %y = step.moe_combine %o, %gate, %expert experts 4 groups 2 : (tensor<24x4xf64>, tensor<6x2xf64>, tensor<6x2xi32>) -> tensor<6x4xf64>
  %l = step.mul %y, %w_out : tensor<6x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<6x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// moe with a capacity: 6 tokens in 2 sequences of 3, 4 experts in 2
// groups, at most 1 pair per expert and sequence (blocks of min(12, 2·2·1)
// = 4 rows): the dropped pairs carry no gradient, the kept ones theirs.
func.func @moe_capacity(%x: tensor<6x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %wr: tensor<4x4xf64> {step.param = #step.param<"wr", normal(1.0)>},
    %w1: tensor<2x5x4xf64> {step.param = #step.param<"w1", normal(1.0)>},
    %w_out: tensor<6x5xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %logits = step.matmul %x, %wr transpose_b : (tensor<6x4xf64>, tensor<4x4xf64>) -> tensor<6x4xf64>
  %probs = step.softmax %logits dim 1 : (tensor<6x4xf64>) -> tensor<6x4xf64>
  %gate, %expert = step.top_k %probs k 2 : (tensor<6x4xf64>) -> (tensor<6x2xf64>, tensor<6x2xi32>)
  %rows, %counts = step.moe_dispatch %x, %expert experts 4 groups 2 capacity 1 per 3 : (tensor<6x4xf64>, tensor<6x2xi32>) -> (tensor<8x4xf64>, tensor<4xi32>)
  %blocks = step.reshape %counts : tensor<4xi32> -> tensor<2x2xi32>
  %h = step.grouped_matmul %rows, %w1, %blocks transpose_b : (tensor<8x4xf64>, tensor<2x5x4xf64>, tensor<2x2xi32>) -> tensor<8x5xf64>
  %a = step.tanh %h : tensor<8x5xf64>
  %y = step.moe_combine %a, %gate, %expert experts 4 groups 2 capacity 1 per 3 : (tensor<8x5xf64>, tensor<6x2xf64>, tensor<6x2xi32>) -> tensor<6x5xf64>
  %l = step.mul %y, %w_out : tensor<6x5xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<6x5xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// embedding
func.func @embedding(%table: tensor<3x4xf64> {step.param = #step.param<"table", normal(1.0)>},
    %w_out: tensor<2x4x4xf64> {step.param = #step.param<"w_out", normal(1.0)>},
    %ids: tensor<2x4xi32> {step.input = "ids"}) -> tensor<f64> attributes {step.loss} {
  %y = step.embedding %table, %ids : (tensor<3x4xf64>, tensor<2x4xi32>) -> tensor<2x4x4xf64>
  %l = step.mul %y, %w_out : tensor<2x4x4xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x4x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// cross_entropy
func.func @cross_entropy(%x: tensor<2x3x5xf64> {step.param = #step.param<"x", normal(1.0)>},
    %targets: tensor<2x3xi32> {step.input = "targets"}) -> tensor<f64> attributes {step.loss} {
  %l = step.cross_entropy %x, %targets : (tensor<2x3x5xf64>, tensor<2x3xi32>) -> tensor<f64>
  return %l : tensor<f64>
}

// cross_entropy with every option (targets equal to 2 are not counted)
func.func @cross_entropy_options(%x: tensor<4x3x5xf64> {step.param = #step.param<"x", normal(1.0)>},
    %targets: tensor<4x3xi32> {step.input = "targets"}) -> tensor<f64> attributes {step.loss} {
  %l = step.cross_entropy %x, %targets ignore_index 2 label_smoothing 2.000000e-01 z_loss 1.000000e-01 : (tensor<4x3x5xf64>, tensor<4x3xi32>) -> tensor<f64>
  return %l : tensor<f64>
}

// tied embedding and head
func.func @tied(%wte: tensor<7x4xf64> {step.param = #step.param<"wte", normal(1.0)>},
    %tokens: tensor<2x3xi32> {step.input = "tokens"},
    %targets: tensor<2x3xi32> {step.input = "targets"}) -> tensor<f64> attributes {step.loss} {
  %x = step.embedding %wte, %tokens : (tensor<7x4xf64>, tensor<2x3xi32>) -> tensor<2x3x4xf64>
  %logits = step.matmul %x, %wte transpose_b : (tensor<2x3x4xf64>, tensor<7x4xf64>) -> tensor<2x3x7xf64>
  %l = step.cross_entropy %logits, %targets : (tensor<2x3x7xf64>, tensor<2x3xi32>) -> tensor<f64>
  return %l : tensor<f64>
}

// dropout (unkeyed: seed 0, step 0; the gradient draws the same mask)
func.func @dropout(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %y = step.dropout %x rate 5.000000e-01 stream 1 : (tensor<3x4xf64>) -> tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// pow: squares and cubes anywhere, a fractional power of a positive value
func.func @pow(%x: tensor<3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<3x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %sq = step.pow %x exponent 2.0 : tensor<3x4xf64>
  %cube = step.pow %x exponent 3.0 : tensor<3x4xf64>
  %e = step.exp %x : tensor<3x4xf64>
  %frac = step.pow %e exponent 1.5 : tensor<3x4xf64>
  %a = step.add %sq, %cube : tensor<3x4xf64>
  %y = step.add %a, %frac : tensor<3x4xf64>
  %l = step.mul %y, %w_out : tensor<3x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// select on comparisons: where(x < y, x·x, y), then a lower-triangular
// mask from two iotas keeps x·y below the diagonal and 0.5·x elsewhere
// (random normals: no element sits within a difference step of x = y)
func.func @select(%x: tensor<4x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %y: tensor<4x4xf64> {step.param = #step.param<"y", normal(1.0)>},
    %w_out: tensor<4x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %m = step.compare lt, %x, %y : tensor<4x4xf64>
  %sq = step.mul %x, %x : tensor<4x4xf64>
  %z = step.select %m, %sq, %y : tensor<4x4xi1>, tensor<4x4xf64>
  %row = step.iota dim 0 : tensor<4x4xi32>
  %col = step.iota dim 1 : tensor<4x4xi32>
  %below = step.compare gt, %row, %col : tensor<4x4xi32>
  %xy = step.mul %z, %y : tensor<4x4xf64>
  %half = step.constant dense<0.5> : tensor<4x4xf64>
  %hx = step.mul %x, %half : tensor<4x4xf64>
  %t = step.select %below, %xy, %hx : tensor<4x4xi1>, tensor<4x4xf64>
  %l = step.mul %t, %w_out : tensor<4x4xf64>
  %s = step.reduce_sum %l dims [0, 1] : (tensor<4x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}

// gather along the middle dimension: repeated indices (their gradients
// add) and one out of range (reads 0, takes nothing)
func.func @gather(%x: tensor<2x3x4xf64> {step.param = #step.param<"x", normal(1.0)>},
    %w_out: tensor<2x5x4xf64> {step.param = #step.param<"w_out", normal(1.0)>}) -> tensor<f64> attributes {step.loss} {
  %idx = step.constant dense<[[[0, 1, 2, 0], [2, 2, 2, 2], [1, 0, 1, 0], [0, 0, 0, 0], [2, 1, 7, 1]],
                              [[1, 1, 1, 1], [0, 2, 0, 2], [2, 0, 1, 2], [1, 2, 0, 1], [0, 0, 2, 2]]]> : tensor<2x5x4xi32>
  %g = step.gather %x, %idx dim 1 : (tensor<2x3x4xf64>, tensor<2x5x4xi32>) -> tensor<2x5x4xf64>
  %sq = step.mul %g, %g : tensor<2x5x4xf64>
  %l = step.mul %sq, %w_out : tensor<2x5x4xf64>
  %s = step.reduce_sum %l dims [0, 1, 2] : (tensor<2x5x4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}
