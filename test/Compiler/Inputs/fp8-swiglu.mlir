// Llama's SwiGLU in fp8 (test/Compiler/fp8-packed-interp.test): the
// activation silu(gate) * up, the up projection's output gradient
// dy * silu(gate) (the same silu) and the gate's silu_grad(dy * up, gate),
// each of bf16 GEMM results widened and rounded both ways for its products.
func.func @step(%gate16: tensor<2x128x256xbf16>, %up16: tensor<2x128x256xbf16>, %dy16: tensor<2x128x256xbf16>, %w: tensor<128x256xf32>, %x: tensor<256x128xf32>)
    -> (tensor<2x128x128xf32>, tensor<256x128xf32>, tensor<2x128x128xf32>, tensor<256x128xf32>, tensor<2x128x128xf32>, tensor<256x128xf32>) attributes {step.train_step} {
  %gate = step.convert %gate16 : tensor<2x128x256xbf16> -> tensor<2x128x256xf32>
  %up = step.convert %up16 : tensor<2x128x256xbf16> -> tensor<2x128x256xf32>
  %s = step.silu %gate : tensor<2x128x256xf32>
  %act = step.mul %s, %up : tensor<2x128x256xf32>
  %wq = step.quantize_fp8 %w format e4m3 tile [128, 128] : tensor<128x256xf32>
  %wq16 = step.convert %wq : tensor<128x256xf32> -> tensor<128x256xbf16>
  %xq = step.quantize_fp8 %x format e4m3 tile [128, 1] : tensor<256x128xf32>
  %xq16 = step.convert %xq : tensor<256x128xf32> -> tensor<256x128xbf16>
  // The forward: act rounded in [1, 128] tiles for its product, in [128, 1]
  // tiles of its tokens for the weight gradient.
  %arows = step.quantize_fp8 %act format e4m3 tile [1, 128] : tensor<2x128x256xf32>
  %arows16 = step.convert %arows : tensor<2x128x256xf32> -> tensor<2x128x256xbf16>
  %aflat = step.reshape %act : tensor<2x128x256xf32> -> tensor<256x256xf32>
  %acols = step.quantize_fp8 %aflat format e4m3 tile [128, 1] : tensor<256x256xf32>
  %acols16 = step.convert %acols : tensor<256x256xf32> -> tensor<256x256xbf16>
  %y16 = step.matmul %arows16, %wq16 transpose_b : (tensor<2x128x256xbf16>, tensor<128x256xbf16>) -> tensor<2x128x128xbf16>
  %y = step.convert %y16 : tensor<2x128x128xbf16> -> tensor<2x128x128xf32>
  %dwa16 = step.matmul %acols16, %xq16 transpose_a : (tensor<256x256xbf16>, tensor<256x128xbf16>) -> tensor<256x128xbf16>
  %dwa = step.convert %dwa16 : tensor<256x128xbf16> -> tensor<256x128xf32>
  // The up projection's output gradient dy * silu(gate).
  %dy = step.convert %dy16 : tensor<2x128x256xbf16> -> tensor<2x128x256xf32>
  %du = step.mul %dy, %s : tensor<2x128x256xf32>
  %urows = step.quantize_fp8 %du format e5m2 tile [1, 128] : tensor<2x128x256xf32>
  %urows16 = step.convert %urows : tensor<2x128x256xf32> -> tensor<2x128x256xbf16>
  %uflat = step.reshape %du : tensor<2x128x256xf32> -> tensor<256x256xf32>
  %ucols = step.quantize_fp8 %uflat format e5m2 tile [128, 1] : tensor<256x256xf32>
  %ucols16 = step.convert %ucols : tensor<256x256xf32> -> tensor<256x256xbf16>
  %dxu16 = step.matmul %urows16, %wq16 transpose_b : (tensor<2x128x256xbf16>, tensor<128x256xbf16>) -> tensor<2x128x128xbf16>
  %dxu = step.convert %dxu16 : tensor<2x128x128xbf16> -> tensor<2x128x128xf32>
  %dwu16 = step.matmul %ucols16, %xq16 transpose_a : (tensor<256x256xbf16>, tensor<256x128xbf16>) -> tensor<256x128xbf16>
  %dwu = step.convert %dwu16 : tensor<256x128xbf16> -> tensor<256x128xf32>
  // The gate's output gradient silu_grad(dy * up, gate).
  %dyup = step.mul %dy, %up : tensor<2x128x256xf32>
  %dg = step.silu_grad %dyup, %gate : tensor<2x128x256xf32>
  %grows = step.quantize_fp8 %dg format e5m2 tile [1, 128] : tensor<2x128x256xf32>
  %grows16 = step.convert %grows : tensor<2x128x256xf32> -> tensor<2x128x256xbf16>
  %gflat = step.reshape %dg : tensor<2x128x256xf32> -> tensor<256x256xf32>
  %gcols = step.quantize_fp8 %gflat format e5m2 tile [128, 1] : tensor<256x256xf32>
  %gcols16 = step.convert %gcols : tensor<256x256xf32> -> tensor<256x256xbf16>
  %dxg16 = step.matmul %grows16, %wq16 transpose_b : (tensor<2x128x256xbf16>, tensor<128x256xbf16>) -> tensor<2x128x128xbf16>
  %dxg = step.convert %dxg16 : tensor<2x128x128xbf16> -> tensor<2x128x128xf32>
  %dwg16 = step.matmul %gcols16, %xq16 transpose_a : (tensor<256x256xbf16>, tensor<256x128xbf16>) -> tensor<256x128xbf16>
  %dwg = step.convert %dwg16 : tensor<256x128xbf16> -> tensor<256x128xf32>
  return %y, %dwa, %dxu, %dwu, %dxg, %dwg : tensor<2x128x128xf32>, tensor<256x128xf32>, tensor<2x128x128xf32>, tensor<256x128xf32>, tensor<2x128x128xf32>, tensor<256x128xf32>
}
