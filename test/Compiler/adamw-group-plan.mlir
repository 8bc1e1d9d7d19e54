// A multi-tensor AdamW writes each update over the parameter and moments
// it replaces (the in-place rule of step.adamw, read through the group's
// body): its results live in arguments 0, 2, 3 and 4, 6, 7; a gradient made
// in the step is an arena buffer, read in place by nothing.
// RUN: stepc-opt %s --step-plan-memory=target=cuda | FileCheck %s
// CHECK: step.neg {{.*}}step.buffer = array<i64: 0>
// CHECK: stepk.adamw_group
// CHECK: step.buffer = array<i64: -1, -1, -1, -1, -1, -1>, step.in_arg = array<i64: 0, 2, 3, 4, 6, 7>
func.func @step(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>,
                %q: tensor<4xf32>, %h: tensor<4xf32>, %n: tensor<4xf32>, %w: tensor<4xf32>,
                %lr: tensor<f32>, %t: tensor<f32>, %s: tensor<f32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    attributes {step.train_step} {
  %gq = step.neg %h : tensor<4xf32>
  %0:6 = stepk.adamw_group %p, %g, %m, %v, %q, %gq, %n, %w, %lr, %t, %s : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %d: tensor<4xf32>, %e: tensor<4xf32>, %f: tensor<4xf32>, %i: tensor<4xf32>, %j: tensor<4xf32>, %l: tensor<f32>, %k: tensor<f32>, %x: tensor<f32>):
    %1:3 = step.adamw %a, %b, %c, %d, %l, %k, %x {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    %2:3 = step.adamw %e, %f, %i, %j, %l, %k, %x {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    stepk.yield %1#0, %1#1, %1#2, %2#0, %2#1, %2#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  return %0#0, %0#1, %0#2, %0#3, %0#4, %0#5 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
