//===- EvalAttention.cpp - attention, attention_grad, rotary --------------===//
//
// Plain per-(batch, head, query) loops; the probabilities are recomputed in
// the backward pass, as the flash-attention kernels will do.
//
//===----------------------------------------------------------------------===//

#include "Eval.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <array>
#include <cmath>

using namespace mlir;
using namespace stepc::interp;
using namespace stepc::step;

namespace {

/// Shapes and attributes of one attention op.
struct AttentionShape {
  int64_t batch, tq, tk, heads, kvHeads, headDim;
  bool causal;
  double scale;
  /// bf16 operands: the probabilities and their gradient are rounded to
  /// bf16 before the products they feed, as the CPU and CUDA kernels round
  /// them into their matrix units' operands.
  bool roundProducts = false;

  /// The additive mask ([Bm, Hm, Tqm, Tk], a broadcast dim's stride 0), or null.
  const Tensor *mask = nullptr;
  int64_t maskBatch = 0, maskHead = 0, maskRow = 0;

  /// The mask's value for (b, head h, query t, key j); 0 without one.
  double bias(int64_t b, int64_t h, int64_t t, int64_t j) const {
    return mask ? mask->data[b * maskBatch + h * maskHead + t * maskRow + j] : 0.0;
  }

  /// bf16 value of a product's operand.
  double operand(double x) const { return roundProducts ? roundToBF16(x) : x; }

  /// Offset of (b, t, head) in a [B, T, H·Dh] tensor with `h` heads.
  int64_t at(int64_t b, int64_t t, int64_t t_len, int64_t h, int64_t head) const {
    return ((b * t_len + t) * h + head) * headDim;
  }
  /// Key positions query `t` sees.
  int64_t visible(int64_t t) const { return causal ? t + 1 : tk; }
};

/// `scale` is the effective one (a step op's, or a stepk op's own); `in`
/// the op's operand values (the mask among them).
template <typename OpT>
AttentionShape shapeOf(OpT op, Operands in, double scale) {
  bool forward = isa<AttentionOp, stepc::stepk::AttentionOp>(op.getOperation());
  const Tensor &q = *in[forward ? 0 : 1], &k = *in[forward ? 1 : 2];
  Value query = op->getOperand(forward ? 0 : 1);
  AttentionShape s{q.shape[0],
                   q.shape[1],
                   k.shape[1],
                   static_cast<int64_t>(op.getNumHeads()),
                   static_cast<int64_t>(op.getNumKvHeads()),
                   static_cast<int64_t>(op.getHeadDim()),
                   op.getCausal(),
                   scale,
                   cast<RankedTensorType>(query.getType()).getElementType().isBF16()};
  if (Value mask = op.getMask()) {
    unsigned index = llvm::find(op->getOperands(), mask) - op->operand_begin();
    s.mask = in[index];
    llvm::ArrayRef<int64_t> m = s.mask->shape;
    s.maskRow = m[2] == 1 ? 0 : m[3];
    s.maskHead = m[1] == 1 ? 0 : m[2] * m[3];
    s.maskBatch = m[0] == 1 ? 0 : m[1] * m[2] * m[3];
  }
  return s;
}

/// p[j] = softmax_j(scale · q_t·k_j + mask) over the visible keys; returns
/// the row's log-sum-exp of the scaled scores (what a saved forward keeps).
/// A row the mask hides whole is all zeros (log-sum-exp +inf).
double probabilities(const AttentionShape &s, const Tensor &q, const Tensor &k,
                     int64_t b, int64_t h, int64_t t, std::vector<double> &p) {
  int64_t kvh = h / (s.heads / s.kvHeads), n = s.visible(t);
  const double *qt = &q.data[s.at(b, t, s.tq, s.heads, h)];
  double max = -INFINITY, sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double *kj = &k.data[s.at(b, j, s.tk, s.kvHeads, kvh)];
    double dot = 0;
    for (int64_t c = 0; c < s.headDim; ++c)
      dot += qt[c] * kj[c];
    p[j] = s.scale * dot + s.bias(b, h, t, j);
    max = std::fmax(max, p[j]);
  }
  if (max == -INFINITY) {
    std::fill(p.begin(), p.begin() + n, 0.0);
    return INFINITY;
  }
  for (int64_t j = 0; j < n; ++j) {
    p[j] = std::exp(p[j] - max);
    sum += p[j];
  }
  for (int64_t j = 0; j < n; ++j)
    p[j] /= sum;
  return max + std::log(sum);
}

