//===- EvalMatmul.cpp - matmul and batch_matmul ---------------------------===//

#include "Eval.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

// The GEMM epilogues' GELU and its gradient, the helpers the back ends run.
#include "runtime/kernels/elementwise_math.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace stepc::interp;
using namespace stepc::step;

namespace {

/// C[p] = op_a(A[p]) @ op_b(B[p or shared]) for `batch` products of
/// [M, K]·[K, N]; `bStride` is 0 when B is shared.
void products(const double *a, const double *b, double *c, int64_t batch,
              int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t bStride) {
  for (int64_t p = 0; p < batch; ++p) {
    const double *ap = a + p * m * k, *bp = b + p * bStride;
    double *cp = c + p * m * n;
    for (int64_t i = 0; i < m; ++i) {
      double *row = cp + i * n;
      for (int64_t kk = 0; kk < k; ++kk) {
        double aik = ta ? ap[kk * m + i] : ap[i * k + kk];
        if (aik == 0.0)
          continue;
        if (tb) {
          for (int64_t j = 0; j < n; ++j)
            row[j] += aik * bp[j * k + kk];
        } else {
          const double *brow = bp + kk * n;
          for (int64_t j = 0; j < n; ++j)
            row[j] += aik * brow[j];
        }
      }
    }
  }
}

template <typename OpT>
LogicalResult evalProduct(OpT op, Operands in, Results out, bool sharedRhs) {
  const Tensor &a = *in[0], &b = *in[1];
  Tensor &c = out[0];
  int64_t m = c.shape[c.rank() - 2], n = c.shape[c.rank() - 1];
  int64_t k = op.getTransposeA() ? a.shape[a.rank() - 2] : a.shape[a.rank() - 1];
  int64_t batch = product(c.shape, 0, c.rank() - 2);
  products(a.data.data(), b.data.data(), c.data.data(), batch, m, n, k,
           op.getTransposeA(), op.getTransposeB(), sharedRhs ? 0 : k * n);
  return success();
}

/// A stepk.gemm: the product, then its epilogue on each element (bias,
/// tanh GELU keeping the pre-activation, or the GELU gradient at `aux`),
/// rounded once to the result type as the library call stores it; bgrad
/// also sums each column of the transposed lhs [K, M] (the bias gradient).
LogicalResult evalGemm(stepc::stepk::GemmOp gemm, Operands in, Results out) {
  SmallVector<const Tensor *> operands(in.begin(), in.end());
  // Packed operands (stepk.pack_fp8): each byte's value times its block's
  // scale, stored [lines, K] with scales [K / 128, lines] (1x128 blocks),
  // or [lines / 128, K blocks padded] (a rhs of 128x128 blocks).
  const unsigned scalesAt = 2 + (gemm.getBias() ? 1 : 0) + (gemm.getAux() ? 1 : 0);
  Tensor unpacked[2];
  unsigned nextScales = scalesAt;
  for (unsigned i = 0; i < 2; ++i) {
    if (!(i == 0 ? gemm.getLhsScales() : gemm.getRhsScales()))
      continue;
    const Tensor &bytes = *in[i], &scales = *in[nextScales++];
    const int64_t k = bytes.shape.back(), lines = bytes.numel() / k;
    const bool squareBlocks = i == 1 && (*gemm.getFp8())[2] == 0;
    unpacked[i] = bytes;
    for (int64_t line = 0; line < lines; ++line)
      for (int64_t kk = 0; kk < k; ++kk)
        unpacked[i].data[line * k + kk] *=
            squareBlocks ? scales.data[(line / 128) * scales.shape[1] + kk / 128]
                         : scales.data[(kk / 128) * lines + line];
    operands[i] = &unpacked[i];
  }
  if (failed(evalProduct(gemm, operands, out, gemm.getSharedRhs())))
    return failure();
  std::vector<double> &c = out[0].data;
  unsigned next = 2;
  if (gemm.getBias()) {
    const std::vector<double> &bias = in[next++]->data;
    for (size_t e = 0; e < c.size(); ++e)
      c[e] += bias[e % bias.size()];
  }
  if (gemm.getEpilogue() == stepc::stepk::Epilogue::gelu) {
    out[1].data = c;
    for (double &x : c)
      x = stepc_gelu<double>(x, /*tanh_form=*/1);
  } else if (gemm.getEpilogue() == stepc::stepk::Epilogue::dgelu) {
    const std::vector<double> &aux = in[next]->data;
    for (size_t e = 0; e < c.size(); ++e)
      c[e] = stepc_gelu_grad<double>(c[e], aux[e], /*tanh_form=*/1);
  } else if (gemm.getEpilogue() == stepc::stepk::Epilogue::bgrad) {
    const Tensor &lhs = *in[0];
    const int64_t rows = lhs.shape[0], cols = lhs.shape[1];
    std::vector<double> &grad = out[1].data;
    std::fill(grad.begin(), grad.end(), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t col = 0; col < cols; ++col)
        grad[col] += lhs.data[r * cols + col];
  }
  return success();
}

} // namespace

Evaluated stepc::interp::evalMatmul(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, Evaluated>(op)
      .Case([&](BatchMatmulOp mm) { return evalProduct(mm, in, out, false); })
      .Case([&](MatmulOp mm) { return evalProduct(mm, in, out, true); })
      .Case([&](stepc::stepk::GemmOp gemm) { return evalGemm(gemm, in, out); })
      .Default([](Operation *) { return std::nullopt; });
}
