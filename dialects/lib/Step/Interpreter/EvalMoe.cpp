//===- EvalMoe.cpp - top_k, dispatch, combine, grouped products -----------===//
//
// The routing as the ops define it: a stable counting sort of the (token,
// k) pairs by expert. Plain loops in double.
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

using namespace mlir;
using namespace stepc::interp;
using namespace stepc::step;

namespace {

/// Each (token, k) pair's dispatched row (-1 for an expert outside [0, E))
/// and each expert's row count.
struct Routing {
  std::vector<int64_t> slot, counts;
};

/// The routing of `op` (a dispatch, combine or combine gradient) whose
/// rows (dispatched, or combined from) number `rows`: with G groups of
/// experts, group g's rows start at g·rows/G (its block). With a capacity
/// C per S tokens, a pair whose expert already took C pairs of its
/// sequence (its run of S tokens) is dropped: no row, not counted.
template <typename OpT>
Routing route(OpT op, const Tensor &experts, int64_t rows) {
  int64_t numExperts = op.getNumExperts(), groups = op.getGroups();
  int64_t k = experts.shape[1], capacity = op.getCapacity(), segment = op.getSegment();
  Routing r;
  r.counts.assign(numExperts, 0);
  r.slot.assign(experts.numel(), -1);
  std::map<std::pair<int64_t, int64_t>, int64_t> taken; // (sequence, expert) -> pairs
  std::vector<bool> kept(experts.numel(), false);
  for (int64_t p = 0; p < experts.numel(); ++p) {
    double e = experts.data[p];
    if (!(e >= 0 && e < double(numExperts)))
      continue;
    if (capacity > 0 && taken[{p / k / segment, int64_t(e)}]++ >= capacity)
      continue;
    kept[p] = true;
    ++r.counts[int64_t(e)];
  }
  auto expertOf = [&](int64_t pair) { return kept[pair] ? int64_t(experts.data[pair]) : -1; };
  std::vector<int64_t> next(numExperts, 0);
  int64_t perGroup = numExperts / groups, block = rows / groups;
  for (int64_t e = 0; e < numExperts; ++e)
    next[e] = e % perGroup == 0 ? (e / perGroup) * block : next[e - 1] + r.counts[e - 1];
  for (int64_t p = 0; p < experts.numel(); ++p)
    if (int64_t e = expertOf(p); e >= 0)
      r.slot[p] = next[e]++;
  return r;
}

void topK(const Tensor &x, int64_t k, Tensor &values, Tensor &indices) {
  int64_t n = x.shape.back(), rows = x.numel() / n;
  std::vector<int64_t> order(n);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = &x.data[r * n];
    std::iota(order.begin(), order.end(), 0);
    // Larger first (NaN largest), the lower index first among equals.
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      if (std::isnan(row[a]) || std::isnan(row[b]))
        return std::isnan(row[a]) && !std::isnan(row[b]);
      return row[a] > row[b];
    });
    for (int64_t j = 0; j < k; ++j) {
      values.data[r * k + j] = row[order[j]];
      indices.data[r * k + j] = double(order[j]);
    }
  }
}

/// Expert e's rows [begin, end) of block b of an M-row operand whose
/// counts are [E] (one block) or [B, E].
std::pair<int64_t, int64_t> rowsOf(const Tensor &counts, int64_t b, int64_t e, int64_t m) {
  int64_t experts = counts.shape.back(), blocks = counts.numel() / experts, block = m / blocks;
  const double *c = &counts.data[b * experts];
  int64_t begin = 0;
  for (int64_t i = 0; i < e; ++i)
    begin += std::max<int64_t>(0, int64_t(c[i]));
  int64_t end = begin + std::max<int64_t>(0, int64_t(c[e]));
  return {b * block + std::min(begin, block), b * block + std::min(end, block)};
}

int64_t blocksOf(const Tensor &counts) { return counts.numel() / counts.shape.back(); }

} // namespace