// O = P V per head; the log-sum-exps into `lse` ([B, H, Tq]) if given.
void attention(const AttentionShape &s, const Tensor &q, const Tensor &k,
               const Tensor &v, Tensor &o, Tensor *lse = nullptr) {
  std::vector<double> p(s.tk);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < s.tq; ++t) {
        double rowLse = probabilities(s, q, k, b, h, t, p);
        if (lse)
          lse->data[(b * s.heads + h) * s.tq + t] = rowLse;
        int64_t kvh = h / (s.heads / s.kvHeads);
        double *ot = &o.data[s.at(b, t, s.tq, s.heads, h)];
        for (int64_t j = 0; j < s.visible(t); ++j) {
          const double *vj = &v.data[s.at(b, j, s.tk, s.kvHeads, kvh)];
          for (int64_t c = 0; c < s.headDim; ++c)
            ot[c] += s.operand(p[j]) * vj[c];
        }
      }
}

// dV += Pᵀ dO; dP = dO Vᵀ; dS = P ∘ (dP - Σ P∘dP); dQ = scale·dS K; dK += scale·dSᵀ Q
void attentionGrad(const AttentionShape &s, const Tensor &dO, const Tensor &q,
                   const Tensor &k, const Tensor &v, Tensor &dq, Tensor &dk, Tensor &dv) {
  std::vector<double> p(s.tk), dp(s.tk);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < s.tq; ++t) {
        probabilities(s, q, k, b, h, t, p);
        int64_t kvh = h / (s.heads / s.kvHeads), n = s.visible(t);
        int64_t qo = s.at(b, t, s.tq, s.heads, h);
        const double *dot = &dO.data[qo], *qt = &q.data[qo];
        double rowDot = 0;
        for (int64_t j = 0; j < n; ++j) {
          int64_t kv = s.at(b, j, s.tk, s.kvHeads, kvh);
          double acc = 0;
          for (int64_t c = 0; c < s.headDim; ++c) {
            acc += dot[c] * v.data[kv + c];
            dv.data[kv + c] += s.operand(p[j]) * dot[c];
          }
          dp[j] = acc;
          rowDot += p[j] * acc;
        }
        for (int64_t j = 0; j < n; ++j) {
          int64_t kv = s.at(b, j, s.tk, s.kvHeads, kvh);
          double ds = s.operand(p[j] * (dp[j] - rowDot) * s.scale);
          for (int64_t c = 0; c < s.headDim; ++c) {
            dq.data[qo + c] += ds * k.data[kv + c];
            dk.data[kv + c] += ds * qt[c];
          }
        }
      }
}

// Pairs (2i, 2i+1) of each head rotate by t·θ_i, θ_i = theta^(-2i/Dh);
// `inverse` rotates by -t·θ_i.
void rotary(const Tensor &x, int64_t headDim, double theta, bool inverse, Tensor &y) {
  int64_t batch = x.shape[0], len = x.shape[1], width = x.shape[2];
  double sign = inverse ? -1.0 : 1.0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < len; ++t)
      for (int64_t base = 0; base < width; base += headDim)
        for (int64_t i = 0; i < headDim / 2; ++i) {
          double angle = sign * t * std::pow(theta, -2.0 * i / headDim);
          double c = std::cos(angle), sn = std::sin(angle);
          int64_t p = (b * len + t) * width + base + 2 * i;
          double x0 = x.data[p], x1 = x.data[p + 1];
          y.data[p] = x0 * c - x1 * sn;
          y.data[p + 1] = x0 * sn + x1 * c;
        }
}

