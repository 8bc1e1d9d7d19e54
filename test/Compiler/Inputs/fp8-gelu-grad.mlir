// fp8-output-grad.mlir where the output gradient is the GELU's gradient of
// bf16 values (the MLP's first product's, in a GPT)
// (test/Compiler/fp8-packed-interp.test).
func.func @step(%g16: tensor<2x128x256xbf16>, %pre16: tensor<2x128x256xbf16>, %w: tensor<256x128xf32>, %x: tensor<256x128xf32>)
    -> (tensor<2x128x128xf32>, tensor<256x128xf32>, tensor<256xf32>) attributes {step.train_step} {
  %g = step.convert %g16 : tensor<2x128x256xbf16> -> tensor<2x128x256xf32>
  %pre = step.convert %pre16 : tensor<2x128x256xbf16> -> tensor<2x128x256xf32>
  %dy = step.gelu_grad %g, %pre : tensor<2x128x256xf32>
  %rows = step.quantize_fp8 %dy format e5m2 tile [1, 128] : tensor<2x128x256xf32>
  %rows16 = step.convert %rows : tensor<2x128x256xf32> -> tensor<2x128x256xbf16>
  %flat = step.reshape %dy : tensor<2x128x256xf32> -> tensor<256x256xf32>
  %cols = step.quantize_fp8 %flat format e5m2 tile [128, 1] : tensor<256x256xf32>
  %cols16 = step.convert %cols : tensor<256x256xf32> -> tensor<256x256xbf16>
  %db = step.reduce_sum %dy dims [0, 1] : (tensor<2x128x256xf32>) -> tensor<256xf32>
  %wq = step.quantize_fp8 %w format e4m3 tile [128, 128] : tensor<256x128xf32>
  %wq16 = step.convert %wq : tensor<256x128xf32> -> tensor<256x128xbf16>
  %xq = step.quantize_fp8 %x format e4m3 tile [128, 1] : tensor<256x128xf32>
  %xq16 = step.convert %xq : tensor<256x128xf32> -> tensor<256x128xbf16>
  %dx16 = step.matmul %rows16, %wq16 : (tensor<2x128x256xbf16>, tensor<256x128xbf16>) -> tensor<2x128x128xbf16>
  %dx = step.convert %dx16 : tensor<2x128x128xbf16> -> tensor<2x128x128xf32>
  %dw16 = step.matmul %cols16, %xq16 transpose_a : (tensor<256x256xbf16>, tensor<256x128xbf16>) -> tensor<256x128xbf16>
  %dw = step.convert %dw16 : tensor<256x128xbf16> -> tensor<256x128xf32>
  return %dx, %dw, %db : tensor<2x128x128xf32>, tensor<256x128xf32>, tensor<256xf32>
}
