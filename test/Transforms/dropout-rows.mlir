// step-rebind-batch splitting a dropout's rows: marked for the pass that
// knows each part's index; refused where the model names the first row.
// RUN: stepc-opt %s --step-rebind-batch="ranks=2" -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @split
// CHECK: step.dropout {{.*}} {step.rank_rows = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
func.func @split(%w: tensor<8xf32> {step.param = #step.param<"w", normal(1.0)>},
                 %x: tensor<4x8xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %b = step.broadcast %w : tensor<8xf32> -> tensor<4x8xf32>
  %h = step.mul %x, %b : tensor<4x8xf32>
  %d = step.dropout %h rate 0.5 stream 0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = step.reduce_mean %d dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @named_first_row(%w: tensor<8xf32> {step.param = #step.param<"w", normal(1.0)>},
                           %x: tensor<4x8xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %b = step.broadcast %w : tensor<8xf32> -> tensor<4x8xf32>
  %h = step.mul %x, %b : tensor<4x8xf32>
  %first = step.constant dense<0> : tensor<i32>
  // expected-error @+1 {{'step.dropout' op draws 'rows from' a value of the model: its rows cannot be split across data-parallel ranks or micro-batches}}
  %d = step.dropout %h rows from %first rate 0.5 stream 0 : (tensor<4x8xf32>, tensor<i32>) -> tensor<4x8xf32>
  %s = step.reduce_mean %d dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
