// Verifier errors of the backward and optimizer ops (StepGradOps.cpp) and of
// pad; labels name the checks.
// RUN: stepc-opt %s -split-input-file -verify-diagnostics

func.func @pad_c1(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'step.pad' op expects 2 low and high paddings, got 1 and 2}}
  %0 = step.pad %x low [1] high [0, 1] : (tensor<2x3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @pad_c2(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'step.pad' op expects non-negative paddings, got -1 and 0 in dimension 1}}
  %0 = step.pad %x low [0, -1] high [0, 0] : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @grad_c1(%dy: tensor<2x3xf32>, %y: tensor<2x4xf32>) {
  // expected-error @+1 {{'step.softmax_grad' op expects a gradient of type 'tensor<2x4xf32>', got 'tensor<2x3xf32>'}}
  %0 = step.softmax_grad %dy, %y dim 1 : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @log_softmax_grad_c2(%dy: tensor<2x4xbf16>, %y: tensor<2x4xf32>) {
  // expected-error @+1 {{'step.log_softmax_grad' op expects a gradient of type 'tensor<2x4xf32>', got 'tensor<2x4xbf16>'}}
  %0 = step.log_softmax_grad %dy, %y dim 1 : (tensor<2x4xbf16>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @log_softmax_grad_c1(%dy: tensor<2x4xf32>, %y: tensor<2x4xf32>) {
  // expected-error @+1 {{'step.log_softmax_grad' op expects dim in [0, 2), got 2}}
  %0 = step.log_softmax_grad %dy, %y dim 2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @grad_c1_reduce_max(%dy: tensor<3xf32>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'step.reduce_max_grad' op expects a gradient of type 'tensor<2xf32>', got 'tensor<3xf32>'}}
  %0 = step.reduce_max_grad %dy, %x dims [1] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @grad_c1_layer_norm(%dy: tensor<2x4xf32>, %x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'step.layer_norm_grad' op expects a gradient of type 'tensor<2x8xf32>', got 'tensor<2x4xf32>'}}
  %0:3 = step.layer_norm_grad %dy, %x, %w : (tensor<2x4xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @grad_norm_c2(%dy: tensor<2x8xf32>, %x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'step.rms_norm_grad' op expects weight of type 'tensor<8xf32>', got 'tensor<4xf32>'}}
  %0:2 = step.rms_norm_grad %dy, %x, %w : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<4xf32>) -> (tensor<2x8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @grad_attention(%do: tensor<2x8x8xf32>, %q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'step.attention_grad' op expects a gradient of type 'tensor<2x8x16xf32>', got 'tensor<2x8x8xf32>'}}
  %0:3 = step.attention_grad %do, %q, %q, %q heads 4 kv_heads 4 head_dim 4 causal : (tensor<2x8x8xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  return
}

// -----

func.func @grad_attention_c4(%q: tensor<2x8x16xf32>, %k: tensor<2x8x12xf32>) {
  // expected-error @+1 {{'step.attention_grad' op expects heads (4) to be a multiple of kv_heads (3)}}
  %0:3 = step.attention_grad %q, %q, %k, %k heads 4 kv_heads 3 head_dim 4 causal : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x12xf32>, tensor<2x8x12xf32>)
  return
}

// -----

