//===- EvalMatmul.cpp - matmul and batch_matmul ---------------------------===//

#include "Eval.h"

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

} // namespace

LogicalResult stepc::interp::evalMatmul(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](BatchMatmulOp mm) { return evalProduct(mm, in, out, false); })
      .Case([&](MatmulOp mm) { return evalProduct(mm, in, out, true); })
      .Default([](Operation *other) { return other->emitOpError() << "is not a matmul"; });
}
