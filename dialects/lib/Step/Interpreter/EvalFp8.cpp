//===- EvalFp8.cpp - quantize_fp8 and quantize_grad_fp8 -------------------===//
//
// Tile by tile as the op defines it, with the helpers the kernels use
// (runtime/kernels/elementwise_math.h: the scale and the rounding).
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

#include "runtime/kernels/elementwise_math.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace stepc::interp;
using namespace stepc::step;

void stepc::interp::quantizeFp8Tiles(const Tensor &x, int64_t tr, int64_t tc, int format,
                                     std::vector<double> &out) {
  int64_t rows = x.shape[x.rank() - 2], cols = x.shape.back();
  int64_t matrices = x.numel() / (rows * cols);
  out.resize(x.data.size());
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t r0 = 0; r0 < rows; r0 += tr)
      for (int64_t c0 = 0; c0 < cols; c0 += tc) {
        int64_t r1 = std::min(rows, r0 + tr), c1 = std::min(cols, c0 + tc);
        double amax = 0;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) {
            double v = std::fabs(x.data[(m * rows + r) * cols + c]);
            amax = std::isnan(v) || std::isnan(amax) ? NAN : std::max(amax, v);
          }
        double s = stepc_fp8_tile_scale<double>(amax, format);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) {
            int64_t i = (m * rows + r) * cols + c;
            out[i] = stepc_round_fp8<double>(x.data[i] * s, format) / s;
          }
      }
}

Evaluated stepc::interp::evalFp8(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, Evaluated>(op)
      .Case([&](QuantizeFp8Op q) {
        quantizeFp8Tiles(*in[0], q.getTile()[0], q.getTile()[1],
                         static_cast<int>(q.getFormat()), out[0].data);
        return success();
      })
      .Case([&](QuantizeGradFp8Op) {
        out[0].data = in[0]->data;
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