Evaluated stepc::interp::evalMoe(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, Evaluated>(op)
      .Case([&](TopKOp t) {
        topK(*in[0], t.getK(), out[0], out[1]);
        return success();
      })
      .Case([&](MoeDispatchOp d) {
        const Tensor &x = *in[0];
        int64_t width = x.shape[1], k = in[1]->shape[1];
        Routing r = route(d, *in[1], out[0].shape[0]);
        for (int64_t p = 0; p < int64_t(r.slot.size()); ++p)
          if (r.slot[p] >= 0)
            std::copy_n(&x.data[(p / k) * width], width, &out[0].data[r.slot[p] * width]);
        for (int64_t e = 0; e < int64_t(r.counts.size()); ++e)
          out[1].data[e] = double(r.counts[e]);
        return success();
      })
      .Case([&](MoeCombineOp c) {
        const Tensor &rows = *in[0], &gates = *in[1];
        int64_t width = rows.shape[1], k = gates.shape[1];
        Routing r = route(c, *in[2], rows.shape[0]);
        for (int64_t p = 0; p < int64_t(r.slot.size()); ++p)
          if (r.slot[p] >= 0)
            for (int64_t j = 0; j < width; ++j)
              out[0].data[(p / k) * width + j] += gates.data[p] * rows.data[r.slot[p] * width + j];
        return success();
      })
      .Case([&](MoeCombineGradOp c) {
        const Tensor &dy = *in[0], &rows = *in[1], &gates = *in[2];
        int64_t width = rows.shape[1], k = gates.shape[1];
        Routing r = route(c, *in[3], rows.shape[0]);
        for (int64_t p = 0; p < int64_t(r.slot.size()); ++p) {
          if (r.slot[p] < 0)
            continue;
          double dot = 0;
          for (int64_t j = 0; j < width; ++j) {
            double g = dy.data[(p / k) * width + j];
            out[0].data[r.slot[p] * width + j] = gates.data[p] * g;
            dot += g * rows.data[r.slot[p] * width + j];
          }
          out[1].data[p] = dot;
        }
        return success();
      })
      .Case([&](GroupedMatmulOp g) {
        const Tensor &x = *in[0], &w = *in[1], &counts = *in[2];
        int64_t m = x.shape[0], kk = x.shape[1], n = out[0].shape[1];
        bool tb = g.getTransposeB();
        for (int64_t e = 0; e < w.shape[0] * blocksOf(counts); ++e) {
          auto [begin, end] = rowsOf(counts, e / w.shape[0], e % w.shape[0], m);
          const double *we = &w.data[(e % w.shape[0]) * kk * n];
          for (int64_t r = begin; r < end; ++r)
            for (int64_t j = 0; j < n; ++j) {
              double acc = 0;
              for (int64_t c = 0; c < kk; ++c)
                acc += x.data[r * kk + c] * (tb ? we[j * kk + c] : we[c * n + j]);
              out[0].data[r * n + j] = acc;
            }
        }
        return success();
      })
      .Case([&](GroupedMatmulWeightGradOp g) {
        const Tensor &x = *in[0], &dy = *in[1], &counts = *in[2];
        int64_t m = x.shape[0], kk = x.shape[1], n = dy.shape[1];
        bool tb = g.getTransposeB();
        int64_t experts = counts.shape.back();
        for (int64_t e = 0; e < experts * blocksOf(counts); ++e) {
          auto [begin, end] = rowsOf(counts, e / experts, e % experts, m);
          double *dw = &out[0].data[(e % experts) * kk * n];
          for (int64_t r = begin; r < end; ++r)
            for (int64_t c = 0; c < kk; ++c)
              for (int64_t j = 0; j < n; ++j)
                (tb ? dw[j * kk + c] : dw[c * n + j]) += x.data[r * kk + c] * dy.data[r * n + j];
        }
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
