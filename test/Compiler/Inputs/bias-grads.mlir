// Two weight gradients with their bias gradients beside them: the output
// gradient summed itself (fp32) and through its widening (bf16)
// (test/Compiler/bias-grad-interp.test).
func.func @step(%dy: tensor<2x8x32xf32>, %x: tensor<16x8xf32>, %dyh: tensor<2x8x32xbf16>, %xh: tensor<16x8xbf16>)
    -> (tensor<32x8xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<32xf32>) attributes {step.train_step} {
  %db0 = step.reduce_sum %dy dims [0, 1] : (tensor<2x8x32xf32>) -> tensor<32xf32>
  %r0 = step.reshape %dy : tensor<2x8x32xf32> -> tensor<16x32xf32>
  %dw0 = step.matmul %r0, %x transpose_a : (tensor<16x32xf32>, tensor<16x8xf32>) -> tensor<32x8xf32>
  %w1 = step.convert %dyh : tensor<2x8x32xbf16> -> tensor<2x8x32xf32>
  %db1 = step.reduce_sum %w1 dims [0, 1] : (tensor<2x8x32xf32>) -> tensor<32xf32>
  %r1 = step.reshape %dyh : tensor<2x8x32xbf16> -> tensor<16x32xbf16>
  %p1 = step.matmul %r1, %xh transpose_a : (tensor<16x32xbf16>, tensor<16x8xbf16>) -> tensor<32x8xbf16>
  %dw1 = step.convert %p1 : tensor<32x8xbf16> -> tensor<32x8xf32>
  return %dw0, %db0, %dw1, %db1 : tensor<32x8xf32>, tensor<32xf32>, tensor<32x8xf32>, tensor<32xf32>
}
