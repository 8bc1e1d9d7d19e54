//===- EvalLoss.cpp - cross_entropy, embedding, their gradients, adamw ----===//

#include "Eval.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace mlir;
using namespace stepc::interp;
using namespace stepc::step;

namespace {

/// The id at `i` as a row index, or a diagnostic naming it.
FailureOr<int64_t> rowIndex(Operation *op, const Tensor &ids, int64_t i, int64_t rows,
                            StringRef what) {
  double id = ids.data[i];
  if (id != std::floor(id))
    return op->emitOpError() << what << " " << id << " at position " << i
                             << " is not an integer";
  if (!(id >= 0 && id < rows))
    return op->emitOpError() << what << " " << static_cast<int64_t>(id)
                             << " at position " << i << " is outside [0, "
                             << rows << ")";
  return static_cast<int64_t>(id);
}

double logSumExp(const double *x, int64_t n) {
  double max = -INFINITY, sum = 0;
  for (int64_t j = 0; j < n; ++j)
    max = std::fmax(max, x[j]);
  for (int64_t j = 0; j < n; ++j)
    sum += std::exp(x[j] - max);
  return max + std::log(sum);
}

/// What a cross_entropy or its gradient computes beyond the plain mean.
struct LossOptions {
  std::optional<int64_t> ignore;
  double smoothing = 0, z = 0;
  const Tensor *count = nullptr; // the denominator, when given
};

template <typename OpT>
LossOptions lossOptions(OpT op, const Tensor *count) {
  LossOptions o;
  o.ignore = op.getIgnoreIndex();
  if (auto eps = op.getLabelSmoothing())
    o.smoothing = eps->convertToDouble();
  if (auto z = op.getZLoss())
    o.z = z->convertToDouble();
  o.count = count;
  return o;
}

// Per counted position i (target not ignore_index), lse_i = logsumexp(l_i):
//   loss_i = lse_i - (1-ε)·l_i[t_i] - (ε/V)·Σ_j l_i[j] + z·lse_i²
//   dl_i   = dloss/N · ((1 + 2z·lse_i)·softmax(l_i) - (1-ε)·onehot(t_i) - ε/V)
// loss = Σ loss_i / N, N the count operand or the counted positions; a
// zero N gives zeros.
LogicalResult crossEntropy(Operation *op, const Tensor &logits, const Tensor &targets,
                           const Tensor *dloss, const LossOptions &o, Tensor &out) {
  int64_t v = logits.shape.back(), n = targets.numel();
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i)
    counted += !(o.ignore && targets.data[i] == static_cast<double>(*o.ignore));
  double denominator = o.count ? o.count->data[0] : static_cast<double>(counted);
  double inverse = denominator != 0 ? 1.0 / denominator : 0.0;
  double total = 0;
  if (dloss)
    std::fill(out.data.begin(), out.data.end(), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    if (o.ignore && targets.data[i] == static_cast<double>(*o.ignore))
      continue;
    FailureOr<int64_t> target = rowIndex(op, targets, i, v, "target");
    if (failed(target))
      return failure();
    const double *row = &logits.data[i * v];
    double lse = logSumExp(row, v);
    if (!dloss) {
      double sum = 0;
      for (int64_t j = 0; o.smoothing != 0 && j < v; ++j)
        sum += row[j];
      total += lse - (1 - o.smoothing) * row[*target] - o.smoothing / v * sum +
               o.z * lse * lse;
      continue;
    }
    double scale = dloss->data[0] * inverse, softmaxScale = 1 + 2 * o.z * lse;
    for (int64_t j = 0; j < v; ++j)
      out.data[i * v + j] =
          scale * (softmaxScale * std::exp(row[j] - lse) -
                   (j == *target ? 1.0 - o.smoothing : 0.0) - o.smoothing / v);
  }
  if (!dloss)
    out.data[0] = total * inverse;
  return success();
}

// y[i, :] = table[ids[i], :]   or, backward,   dtable[ids[i], :] += dy[i, :]
// With a vocabulary shard (`first`, of `numIds` rows): other shards' ids
// give zero rows or add nothing.
LogicalResult embedding(Operation *op, const Tensor &a, const Tensor &ids, Tensor &out,
                        bool backward, const Tensor *first = nullptr, int64_t numIds = 0) {
  int64_t d = a.shape.back();
  int64_t rows = backward ? out.shape[0] : a.shape[0];
  for (int64_t i = 0; i < ids.numel(); ++i) {
    FailureOr<int64_t> row = rowIndex(op, ids, i, first ? numIds : rows, "id");
    if (failed(row))
      return failure();
    if (first) {
      *row -= static_cast<int64_t>(first->data[0]);
      if (*row < 0 || *row >= rows) {
        if (!backward)
          for (int64_t c = 0; c < d; ++c)
            out.data[i * d + c] = 0;
        continue;
      }
    }
    for (int64_t c = 0; c < d; ++c) {
      if (backward)
        out.data[*row * d + c] += a.data[i * d + c];
      else
        out.data[i * d + c] = a.data[*row * d + c];
    }
  }
  return success();
}

