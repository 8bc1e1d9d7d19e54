// RUN: stepc-opt %s -split-input-file -verify-diagnostics

// step.balance: a frozen f32 routing bias of rank 1, moved by a metric of
// the loss function of its type, at a rate > 0.

// expected-error @+1 {{expects 'step.balance' on argument #0 to be {metric = "name", rate = R > 0} on a frozen f32 parameter of rank 1}}
func.func @loss(%b: tensor<4xf32> {step.param = #step.param<"b", zeros>, step.balance = {metric = "load", rate = 1.0e-3 : f64}},
                %x: tensor<2x4xf32> {step.input = "x"})
    -> (tensor<f32>, tensor<4xf32> {step.result = #step.result<metric, "load">}) attributes {step.loss} {
  %s = step.reduce_mean %x dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  %m = step.reduce_mean %x dims [0] : (tensor<2x4xf32>) -> tensor<4xf32>
  return %s, %m : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'step.balance' on argument #0 to be {metric = "name", rate = R > 0} on a frozen f32 parameter of rank 1}}
func.func @loss(%b: tensor<4xf32> {step.param = #step.param<"b", zeros, frozen>, step.balance = {metric = "load", rate = 0.0 : f64}},
                %x: tensor<2x4xf32> {step.input = "x"})
    -> (tensor<f32>, tensor<4xf32> {step.result = #step.result<metric, "load">}) attributes {step.loss} {
  %s = step.reduce_mean %x dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  %m = step.reduce_mean %x dims [0] : (tensor<2x4xf32>) -> tensor<4xf32>
  return %s, %m : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op balances argument #0 by metric 'loads', which is no metric result of its type}}
func.func @loss(%b: tensor<4xf32> {step.param = #step.param<"b", zeros, frozen>, step.balance = {metric = "loads", rate = 1.0e-3 : f64}},
                %x: tensor<2x4xf32> {step.input = "x"})
    -> (tensor<f32>, tensor<4xf32> {step.result = #step.result<metric, "load">}) attributes {step.loss} {
  %s = step.reduce_mean %x dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  %m = step.reduce_mean %x dims [0] : (tensor<2x4xf32>) -> tensor<4xf32>
  return %s, %m : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op balances argument #0 by metric 'load', which is no metric result of its type}}
func.func @loss(%b: tensor<4xf32> {step.param = #step.param<"b", zeros, frozen>, step.balance = {metric = "load", rate = 1.0e-3 : f64}},
                %x: tensor<2x4xf32> {step.input = "x"})
    -> (tensor<f32>, tensor<2xf32> {step.result = #step.result<metric, "load">}) attributes {step.loss} {
  %s = step.reduce_mean %x dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  %m = step.reduce_mean %x dims [1] : (tensor<2x4xf32>) -> tensor<2xf32>
  return %s, %m : tensor<f32>, tensor<2xf32>
}
