// The interpreter rounds an f16 value as IEEE binary16 does (nearest, ties
// to even; 65520 and above overflow to inf; subnormals below 2^-14), the
// same bits as NumPy's float16: 0.1, the largest half 65504, 65519 (down to
// 65504), 65520 (inf), a subnormal 3e-5 and the tie 1 + 2^-11 (to 1).
// RUN: rm -rf %t && mkdir -p %t
// RUN: %torch_python -c "import numpy as np; np.save('%t/x.npy', np.array([0.1, 65504, 65519, 65520, 3e-5, 1.00048828125], np.float32))"
// RUN: stepc-interp %s --function=half --inputs=%t --output=%t/out
// RUN: %torch_python -c "import numpy as np; x = np.load('%t/x.npy'); y = np.load('%t/out/result0.npy'); h = x.astype(np.float16).astype(np.float32); assert np.array_equal(y, h), (y, h); assert y[3] == np.inf and y[5] == 1.0, y"
func.func @half(%x: tensor<6xf32> {step.input = "x"}) -> tensor<6xf32> {
  %h = step.convert %x : tensor<6xf32> -> tensor<6xf16>
  %y = step.convert %h : tensor<6xf16> -> tensor<6xf32>
  return %y : tensor<6xf32>
}
