//===- EvalRandom.cpp - dropout -------------------------------------------===//
//
// The mask comes from runtime/kernels/philox.h, the header both back ends'
// kernels include, so the interpreter draws the bits they draw.
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

#include "runtime/kernels/philox.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::interp;
using namespace stepc::step;

Evaluated interp::evalRandom(Operation *op, Operands in, Results out) {
  auto dropout = dyn_cast<DropoutOp>(op);
  if (!dropout)
    return std::nullopt;
  const Tensor &x = *in[0];
  unsigned next = 1;
  uint32_t seed = 0, step = 0;
  if (dropout.getSeed()) {
    seed = static_cast<uint32_t>(static_cast<int64_t>(in[next++]->data[0]));
    step = static_cast<uint32_t>(in[next++]->data[0]);
  }
  // The first global element: this slice's first row times the row size.
  uint64_t first = 0;
  if (dropout.getFirstRow()) {
    int64_t rowSize = x.shape.empty() || x.shape[0] == 0 ? 1 : x.numel() / x.shape[0];
    first = static_cast<uint64_t>(static_cast<int64_t>(in[next]->data[0]) * rowSize);
  }
  double rate = dropout.getRate().convertToDouble();
  const uint32_t threshold = stepc_dropout_threshold(rate);
  const double scale = stepc_dropout_scale(rate);
  const auto stream = static_cast<uint32_t>(dropout.getStream());
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    out[0].data[i] =
        stepc_dropout_keep(seed, stream, step, first + static_cast<uint64_t>(i), threshold)
            ? x.data[i] * scale
            : 0.0;
  return success();
}
