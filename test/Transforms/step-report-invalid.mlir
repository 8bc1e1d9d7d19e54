// RUN: stepc-opt %s -split-input-file -step-report -verify-diagnostics -o %t.discard

// An op the cost table does not know is an error, not a silent zero.
func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}) -> tensor<f32> attributes {step.loss} {
  // expected-error @+1 {{'arith.addf' op has no FLOP rule}}
  %0 = arith.addf %w, %w : tensor<2xf32>
  %1 = step.reduce_sum %0 dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// expected-error @+1 {{no function is marked 'step.loss'}}
module {
  func.func @not_a_loss(%w: tensor<2xf32>) -> tensor<2xf32> {
    return %w : tensor<2xf32>
  }
}