func.func @grad_cross_entropy(%dl: tensor<f32>, %l: tensor<2x8xf32>, %t: tensor<3xi32>) {
  // expected-error @+1 {{'step.cross_entropy_grad' op expects targets of shape [...] for logits [..., V], got 'tensor<3xi32>' for 'tensor<2x8xf32>'}}
  %0 = step.cross_entropy_grad %dl, %l, %t : (tensor<f32>, tensor<2x8xf32>, tensor<3xi32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @embedding_grad_c1(%dy: tensor<2x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{'step.embedding_grad' op expects a gradient of shape [ids..., D], got 'tensor<2x8xf32>' for ids 'tensor<2x4xi32>'}}
  %0 = step.embedding_grad %dy, %ids num_embeddings 5 : (tensor<2x8xf32>, tensor<2x4xi32>) -> tensor<5x8xf32>
  return
}

// -----

func.func @adamw_c1(%p: tensor<4xf32>, %g: tensor<5xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'step.adamw' op expects gradient and moments of the parameter's type 'tensor<4xf32>', got 'tensor<5xf32>'}}
  %0:3 = step.adamw %p, %g, %p, %p, %s, %s, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_c2(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'step.adamw' op expects betas in [0, 1), got 9.000000e-01 and 1.000000e+00}}
  %0:3 = step.adamw %p, %p, %p, %p, %s, %s, %s {beta1 = 0.9 : f64, beta2 = 1.0 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_c3(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'step.adamw' op expects a positive epsilon and a non-negative weight decay}}
  %0:3 = step.adamw %p, %p, %p, %p, %s, %s, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 0.0 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// expected-error @+1 {{expects 'step.hyper' on argument #0 to be a #step.hyper}}
func.func @hyper_name(%lr: tensor<f32> {step.hyper = "lr"}) {
  return
}

// -----

// expected-error @+2 {{expected ::stepc::step::Hyper to be one of: lr, step}}
// expected-error @+1 {{failed to parse Step_HyperAttr parameter 'value'}}
func.func @hyper_kind(%lr: tensor<f32> {step.hyper = #step.hyper<momentum>}) {
  return
}

// -----

// expected-error @+1 {{expects hyperparameter argument #0 to be a scalar float tensor, got 'tensor<2xf32>'}}
func.func @hyper_shape(%lr: tensor<2xf32> {step.hyper = #step.hyper<lr>}) {
  return
}

// -----

// expected-error @+1 {{expects 'step.state' on argument #0 to be a #step.state}}
func.func @state_string(%m: tensor<2xf32> {step.state = "exp_avg.w"}) {
  return
}

// -----

// expected-error @+1 {{expects the name of the parameter the state belongs to}}
func.func @state_name(%m: tensor<2xf32> {step.state = #step.state<exp_avg, "">}) {
  return
}

// -----

// expected-error @+1 {{unknown step result attribute 'step.reslt'}}
func.func @result_attr_typo() -> (tensor<f32> {step.reslt = "loss"}) {
  %0 = step.constant dense<0.0> : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A result's role is typed: a string is not one.
// expected-error @+1 {{expects 'step.result' on result #0 to be a #step.result<role[, "name"]>, got "loss"}}
func.func @result_attr_string() -> (tensor<f32> {step.result = "loss"}) {
  %0 = step.constant dense<0.0> : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// expected-error @+1 {{unknown result role 'gradient', expected loss, grad_norm, logits, grad, param, exp_avg, exp_avg_sq, output or metric}}
func.func @result_role_unknown() -> (tensor<f32> {step.result = #step.result<gradient, "w">}) {
  %0 = step.constant dense<0.0> : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// expected-error @+1 {{expects a non-empty name for result role 'grad'}}
func.func @result_role_empty_name() -> (tensor<f32> {step.result = #step.result<grad, "">}) {
  %0 = step.constant dense<0.0> : tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @sgd_types(%p: tensor<4xf32>, %g: tensor<5xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'step.sgd' op expects gradient and momentum buffer of the parameter's type 'tensor<4xf32>', got 'tensor<5xf32>'}}
  %0:2 = step.sgd %p, %g, %p, %s, %s {momentum = 0.9 : f64, nesterov = false, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_momentum(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'step.sgd' op expects a momentum in [0, 1) and a non-negative weight decay}}
  %0:2 = step.sgd %p, %p, %p, %s, %s {momentum = 1.0 : f64, nesterov = false, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_nesterov(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'step.sgd' op expects a momentum > 0 with nesterov}}
  %0:2 = step.sgd %p, %p, %p, %s, %s {momentum = 0.0 : f64, nesterov = true, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @lion_types(%p: tensor<4xf32>, %m: tensor<4xf64>, %s: tensor<f32>) {
  // expected-error @+1 {{'step.lion' op expects gradient and moment of the parameter's type 'tensor<4xf32>', got 'tensor<4xf64>'}}
  %0:2 = step.lion %p, %p, %m, %s, %s {beta1 = 0.9 : f64, beta2 = 0.99 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf64>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @lion_betas(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'step.lion' op expects betas in [0, 1) and a non-negative weight decay}}
  %0:2 = step.lion %p, %p, %p, %s, %s {beta1 = 0.9 : f64, beta2 = 0.99 : f64, weight_decay = -0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}
