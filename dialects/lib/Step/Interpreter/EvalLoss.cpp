//===- EvalLoss.cpp - cross_entropy, embedding, their gradients, adamw ----===//

#include "Eval.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

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

// loss = mean_i (logsumexp(l_i) - l_i[target_i]); with dloss:
// dl_i = dloss · (softmax(l_i) - onehot(target_i)) / N
LogicalResult crossEntropy(Operation *op, const Tensor &logits, const Tensor &targets,
                           const Tensor *dloss, Tensor &out) {
  int64_t v = logits.shape.back(), n = targets.numel();
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    FailureOr<int64_t> target = rowIndex(op, targets, i, v, "target");
    if (failed(target))
      return failure();
    const double *row = &logits.data[i * v];
    double lse = logSumExp(row, v);
    if (!dloss) {
      total += lse - row[*target];
      continue;
    }
    double scale = dloss->data[0] / static_cast<double>(n);
    for (int64_t j = 0; j < v; ++j)
      out.data[i * v + j] = scale * (std::exp(row[j] - lse) - (j == *target ? 1.0 : 0.0));
  }
  if (!dloss)
    out.data[0] = total / static_cast<double>(n);
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

LogicalResult stepc::interp::evalLoss(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](AdamwOp a) { return adamw(a, in, out); })
      .Case([&](SgdOp a) { return sgd(a, in, out); })
      .Case([&](LionOp a) { return lion(a, in, out); })
      .Case([&](CrossEntropyGradOp) {
        return crossEntropy(op, *in[1], *in[2], in[0], out[0]);
      })
      .Case([&](CrossEntropyOp) { return crossEntropy(op, *in[0], *in[1], nullptr, out[0]); })
      .Case([&](EmbeddingGradOp e) {
        return embedding(op, *in[0], *in[1], out[0], true, e.getFirstRow() ? in[2] : nullptr,
                         e.getNumIds().value_or(0));
      })
      .Case([&](EmbeddingOp e) {
        return embedding(op, *in[0], *in[1], out[0], false, e.getFirstRow() ? in[2] : nullptr,
                         e.getNumIds().value_or(0));
      })
      .Default([](Operation *other) { return other->emitOpError() << "is not a loss op"; });
}
