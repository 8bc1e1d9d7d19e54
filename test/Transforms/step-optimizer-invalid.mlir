// RUN: stepc-opt %s -split-input-file -step-optimizer -verify-diagnostics
// RUN: not stepc-opt %s -step-autodiff -step-optimizer="beta1=1.5" -o %t.discard 2>&1 | FileCheck %s --check-prefix=OPTS
// OPTS: invalid step-optimizer options: betas must be in [0, 1)
// RUN: not stepc-opt %s -step-autodiff -step-optimizer="algorithm=muon replica-axis=0" -o %t.discard 2>&1 | FileCheck %s --check-prefix=REPLICA
// REPLICA: invalid step-optimizer options: replica-axis=0 is not an axis of the mesh @world (the module has none)

// expected-error @+1 {{no function is marked 'step.gradient' (run step-autodiff first)}}
module {
  func.func @loss(%w: tensor<2xf32> {step.param = #step.param<"w", zeros>}) -> tensor<f32> attributes {step.loss} {
    %0 = step.reduce_sum %w dims [0] : (tensor<2xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
