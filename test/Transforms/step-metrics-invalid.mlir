// RUN: stepc-opt %s -split-input-file "-step-rebind-batch=batch=4 ranks=2" -verify-diagnostics

// A metric with the batch's rows cannot be averaged over the ranks' parts:
// per-row values are an output.
// expected-error @+1 {{metric 'rows' has the batch's rows: a metric is a measure of the whole batch (per-row values are an output)}}
func.func @loss(%w: tensor<4x4xf32> {step.param = #step.param<"w", normal(1.0)>},
                %x: tensor<4x4xf32> {step.input = "x"})
    -> (tensor<f32>, tensor<4xf32> {step.result = #step.result<metric, "rows">})
    attributes {step.loss} {
  %a = step.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = step.reduce_sum %a dims [1] : (tensor<4x4xf32>) -> tensor<4xf32>
  %s = step.reduce_mean %r dims [0] : (tensor<4xf32>) -> tensor<f32>
  return %s, %r : tensor<f32>, tensor<4xf32>
}

// -----

// An output (not a metric) may: each rank returns its rows.
func.func @loss(%w: tensor<4x4xf32> {step.param = #step.param<"w", normal(1.0)>},
                %x: tensor<4x4xf32> {step.input = "x"})
    -> (tensor<f32>, tensor<4xf32> {step.result = #step.result<output, "rows">})
    attributes {step.loss} {
  %a = step.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = step.reduce_sum %a dims [1] : (tensor<4x4xf32>) -> tensor<4xf32>
  %s = step.reduce_mean %r dims [0] : (tensor<4xf32>) -> tensor<f32>
  return %s, %r : tensor<f32>, tensor<4xf32>
}