// PyTorch's AdamW (torch/optim/adamw.py, single-tensor path), after scaling
// the gradient by grad_scale.
LogicalResult adamw(AdamwOp op, Operands in, Results out) {
  double lr = in[4]->data[0], t = in[5]->data[0], scale = in[6]->data[0];
  double b1 = op.getBeta1().convertToDouble(), b2 = op.getBeta2().convertToDouble();
  double eps = op.getEpsilon().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  if (!(t >= 1.0))
    return op.emitOpError() << "expects a step count >= 1, got " << t;
  double bc1 = 1.0 - std::pow(b1, t), bc2Sqrt = std::sqrt(1.0 - std::pow(b2, t));
  double stepSize = lr / bc1;
  for (int64_t i = 0; i < in[0]->numel(); ++i) {
    double g = in[1]->data[i] * scale;
    double p = in[0]->data[i];
    // AdamW shrinks the parameter; Adam adds the L2 term to the gradient.
    if (op.getDecoupledWeightDecay())
      p *= 1.0 - lr * wd;
    else
      g += wd * p;
    double m = in[2]->data[i] * b1 + (1.0 - b1) * g;
    double v = in[3]->data[i] * b2 + (1.0 - b2) * g * g;
    out[0].data[i] = p - stepSize * m / (std::sqrt(v) / bc2Sqrt + eps);
    out[1].data[i] = m;
    out[2].data[i] = v;
  }
  return success();
}

// PyTorch's SGD (dampening 0) after scaling the gradient by grad_scale.
LogicalResult sgd(SgdOp op, Operands in, Results out) {
  double lr = in[3]->data[0], scale = in[4]->data[0];
  double mu = op.getMomentum().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  for (int64_t i = 0; i < in[0]->numel(); ++i) {
    double p = in[0]->data[i];
    double g = in[1]->data[i] * scale + wd * p;
    double b = mu * in[2]->data[i] + g;
    double d = op.getNesterov() ? g + mu * b : b;
    out[0].data[i] = p - lr * d;
    out[1].data[i] = b;
  }
  return success();
}

// Lion (the reference implementation's update) after scaling the gradient.
LogicalResult lion(LionOp op, Operands in, Results out) {
  double lr = in[3]->data[0], scale = in[4]->data[0];
  double b1 = op.getBeta1().convertToDouble(), b2 = op.getBeta2().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  for (int64_t i = 0; i < in[0]->numel(); ++i) {
    double g = in[1]->data[i] * scale, m = in[2]->data[i];
    double c = b1 * m + (1.0 - b1) * g;
    double sign = c > 0 ? 1.0 : c < 0 ? -1.0 : 0.0;
    out[0].data[i] = in[0]->data[i] * (1.0 - lr * wd) - lr * sign;
    out[1].data[i] = b2 * m + (1.0 - b2) * g;
  }
  return success();
}

} // namespace

Evaluated stepc::interp::evalLoss(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, Evaluated>(op)
      .Case([&](AdamwOp a) { return adamw(a, in, out); })
      .Case([&](SgdOp a) { return sgd(a, in, out); })
      .Case([&](LionOp a) { return lion(a, in, out); })
      .Case([&](CrossEntropyGradOp c) {
        return crossEntropy(op, *in[1], *in[2], in[0],
                            lossOptions(c, c.getCount() ? in[3] : nullptr), out[0]);
      })
      .Case([&](CrossEntropyOp c) {
        return crossEntropy(op, *in[0], *in[1], nullptr,
                            lossOptions(c, c.getCount() ? in[2] : nullptr), out[0]);
      })
      .Case([&](TargetMaskOp c) {
        double ignore = static_cast<double>(c.getIgnoreIndex());
        for (int64_t i = 0; i < in[0]->numel(); ++i) {
          bool counted = in[0]->data[i] != ignore;
          out[0].data[i] = counted ? in[0]->data[i] : 0.0;
          out[1].data[i] = counted ? 1.0 : 0.0;
        }
        return success();
      })
      .Case([&](TokenCountOp c) {
        double ignore = static_cast<double>(c.getIgnoreIndex()), counted = 0;
        for (double t : in[0]->data)
          counted += t != ignore;
        out[0].data[0] = counted;
        return success();
      })
      .Case([&](EmbeddingGradOp e) {
        return embedding(op, *in[0], *in[1], out[0], true, e.getFirstRow() ? in[2] : nullptr,
                         e.getNumIds().value_or(0));
      })
      .Case([&](EmbeddingOp e) {
        return embedding(op, *in[0], *in[1], out[0], false, e.getFirstRow() ? in[2] : nullptr,
                         e.getNumIds().value_or(0));
      })
      .Default([](Operation *) { return std::nullopt; });
}
