// Two AdamW updates with different weight decay (test/Compiler/adamw-group-interp.test).
func.func @step(%w: tensor<4x4xf32>, %gw: tensor<4x4xf32>, %mw: tensor<4x4xf32>, %vw: tensor<4x4xf32>,
                %b: tensor<4xf32>, %gb: tensor<4xf32>, %mb: tensor<4xf32>, %vb: tensor<4xf32>,
 %x: tensor<f32>)
    -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    attributes {step.train_step} {
  %lr = step.constant dense<1.0e-02> : tensor<f32>
  %t = step.constant dense<3.0> : tensor<f32>
  %s = step.constant dense<0.5> : tensor<f32>
  %vw2 = step.mul %vw, %vw : tensor<4x4xf32>
  %vb2 = step.mul %vb, %vb : tensor<4xf32>
  %p0, %m0, %v0 = step.adamw %w, %gw, %mw, %vw2, %lr, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.1 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  %p1, %m1, %v1 = step.adamw %b, %gb, %mb, %vb2, %lr, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-08 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %p0, %m0, %v0, %p1, %m1, %v1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
