// Errors in parameter/input markings and in the loss function contract
// (StepAttrs.cpp, StepDialect.cpp).
// RUN: stepc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{unknown initialiser 'uniform', expected zeros, ones, normal or scaled_normal}}
func.func @param_unknown_init(%w: tensor<4xf32> {step.param = #step.param<"w", uniform(0.1)>}) {
  return
}

// -----

// expected-error @+1 {{expects a positive finite standard deviation, got -0.02}}
func.func @param_std(%w: tensor<4xf32> {step.param = #step.param<"w", normal(-0.02)>}) {
  return
}

// -----

// expected-error @+1 {{expects scaled_normal layers >= 1, got 0}}
func.func @param_layers(%w: tensor<4xf32> {step.param = #step.param<"w", scaled_normal(0.02, 0)>}) {
  return
}

// -----

// expected-error @+1 {{expects a non-empty parameter name}}
func.func @param_name(%w: tensor<4xf32> {step.param = #step.param<"", zeros>}) {
  return
}

// -----

// expected-error @+1 {{expects 'step.param' on argument #0 to be a #step.param, got "w"}}
func.func @param_not_param_attr(%w: tensor<4xf32> {step.param = "w"}) {
  return
}

// -----

// expected-error @+1 {{expects parameter argument #0 to be a statically shaped float tensor, got 'tensor<4xi32>'}}
func.func @param_integer(%w: tensor<4xi32> {step.param = #step.param<"w", zeros>}) {
  return
}

// -----

// expected-error @+1 {{expects parameter argument #0 to be a statically shaped float tensor, got 'tensor<?xf32>'}}
func.func @param_dynamic(%w: tensor<?xf32> {step.param = #step.param<"w", zeros>}) {
  return
}

// -----

// expected-error @+1 {{expects 'step.input' on argument #0 to be a non-empty string, got 3 : i64}}
func.func @input_not_string(%t: tensor<4xi32> {step.input = 3}) {
  return
}

// -----

// expected-error @+1 {{expects input argument #0 to be a statically shaped tensor, got 'tensor<*xi32>'}}
func.func @input_unranked(%t: tensor<*xi32> {step.input = "tokens"}) {
  return
}

// -----

// expected-error @+1 {{unknown step argument attribute 'step.parm'}}
func.func @arg_attr_typo(%w: tensor<4xf32> {step.parm = #step.param<"w", zeros>}) {
  return
}

// -----

// expected-error @+1 {{unknown step attribute 'step.los'}}
func.func @op_attr_typo() attributes {step.los} {
  return
}

// -----

// expected-error @+1 {{expects 'step.loss' to be a unit attribute}}
func.func @loss_not_unit() -> tensor<f32> attributes {step.loss = 1 : i32} {
  %0 = step.constant dense<0.0> : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// expected-error @+1 {{expects 'step.loss' on a function, got 'builtin.module'}}
module attributes {step.loss} {
}

// -----

// expected-error @+1 {{'func.func' op expects a loss function to return a scalar float tensor first, got 1 result(s), the first of type 'tensor<2xf32>'}}
func.func @loss_not_scalar(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}) -> tensor<2xf32> attributes {step.loss} {
  return %w : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op expects a loss function to return a scalar float tensor first, got 0 result(s)}}
func.func @loss_no_result() attributes {step.loss} {
  return
}

// -----

// An output besides the loss needs a name the runtime reads it by.
// expected-error @+1 {{'func.func' op expects output #1 of a loss function to be marked by a 'step.result = #step.result<output | metric, "name">' of a unique name}}
func.func @loss_unnamed_output(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}) -> (tensor<f32>, tensor<2xf32>) attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op expects output #1 of a loss function to be a static f32 tensor, got 'tensor<2xi32>'}}
func.func @loss_integer_output(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}, %t: tensor<2xi32> {step.input = "t"}) -> (tensor<f32>, tensor<2xi32> {step.result = #step.result<output, "t">}) attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l, %t : tensor<f32>, tensor<2xi32>
}

// -----

// expected-error @+1 {{'func.func' op expects a loss function to have a body}}
func.func private @loss_external(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}) -> tensor<f32> attributes {step.loss}

// -----

func.func @loss_unmarked_arg(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>},
                             // expected-error @+1 {{expects argument #1 of a loss function to be marked either 'step.param' or 'step.input'}}
                             %x: tensor<2xf32>) -> tensor<f32> attributes {step.loss} {
  %0 = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @loss_both_marks(
    // expected-error @+1 {{expects argument #0 of a loss function to be marked either 'step.param' or 'step.input'}}
    %w: tensor<2xf32> {step.param = #step.param<"w", zeros>, step.input = "w"}) -> tensor<f32> attributes {step.loss} {
  %0 = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @loss_duplicate_names(%a: tensor<2xf32> {step.param = #step.param<"w", zeros>},
                                // expected-error @+1 {{expects unique parameter names, 'w' names arguments #0 and #1}}
                                %b: tensor<2xf32> {step.param = #step.param<"w", ones>}) -> tensor<f32> attributes {step.loss} {
  %0 = step.reduce_sum %a dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// expected-error @+1 {{expects parameter argument #0 to have every dim >= 1 and at most 2^40 elements, got 'tensor<0x4xf32>'}}
func.func @param_empty(%w: tensor<0x4xf32> {step.param = #step.param<"w", normal(0.02)>}) {
  return
}

// -----

// Two outputs of one name: the runtime could not tell them apart.
// expected-error @+1 {{'func.func' op expects output #2 of a loss function to be marked by a 'step.result = #step.result<output | metric, "name">' of a unique name}}
func.func @loss_duplicate_output(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}) -> (tensor<f32>, tensor<2xf32> {step.result = #step.result<output, "o">}, tensor<2xf32> {step.result = #step.result<output, "o">}) attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l, %w, %w : tensor<f32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// A loss function's output is role `output`, not another role.
// expected-error @+1 {{'func.func' op expects output #1 of a loss function to be marked by a 'step.result = #step.result<output | metric, "name">' of a unique name}}
func.func @loss_output_role(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}) -> (tensor<f32>, tensor<2xf32> {step.result = #step.result<grad, "w">}) attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<2xf32>
}

// -----

// expected-error @+1 {{expects a block index >= 0, got -2}}
func.func @param_negative_block(%w: tensor<2xf32> {step.param = #step.param<"w", zeros, block -2>}) -> tensor<f32> attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// `frozen` comes after the block marker, once.
// expected-error @+1 {{unexpected 'block': after the initialiser come, each optional and in this order, 'block N', 'frozen', 'weight_decay W', 'lr_scale S'}}
func.func @param_frozen_first(%w: tensor<2xf32> {step.param = #step.param<"w", zeros, frozen, block 0>}) -> tensor<f32> attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{unexpected 'frozen'}}
func.func @param_frozen_twice(%w: tensor<2xf32> {step.param = #step.param<"w", zeros, frozen, frozen>}) -> tensor<f32> attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{unexpected 'trainable'}}
func.func @param_unknown_marker(%w: tensor<2xf32> {step.param = #step.param<"w", zeros, trainable>}) -> tensor<f32> attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The memory plan's attributes (step-plan-memory writes them).
// expected-error @+1 {{expects 'step.memory_plan' to be a dictionary on a function}}
func.func @plan_not_dict() attributes {step.memory_plan = 3 : i64} {
  return
}

// -----

func.func @buffer_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'step.buffer' to be an array<i64> of one index (or -1) per result}}
  %y = step.exp %x {step.buffer = array<i64: 0, 1>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @in_arg_negative(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'step.in_arg' to be an array<i64> of one index (or -1) per result}}
  %y = step.exp %x {step.in_arg = array<i64: -2>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Names become file names (<name>.npy): no path separators, '..' or control
// characters.
// expected-error @+1 {{expects a parameter name that can be a file name}}
func.func @param_path(%w: tensor<4xf32> {step.param = #step.param<"../w", zeros>}) {
  return
}


// -----

// expected-error @+1 {{expects the seed argument #0 to be a scalar i32 tensor, got 'tensor<f32>'}}
func.func @hyper_seed(%s: tensor<f32> {step.hyper = #step.hyper<seed>}) {
  return
}

// -----

func.func @rank_rows_not_dropout(%x: tensor<4xf32>) {
  // expected-error @+1 {{expects 'step.rank_rows' to be a positive row count on a step.dropout or a part count on a scalar count of targets}}
  %0 = step.neg %x {step.rank_rows = 2 : i64} : tensor<4xf32>
  return
}

// -----

// A parameter's own optimizer settings: in order, finite, not negative.
// expected-error @+1 {{unexpected 'weight_decay'}}
func.func @param_lr_scale_first(%w: tensor<2xf32> {step.param = #step.param<"w", zeros, lr_scale 0.1, weight_decay 0.0>}) -> tensor<f32> attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{expects a finite weight_decay >= 0, got -0.5}}
func.func @param_negative_decay(%w: tensor<2xf32> {step.param = #step.param<"w", zeros, weight_decay -0.5>}) -> tensor<f32> attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{expects a finite lr_scale >= 0, got -1.0}}
func.func @param_negative_lr_scale(%w: tensor<2xf32> {step.param = #step.param<"w", zeros, lr_scale -1.0>}) -> tensor<f32> attributes {step.loss} {
  %l = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @computed_for_empty(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'step.computed_for' to be a block's name on an op with results}}
  %y = step.exp %x {step.computed_for = ""} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @computed_for_not_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'step.computed_for' to be a block's name on an op with results}}
  %y = step.exp %x {step.computed_for = 3 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @run_block_off_call(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'step.run_block' to be a string on a func.call}}
  %y = step.exp %x {step.run_block = "block 0"} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'step.pp_stage' to be a pipeline rank on a module nested in the model's}}
func.func @pp_stage_on_function() attributes {step.pp_stage = 0 : i64} {
  return
}

// -----

module {
  // expected-error @+1 {{expects 'step.pp_stage' to be a pipeline rank on a module nested in the model's}}
  module @stage0 attributes {step.pp_stage = -1 : i64} {
  }
}
