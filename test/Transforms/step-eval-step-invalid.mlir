// RUN: stepc-opt %s -step-eval-step -verify-diagnostics -split-input-file

// A training step must name the result the eval step returns.
// expected-error @+1 {{'func.func' op has no result named 'loss' to evaluate}}
func.func @bad_train_step(%w: tensor<2xf32>) -> tensor<2xf32> attributes {step.train_step} {
  return %w : tensor<2xf32>
}