/// Query, key and value of a packed kernel: copies of the last-dim columns
/// [offset, offset + width) of its [B, T, W] operand.
std::array<Tensor, 3> unpack(const Tensor &x, ArrayRef<int64_t> offsets,
                             const std::array<int64_t, 3> &widths) {
  const int64_t rows = x.shape[0] * x.shape[1], w = x.shape[2];
  std::array<Tensor, 3> parts;
  for (int i = 0; i < 3; ++i) {
    parts[i] = Tensor::zeros({x.shape[0], x.shape[1], widths[i]});
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(&x.data[r * w + offsets[i]], widths[i], &parts[i].data[r * widths[i]]);
  }
  return parts;
}

/// The widths of a packed kernel's query, key and value columns.
template <typename OpT>
std::array<int64_t, 3> packedWidths(OpT op) {
  const int64_t q = op.getNumHeads() * op.getHeadDim(), kv = op.getNumKvHeads() * op.getHeadDim();
  return {q, kv, kv};
}

/// A stepk.attention_grad: its three gradients, or (packed) each written
/// into its columns of the one result.
void kernelGrad(stepc::stepk::AttentionGradOp a, Operands in, Results out) {
  const double scale = a.getScale().convertToDouble();
  std::optional<ArrayRef<int64_t>> offsets = a.getPacked();
  if (!offsets) {
    attentionGrad(shapeOf(a, in, scale), *in[0], *in[1], *in[2], *in[3], out[0], out[1],
                  out[2]);
    return;
  }
  std::array<int64_t, 3> widths = packedWidths(a);
  std::array<Tensor, 3> qkv = unpack(*in[1], *offsets, widths);
  std::array<Tensor, 3> grads;
  for (int i = 0; i < 3; ++i)
    grads[i] = Tensor::zeros(qkv[i].shape);
  AttentionShape s = shapeOf(a, in, scale);
  attentionGrad(s, *in[0], qkv[0], qkv[1], qkv[2], grads[0], grads[1], grads[2]);
  Tensor &packed = out[0];
  const int64_t rows = packed.shape[0] * packed.shape[1], w = packed.shape[2];
  for (int i = 0; i < 3; ++i)
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(&grads[i].data[r * widths[i]], widths[i], &packed.data[r * w + (*offsets)[i]]);
}

} // namespace

Evaluated stepc::interp::evalAttention(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, Evaluated>(op)
      .Case([&](AttentionGradOp a) {
        attentionGrad(shapeOf(a, in, a.getEffectiveScale()), *in[0], *in[1], *in[2], *in[3],
                      out[0], out[1], out[2]);
        return success();
      })
      .Case([&](AttentionOp a) {
        attention(shapeOf(a, in, a.getEffectiveScale()), *in[0], *in[1], *in[2], out[0]);
        return success();
      })
      // The kernels: a saved forward's output and log-sum-exp are what the
      // forward computed, so the backward recomputes them here alike.
      .Case([&](stepk::AttentionGradOp a) {
        kernelGrad(a, in, out);
        return success();
      })
      .Case([&](stepk::AttentionOp a) {
        AttentionShape s = shapeOf(a, in, a.getScale().convertToDouble());
        Tensor *lse = a.getLse() ? &out[1] : nullptr;
        if (std::optional<ArrayRef<int64_t>> offsets = a.getPacked()) {
          std::array<Tensor, 3> qkv = unpack(*in[0], *offsets, packedWidths(a));
          attention(s, qkv[0], qkv[1], qkv[2], out[0], lse);
        } else {
          attention(s, *in[0], *in[1], *in[2], out[0], lse);
        }
        return success();
      })
      .Case([&](RotaryOp r) {
        rotary(*in[0], r.getHeadDim(), r.getTheta().convertToDouble(), r.getInverse(),
               out[0]);
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
