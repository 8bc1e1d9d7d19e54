// A linear layer's forward alone in fp8 (an eval step's): its input rounded
// in [1, 128] tiles, its weight in [128, 128] ones, only the product reads
// them (test/Compiler/fp8-packed-interp.test).
func.func @step(%x: tensor<2x128x256xf32>, %w: tensor<128x256xf32>) -> tensor<2x128x128xf32> attributes {step.train_step} {
  %rows = step.quantize_fp8 %x format e4m3 tile [1, 128] : tensor<2x128x256xf32>
  %rows16 = step.convert %rows : tensor<2x128x256xf32> -> tensor<2x128x256xbf16>
  %wq = step.quantize_fp8 %w format e4m3 tile [128, 128] : tensor<128x256xf32>
  %wq16 = step.convert %wq : tensor<128x256xf32> -> tensor<128x256xbf16>
  %y16 = step.matmul %rows16, %wq16 transpose_b : (tensor<2x128x256xbf16>, tensor<128x256xbf16>) -> tensor<2x128x128xbf16>
  %y = step.convert %y16 : tensor<2x128x128xbf16> -> tensor<2x128x128xf32>
  return %y : tensor<2x128x128xf32>
}
