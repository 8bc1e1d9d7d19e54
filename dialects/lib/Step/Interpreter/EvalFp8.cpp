//===- EvalFp8.cpp - quantize_fp8, quantize_grad_fp8 and pack_fp8 --------===//
//
// Tile by tile as the op defines it, with the helpers the kernels use
// (runtime/kernels/elementwise_math.h: the scale and the rounding).
//
//===----------------------------------------------------------------------===//

#include "Eval.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

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

namespace {

/// stepk.pack_fp8: each 1x128 block of x as [rows, cols] along cols (or
/// along rows, `transposed`), its scale by the quantizer's rule; bytes as
/// the fp8 values they encode, scales 1 / scale.
void packFp8(const Tensor &x, bool transposed, int format, Tensor &bytes, Tensor &scales) {
  const int64_t cols = x.shape.back(), rows = x.numel() / cols;
  const int64_t lines = transposed ? cols : rows, along = transposed ? rows : cols;
  auto at = [&](int64_t line, int64_t i) {
    return transposed ? x.data[i * cols + line] : x.data[line * cols + i];
  };
  for (int64_t line = 0; line < lines; ++line)
    for (int64_t i0 = 0; i0 < along; i0 += 128) {
      const int64_t i1 = std::min(along, i0 + 128);
      double amax = 0;
      for (int64_t i = i0; i < i1; ++i) {
        double v = std::fabs(at(line, i));
        amax = std::isnan(v) || std::isnan(amax) ? NAN : std::max(amax, v);
      }
      const double s = stepc_fp8_tile_scale<double>(amax, format);
      for (int64_t i = i0; i < i1; ++i)
        bytes.data[line * along + i] = stepc_round_fp8<double>(at(line, i) * s, format);
      scales.data[(i0 / 128) * lines + line] = 1.0 / s;
    }
}

/// stepk.pack_fp8 blocks: each 128x128 block of a 2-d x (of its transpose,
/// `transposed`) scaled as one tile; scales [lines / 128][columns], padded.
void packFp8Blocks(const Tensor &x, bool transposed, int format, Tensor &bytes,
                   Tensor &scales) {
  const int64_t rows = x.shape[0], cols = x.shape[1];
  const int64_t lines = transposed ? cols : rows, along = transposed ? rows : cols;
  const int64_t ld = scales.shape[1];
  auto at = [&](int64_t line, int64_t i) {
    return transposed ? x.data[i * cols + line] : x.data[line * cols + i];
  };
  for (int64_t l0 = 0; l0 < lines; l0 += 128)
    for (int64_t i0 = 0; i0 < along; i0 += 128) {
      const int64_t l1 = std::min(lines, l0 + 128), i1 = std::min(along, i0 + 128);
      double amax = 0;
      for (int64_t l = l0; l < l1; ++l)
        for (int64_t i = i0; i < i1; ++i) {
          double v = std::fabs(at(l, i));
          amax = std::isnan(v) || std::isnan(amax) ? NAN : std::max(amax, v);
        }
      const double s = stepc_fp8_tile_scale<double>(amax, format);
      for (int64_t l = l0; l < l1; ++l)
        for (int64_t i = i0; i < i1; ++i)
          bytes.data[l * along + i] = stepc_round_fp8<double>(at(l, i) * s, format);
      scales.data[(l0 / 128) * ld + i0 / 128] = 1.0 / s;
    }
}

} // namespace

Evaluated stepc::interp::evalFp8(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, Evaluated>(op)
      .Case([&](QuantizeFp8Op q) {
        quantizeFp8Tiles(*in[0], q.getTile()[0], q.getTile()[1],
                         static_cast<int>(q.getFormat()), out[0].data);
        return success();
      })
      .Case([&](stepc::stepk::PackFp8Op p) {
        if (p.getBlocks())
          packFp8Blocks(*in[0], p.getTransposed(), p.getFormat(), out[0], out[1]);
        else
          packFp8(*in[0], p.getTransposed(), p.getFormat(), out[0], out[1]);
        return success();
      })
      .Case([&](QuantizeGradFp8Op) {
        out[0].data = in[0]->data;
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
