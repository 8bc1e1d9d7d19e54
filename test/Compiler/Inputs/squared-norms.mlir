// The gradient clipping's squared norm of three gradients, as step-optimizer
// builds it (test/Compiler/squared-norms-interp.test).
func.func @step(%g0: tensor<4x8xf32>, %g1: tensor<8xf32>, %g2: tensor<2x3x5xf32>) -> tensor<f32>
    attributes {step.train_step} {
  %zero = step.constant dense<0.0> : tensor<f32>
  %q0 = step.mul %g0, %g0 : tensor<4x8xf32>
  %s0 = step.reduce_sum %q0 dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  %t0 = step.add %zero, %s0 : tensor<f32>
  %q1 = step.mul %g1, %g1 : tensor<8xf32>
  %s1 = step.reduce_sum %q1 dims [0] : (tensor<8xf32>) -> tensor<f32>
  %t1 = step.add %t0, %s1 : tensor<f32>
  %q2 = step.mul %g2, %g2 : tensor<2x3x5xf32>
  %s2 = step.reduce_sum %q2 dims [0, 1, 2] : (tensor<2x3x5xf32>) -> tensor<f32>
  %t2 = step.add %t1, %s2 : tensor<f32>
  %norm = step.sqrt %t2 : tensor<f32>
  return %norm : tensor<f32>
}
