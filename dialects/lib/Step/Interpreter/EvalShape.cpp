//===- EvalShape.cpp - constants, dtype, shape and reduction ops ----------===//

#include "Eval.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace stepc::interp;
using namespace stepc::step;

namespace {

/// Multi-index of flat position `flat` under `shape`.
SmallVector<int64_t> unflatten(int64_t flat, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

LogicalResult constant(ConstantOp op, Results out) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError() << "can only interpret dense constants";
  int64_t i = 0;
  if (isa<FloatType>(dense.getElementType())) {
    for (APFloat v : dense.getValues<APFloat>())
      out[0].data[i++] = v.convertToDouble();
  } else {
    const bool mask = dense.getElementType().isInteger(1);
    for (APInt v : dense.getValues<APInt>())
      out[0].data[i++] = static_cast<double>(mask ? v.getZExtValue() : v.getSExtValue());
  }
  return success();
}

/// A tensor viewed as [outer, n, inner] around dimension `dim`.
struct AlongDim {
  int64_t outer, n, inner;
  AlongDim(ArrayRef<int64_t> shape, int64_t dim)
      : outer(product(shape, 0, dim)), n(shape[dim]),
        inner(product(shape, dim + 1, shape.size())) {}
};

void iota(IotaOp op, Tensor &out) {
  AlongDim v(op.getType().getShape(), op.getDim());
  for (int64_t o = 0, i = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.n; ++k)
      for (int64_t j = 0; j < v.inner; ++j)
        out.data[i++] = static_cast<double>(k);
}

// The first largest along dim; NaN is larger than any number (torch.argmax).
void argmax(const Tensor &x, int64_t dim, Tensor &out) {
  AlongDim v(x.shape, dim);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t j = 0; j < v.inner; ++j) {
      int64_t best = 0;
      double top = x.data[o * v.n * v.inner + j];
      for (int64_t k = 1; k < v.n && !std::isnan(top); ++k) {
        double e = x.data[(o * v.n + k) * v.inner + j];
        if (e > top || std::isnan(e)) {
          top = e;
          best = k;
        }
      }
      out.data[o * v.inner + j] = static_cast<double>(best);
    }
}

/// gather (scatter = false): out[o, k, j] = x[o, index[o, k, j], j];
/// gather_grad (scatter = true): out[o, index[o, k, j], j] += x[o, k, j].
/// Out-of-range indices read 0 and add nothing.
void gather(const Tensor &x, const Tensor &index, int64_t dim, bool scatter, Tensor &out) {
  AlongDim at(index.shape, dim);
  const int64_t size = scatter ? out.shape[dim] : x.shape[dim];
  for (int64_t o = 0; o < at.outer; ++o)
    for (int64_t k = 0; k < at.n; ++k)
      for (int64_t j = 0; j < at.inner; ++j) {
        int64_t i = (o * at.n + k) * at.inner + j;
        double id = index.data[i];
        bool inRange = id >= 0 && id < static_cast<double>(size);
        int64_t wide = (o * size + static_cast<int64_t>(id)) * at.inner + j;
        if (scatter) {
          if (inRange)
            out.data[wide] += x.data[i];
        } else {
          out.data[i] = inRange ? x.data[wide] : 0.0;
        }
      }
}

/// NumPy broadcast: result index → operand index, right-aligned.
void broadcast(const Tensor &in, Tensor &out) {
  int64_t offset = out.rank() - in.rank();
  SmallVector<int64_t> inStrides = in.strides();
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    SmallVector<int64_t> index = unflatten(flat, out.shape);
    int64_t src = 0;
    for (int64_t d = 0; d < in.rank(); ++d)
      src += (in.shape[d] == 1 ? 0 : index[d + offset]) * inStrides[d];
    out.data[flat] = in.data[src];
  }
}

void transpose(const Tensor &in, ArrayRef<int64_t> perm, Tensor &out) {
  SmallVector<int64_t> inStrides = in.strides();
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    SmallVector<int64_t> index = unflatten(flat, out.shape);
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      src += index[d] * inStrides[perm[d]];
    out.data[flat] = in.data[src];
  }
}

/// Copies the box of `small` into `big` at `offsets` (pad) or out of it (slice).
void copyBox(const Tensor &big, ArrayRef<int64_t> offsets, Tensor &small,
             bool intoBig, Tensor *bigOut) {
  SmallVector<int64_t> bigStrides = big.strides();
  for (int64_t flat = 0; flat < small.numel(); ++flat) {
    SmallVector<int64_t> index = unflatten(flat, small.shape);
    int64_t pos = 0;
    for (size_t d = 0; d < index.size(); ++d)
      pos += (index[d] + offsets[d]) * bigStrides[d];
    if (intoBig)
      bigOut->data[pos] = small.data[flat];
    else
      small.data[flat] = big.data[pos];
  }
}

