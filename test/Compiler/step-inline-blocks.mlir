// step-inline-blocks puts each call of a block function back in its step:
// the call's plan on the body's ops (step.run_plan), each op marked with
// its run, the step with the function of each run; the functions go.
// RUN: stepc-opt %s -split-input-file -step-inline-blocks -verify-diagnostics -o - | FileCheck %s

// CHECK-LABEL: func.func @step(
// CHECK-SAME: step.block_functions = array<i64: 0, 0>
// CHECK-NEXT: %[[A:.*]] = step.add %arg0, %arg0 {step.block_run = 0 : i64, step.buffer = array<i64: 3>} : tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = step.add %[[A]], %[[A]] {step.block_run = 1 : i64, step.buffer = array<i64: 5>} : tensor<4xf32>
// CHECK-NEXT: return %[[B]]
// CHECK-NOT: block0
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {step.train_step} {
  %y = call @block0(%x) {step.run_plan = [{loc = [loc("m.mlir":3:4)], step.buffer = array<i64: 3>}]} : (tensor<4xf32>) -> tensor<4xf32>
  %z = call @block0(%y) {step.run_plan = [{loc = [loc("m.mlir":5:4)], step.buffer = array<i64: 5>}]} : (tensor<4xf32>) -> tensor<4xf32>
  return %z : tensor<4xf32>
}
func.func private @block0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {step.block_function = 0 : i64} {
  %b = step.add %a, %a : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {step.train_step} {
  // expected-error @+1 {{has no step.run_plan entry per op of block0}}
  %y = call @block0(%x) {step.run_plan = []} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @block0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {step.block_function = 0 : i64} {
  %b = step.add %a, %a : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'step.block_function' to be an integer >= 0 on a private function}}
func.func @block0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {step.block_function = 0 : i64} {
  return %a : tensor<4xf32>
}

// -----

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'step.run_plan' to be an array of dictionaries on a func.call}}
  %b = step.add %a, %a {step.run_plan = [1]} : tensor<4xf32>
  return %b : tensor<4xf32>
}


// -----

func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {step.train_step} {
  // expected-error @+1 {{calls block0, a block function without a body of ops and no calls}}
  %y = call @block0(%x) {step.run_plan = []} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @block0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {step.block_function = 0 : i64}

// -----

func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {step.train_step} {
  // expected-error @+1 {{calls block0, a block function without a body of ops and no calls}}
  %y = call @block0(%x) {step.run_plan = [{}]} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @block0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {step.block_function = 0 : i64} {
  %b = call @block0(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {step.train_step} {
  // expected-error @+1 {{has 'step.phase' in its step.run_plan, not a per-call attribute}}
  %y = call @block0(%x) {step.run_plan = [{step.phase = 1 : i64}]} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @block0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {step.block_function = 0 : i64} {
  %b = step.add %a, %a : tensor<4xf32>
  return %b : tensor<4xf32>
}
