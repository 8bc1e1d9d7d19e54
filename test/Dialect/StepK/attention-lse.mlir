// The interpreter's stepk.attention returns the log-sum-exp of the scaled
// scores per (batch, head, query) as the CUDA kernels write it: with all-zero
// queries and keys every visible score is 0, so a causal row t has
// lse = ln(t + 1): [0, ln 2, ln 3], L2 norm sqrt(ln²2 + ln²3) = 1.29900...
// RUN: rm -rf %t && mkdir -p %t
// RUN: %torch_python -c "import numpy as np; np.save('%t/q.npy', np.zeros((1, 3, 2), np.float32))"
// RUN: stepc-interp %s --function=lse --inputs=%t --output=%t/out | FileCheck %s
// RUN: %torch_python -c "import numpy as np, math; l = np.load('%t/out/result0.npy').ravel(); assert np.allclose(l, [0, math.log(2), math.log(3)], atol=1e-7), l"
// CHECK: "result0.l2":1.29900039
func.func @lse(%q: tensor<1x3x2xf32> {step.input = "q"}) -> tensor<1x1x3xf32> {
  %o, %lse = stepk.attention %q, %q, %q heads 1 kv_heads 1 head_dim 2 causal scale 1.0 : (tensor<1x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> (tensor<1x3x2xf32>, tensor<1x1x3xf32>)
  return %lse : tensor<1x1x3xf32>
}