/// The flat position in the reduced tensor (keep_dims layout irrelevant:
/// both layouts enumerate kept dims in order) of input position `index`.
int64_t reducedPosition(ArrayRef<int64_t> index, ArrayRef<int64_t> shape,
                        ArrayRef<int64_t> dims) {
  int64_t pos = 0;
  for (size_t d = 0; d < index.size(); ++d)
    if (!llvm::is_contained(dims, static_cast<int64_t>(d)))
      pos = pos * shape[d] + index[d];
  return pos;
}

enum class Reduction { Sum, Max, Mean };

void reduce(const Tensor &in, ArrayRef<int64_t> dims, Reduction kind, Tensor &out) {
  double init = kind == Reduction::Max ? -std::numeric_limits<double>::infinity() : 0.0;
  std::fill(out.data.begin(), out.data.end(), init);
  int64_t count = 1;
  for (int64_t d : dims)
    count *= in.shape[d];
  for (int64_t flat = 0; flat < in.numel(); ++flat) {
    int64_t pos = reducedPosition(unflatten(flat, in.shape), in.shape, dims);
    double x = in.data[flat];
    out.data[pos] = kind == Reduction::Max ? std::fmax(out.data[pos], x) : out.data[pos] + x;
  }
  if (kind == Reduction::Mean)
    for (double &x : out.data)
      x /= static_cast<double>(count);
}

// dx = dy at the maxima, split evenly among ties.
void reduceMaxGrad(const Tensor &dy, const Tensor &in, ArrayRef<int64_t> dims, Tensor &out) {
  Tensor max = Tensor::zeros(dy.shape), ties = Tensor::zeros(dy.shape);
  reduce(in, dims, Reduction::Max, max);
  for (int64_t flat = 0; flat < in.numel(); ++flat) {
    int64_t pos = reducedPosition(unflatten(flat, in.shape), in.shape, dims);
    ties.data[pos] += in.data[flat] == max.data[pos] ? 1.0 : 0.0;
  }
  for (int64_t flat = 0; flat < in.numel(); ++flat) {
    int64_t pos = reducedPosition(unflatten(flat, in.shape), in.shape, dims);
    out.data[flat] = in.data[flat] == max.data[pos] ? dy.data[pos] / ties.data[pos] : 0.0;
  }
}

} // namespace

Evaluated stepc::interp::evalShape(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, Evaluated>(op)
      .Case([&](BroadcastOp) { broadcast(*in[0], out[0]); return success(); })
      .Case([&](ConcatOp c) {
        int64_t dim = c.getDim(), offset = 0;
        for (const Tensor *part : in) {
          SmallVector<int64_t> offsets(part->rank(), 0);
          offsets[dim] = offset;
          Tensor copy = *part;
          copyBox(out[0], offsets, copy, /*intoBig=*/true, &out[0]);
          offset += part->shape[dim];
        }
        return success();
      })
      .Case([&](ConstantOp c) { return constant(c, out); })
      .Case([&](ConvertOp) { out[0].data = in[0]->data; return success(); }) // rounded as stored
      .Case([&](IotaOp i) { iota(i, out[0]); return success(); })
      .Case([&](ArgmaxOp a) { argmax(*in[0], a.getDim(), out[0]); return success(); })
      .Case([&](GatherOp g) { gather(*in[0], *in[1], g.getDim(), false, out[0]); return success(); })
      .Case([&](GatherGradOp g) {
        gather(*in[0], *in[1], g.getDim(), true, out[0]);
        return success();
      })
      .Case([&](PadOp p) {
        Tensor copy = *in[0];
        copyBox(out[0], p.getLow(), copy, /*intoBig=*/true, &out[0]);
        return success();
      })
      .Case([&](ReduceMaxGradOp r) {
        reduceMaxGrad(*in[0], *in[1], r.getDims(), out[0]);
        return success();
      })
      .Case([&](ReduceMaxOp r) { reduce(*in[0], r.getDims(), Reduction::Max, out[0]); return success(); })
      .Case([&](ReduceMeanOp r) { reduce(*in[0], r.getDims(), Reduction::Mean, out[0]); return success(); })
      .Case([&](ReduceSumOp r) { reduce(*in[0], r.getDims(), Reduction::Sum, out[0]); return success(); })
      .Case([&](ReshapeOp) { out[0].data = in[0]->data; return success(); })
      .Case([&](SliceOp s) {
        copyBox(*in[0], s.getOffsets(), out[0], /*intoBig=*/false, nullptr);
        return success();
      })
      .Case([&](TransposeOp t) { transpose(*in[0], t.getPermutation(), out[0]); return success(); })
      .Default([](Operation *) { return std::nullopt; });
}
