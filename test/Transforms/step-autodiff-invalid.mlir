// RUN: stepc-opt %s -split-input-file -step-autodiff -verify-diagnostics

// An op on the path from a parameter to the loss without a rule.
func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}) -> tensor<f32> attributes {step.loss} {
  // expected-error @+1 {{'arith.addf' op has no autodiff rule}}
  %0 = arith.addf %w, %w : tensor<2xf32>
  %1 = step.reduce_sum %0 dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Backward ops have no rules of their own: no second derivatives.
func.func @loss(%x: tensor<2xf32> {step.param = #step.param<"x", normal(1.0)>}) -> tensor<f32> attributes {step.loss} {
  // expected-error @+1 {{'step.relu_grad' op has no autodiff rule}}
  %0 = step.relu_grad %x, %x : tensor<2xf32>
  %1 = step.reduce_sum %0 dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// expected-error @+1 {{no function is marked 'step.loss'}}
module {
}

// -----

// A loss of inputs only has nothing to differentiate (and no training step
// to build): an error at the loss, as stepc reports it.
// expected-error @+1 {{'func.func' op has no parameters (no argument marked 'step.param'): nothing to train}}
func.func @inputs_only(%x: tensor<4xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %s = step.reduce_sum %x dims [0] : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Differentiating twice is an error (it would add a second gradient).
func.func @twice(%x: tensor<4xf32> {step.param = #step.param<"x", normal(1.0)>}) -> tensor<f32> attributes {step.loss} {
  %s = step.reduce_sum %x dims [0] : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
// expected-error @+1 {{'func.func' op is already a gradient function: step-autodiff runs once}}
func.func @twice_grad(%x: tensor<4xf32>) -> tensor<f32> attributes {step.gradient = @twice} {
  %s = step.reduce_sum %x dims [0] : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Every parameter frozen: nothing to train.
// expected-error @+1 {{'func.func' op has only frozen parameters: nothing to train}}
func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", zeros, frozen>}) -> tensor<f32> attributes {step.loss} {
  %0 = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A parameter the loss does not depend on (here: only through a mask) is
// frozen with a warning at its argument.
// expected-warning @+2 {{parameter 'gate' does not affect the loss: it is held but not trained (frozen), as PyTorch's optimizers skip a parameter without a gradient}}
func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", normal(1.0)>},
                %gate: tensor<2xf32> {step.param = #step.param<"gate", zeros>}) -> tensor<f32> attributes {step.loss} {
  %m = step.compare gt, %gate, %w : tensor<2xf32>
  %mf = step.convert %m : tensor<2xi1> -> tensor<2xf32>
  %y = step.mul %w, %mf : tensor<2xf32>
  %0 = step.reduce_sum %y dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A loss that depends on none of its parameters: nothing to train.
// expected-error @+1 {{'func.func' op has a loss that depends on none of its parameters: nothing to train}}
func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>},
                %x: tensor<2xf32> {step.input = "x"}) -> tensor<f32> attributes {step.loss} {
  %0 = step.reduce_sum %x dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// An attention mask computed from a trained parameter (a learned bias) would
// need the gradient no rule builds: refused, not trained as a constant.
func.func @learned_mask(%q: tensor<1x4x8xf32> {step.param = #step.param<"q", normal(1.0)>},
    %bias: tensor<1x2x4x4xf32> {step.param = #step.param<"bias", zeros>}) -> tensor<f32> attributes {step.loss} {
  // expected-error @+1 {{'step.attention' op has a mask computed from a trained parameter: stepc builds no gradient for attention's mask (stop its gradient, or write the biased softmax op by op)}}
  %y = step.attention %q, %q, %q mask %bias heads 2 kv_heads 2 head_dim 4 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x8xf32>
  %s = step.reduce_sum %y dims [0, 1, 2] : (tensor<1x4x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
