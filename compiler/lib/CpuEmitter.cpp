//===- CpuEmitter.cpp - C++ source for the CPU target ---------------------===//
//
// The step becomes straight-line C++: composite ops call the library
// kernels in runtime/kernels/cpu/, elementwise ops become OpenMP SIMD loops,
// reshapes are free (aliases), step.adamw updates parameters and moments in
// place. Every buffer is `arena + offset` from the memory plan. One table
// (emitOp) covers every op; an op outside it is an error at its location.
//
//===----------------------------------------------------------------------===//

#include "stepc/Compiler/CpuEmitter.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string cString(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

/// "file:line:col" of an op, for runtime error messages.
std::string where(Operation *op) {
  std::string text;
  if (auto loc = dyn_cast<FileLineColLoc>(op->getLoc()))
    text = llvm::formatv("{0}:{1}:{2}", loc.getFilename().getValue(), loc.getLine(),
                         loc.getColumn());
  return text;
}

class Emitter {
public:
  Emitter(func::FuncOp step, const MemoryPlan &plan) : step(step), plan(plan) {}

  FailureOr<std::string> run(const ModuleSummary &summary);

private:
  /// The C expression of a value's storage.
  std::string ptr(Value v) {
    auto arg = plan.argumentOf.find(v);
    if (arg != plan.argumentOf.end())
      return "a" + std::to_string(arg->second);
    return "b" + std::to_string(plan.bufferOf.lookup(v));
  }
  /// A static array of int64 values; returns its name.
  std::string array(ArrayRef<int64_t> values) {
    std::string name = "k" + std::to_string(constants++);
    pre << "static const int64_t " << name << "[] = {";
    if (values.empty())
      pre << "0";
    llvm::interleaveComma(values, pre);
    pre << "};\n";
    return name;
  }
  std::string intArray(ArrayRef<int> values) {
    std::string name = "k" + std::to_string(constants++);
    pre << "static const int " << name << "[] = {";
    llvm::interleaveComma(values, pre);
    pre << "};\n";
    return name;
  }
  void loop(Value out, const std::string &expr) {
    int64_t n = typeOf(out).getNumElements();
    if (n >= 4096)
      body << "#pragma omp parallel for simd\n";
    body << "  for (int64_t i = 0; i < " << n << "; ++i) " << ptr(out) << "[i] = " << expr
         << ";\n";
  }
  void checkIds(Operation *op, const std::string &call, Value ids, StringRef what,
                int64_t bound) {
    body << "  if (int64_t bad = " << call << ")\n    return stepc_fail(error, error_len, "
         << cString(where(op) + ": '" + op->getName().getStringRef().str() + "' " + what.str())
         << ", " << ptr(ids) << "[bad - 1], bad - 1, " << bound << ");\n";
  }
  LogicalResult emitOp(Operation *op);
  /// A fresh request variable for the collective producing `result`,
  /// waited for before the first use of `result`.
  std::string startRequest(Value result) {
    std::string name = "rq" + std::to_string(requests++);
    body << "  int32_t " << name << ";\n";
    pending[result] = name;
    return name;
  }
  /// Waits for the collectives producing `op`'s operands.
  void waitFor(Operation *op) {
    for (Value operand : op->getOperands()) {
      auto it = pending.find(operand);
      if (it == pending.end())
        continue;
      body << "  if (collectives->wait(collectives->ctx, " << it->second
           << "))\n    return stepc_fail_text(error, error_len, "
           << cString(where(op) + ": waiting for a collective failed") << ");\n";
      pending.erase(it);
    }
  }
  LogicalResult emitElementwise(Operation *op);
  LogicalResult emitConstant(ConstantOp op);
  std::string metadata(const ModuleSummary &summary);

  func::FuncOp step;
  const MemoryPlan &plan;
  std::string preText, bodyText;
  llvm::raw_string_ostream pre{preText}, body{bodyText};
  int constants = 0;
  int kernels = 0;
  int requests = 0;
  /// Collective results not yet waited for, and their request variables.
  DenseMap<Value, std::string> pending;
  /// (kind, axes mask, floats per rank) of each collective, in order.
  SmallVector<std::tuple<std::string, int, int64_t>> collectives;
  /// The bit mask of mesh axes (axis k -> bit k).
  static int axesMask(ArrayRef<int16_t> axes) {
    int mask = 0;
    for (int16_t a : axes)
      mask |= 1 << a;
    return mask;
  }
};

LogicalResult Emitter::emitElementwise(Operation *op) {
  auto in = [&](unsigned i) { return ptr(op->getOperand(i)) + "[i]"; };
  std::optional<std::string> expr =
      llvm::TypeSwitch<Operation *, std::optional<std::string>>(op)
          .Case([&](AddOp) { return in(0) + " + " + in(1); })
          .Case([&](DivOp) { return in(0) + " / " + in(1); })
          .Case([&](ErfOp) { return "erff(" + in(0) + ")"; })
          .Case([&](ExpOp) { return "expf(" + in(0) + ")"; })
          .Case([&](GeluGradOp g) {
            return std::string(g.isTanhApproximation() ? "stepc_gelu_tanh_grad("
                                                       : "stepc_gelu_grad(") +
                   in(0) + ", " + in(1) + ")";
          })
          .Case([&](GeluOp g) {
            return std::string(g.isTanhApproximation() ? "stepc_gelu_tanh("
                                                       : "stepc_gelu(") +
                   in(0) + ")";
          })
          .Case([&](LogOp) { return "logf(" + in(0) + ")"; })
          .Case([&](MaximumOp) { return "fmaxf(" + in(0) + ", " + in(1) + ")"; })
          .Case([&](MinimumOp) { return "fminf(" + in(0) + ", " + in(1) + ")"; })
          .Case([&](MulOp) { return in(0) + " * " + in(1); })
          .Case([&](NegOp) { return "-" + in(0); })
          .Case([&](ReluGradOp) { return in(1) + " > 0.0f ? " + in(0) + " : 0.0f"; })
          .Case([&](ReluOp) { return in(0) + " > 0.0f ? " + in(0) + " : 0.0f"; })
          .Case([&](RsqrtOp) { return "1.0f / sqrtf(" + in(0) + ")"; })
          .Case([&](SigmoidOp) { return "stepc_sigmoid(" + in(0) + ")"; })
          .Case([&](SiluGradOp) { return "stepc_silu_grad(" + in(0) + ", " + in(1) + ")"; })
          .Case([&](SiluOp) { return in(0) + " * stepc_sigmoid(" + in(0) + ")"; })
          .Case([&](SqrtOp) { return "sqrtf(" + in(0) + ")"; })
          .Case([&](SubOp) { return in(0) + " - " + in(1); })
          .Case([&](TanhOp) { return "tanhf(" + in(0) + ")"; })
          .Default([](Operation *) { return std::nullopt; });
  if (!expr)
    return failure();
  loop(op->getResult(0), *expr);
  return success();
}

LogicalResult Emitter::emitConstant(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError() << "the CPU back end supports dense constants only";
  Value out = op.getResult();
  if (dense.isSplat() && isa<FloatType>(dense.getElementType())) {
    body << "  stepc_cpu_fill(" << ptr(out) << ", " << dense.getNumElements() << ", "
         << llvm::formatv("{0:e}", dense.getSplatValue<APFloat>().convertToDouble()).str()
         << "f);\n";
    return success();
  }
  std::string name = "c" + std::to_string(constants++);
  bool isFloat = isa<FloatType>(dense.getElementType());
  pre << "static const " << (isFloat ? "float " : "int32_t ") << name << "[] = {";
  if (isFloat)
    llvm::interleaveComma(dense.getValues<APFloat>(), pre, [&](APFloat v) {
      pre << llvm::formatv("{0:e}", v.convertToDouble()).str() << "f";
    });
  else
    llvm::interleaveComma(dense.getValues<APInt>(), pre,
                          [&](APInt v) { pre << v.getSExtValue(); });
  pre << "};\n";
  body << "  memcpy(" << ptr(out) << ", " << name << ", sizeof(" << name << "));\n";
  return success();
}

LogicalResult Emitter::emitOp(Operation *op) {
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  for (Value v : values) {
    Type elem = typeOf(v).getElementType();
    if (!elem.isF32() && !elem.isInteger(32))
      return op->emitOpError() << "the CPU back end supports f32 and i32 tensors, got "
                               << v.getType();
  }
  waitFor(op);
  if (isa<ReshapeOp, func::ReturnOp>(op))
    return success();
  ++kernels;
  body << "  // " << op->getName() << " " << where(op) << "\n";
  if (op->hasTrait<OpTrait::Elementwise>() && succeeded(emitElementwise(op)))
    return success();
  auto shape = [&](Value v) { return array(typeOf(v).getShape()); };
  auto rank = [&](Value v) { return std::to_string(typeOf(v).getRank()); };
  auto numel = [&](Value v) { return std::to_string(typeOf(v).getNumElements()); };
  auto lastDim = [&](Value v) { return typeOf(v).getShape().back(); };
  auto rows = [&](Value v) { return typeOf(v).getNumElements() / lastDim(v); };
  auto reduceMask = [&](ArrayRef<int64_t> dims, int64_t r) {
    SmallVector<int> mask(r, 0);
    for (int64_t d : dims)
      mask[d] = 1;
    return intArray(mask);
  };
  auto zeros = [&](int64_t r) { return array(SmallVector<int64_t>(r, 0)); };
  std::string s;
  llvm::raw_string_ostream &b = body;
  LogicalResult result =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](AdamwOp a) {
            b << llvm::formatv("  stepc_cpu_adamw({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                               "{8:e}, {9:e}, {10:e}, {11:e});\n",
                               ptr(a.getParam()), ptr(a.getGrad()), ptr(a.getM()),
                               ptr(a.getV()), numel(a.getParam()), ptr(a.getLr()),
                               ptr(a.getStep()), ptr(a.getGradScale()),
                               a.getBeta1().convertToDouble(), a.getBeta2().convertToDouble(),
                               a.getEpsilon().convertToDouble(),
                               a.getWeightDecay().convertToDouble());
            return success();
          })
          .Case([&](AttentionGradOp a) {
            RankedTensorType q = a.getQuery().getType(), k = a.getKey().getType();
            b << llvm::formatv("  stepc_cpu_attention_grad({0}, {1}, {2}, {3}, {4}, {5}, "
                               "{6}, {7}, {8}, {9}, {10}, {11:e}, {12}, {13}, {14});\n",
                               ptr(a.getGrad()), ptr(a.getQuery()), ptr(a.getKey()),
                               ptr(a.getValue()), q.getDimSize(0), q.getDimSize(1),
                               k.getDimSize(1), a.getNumHeads(), a.getNumKvHeads(),
                               a.getHeadDim(), a.getCausal() ? 1 : 0,
                               a.getEffectiveScale(), ptr(a.getQueryGrad()),
                               ptr(a.getKeyGrad()), ptr(a.getValueGrad()));
            return success();
          })
          .Case([&](AttentionOp a) {
            RankedTensorType q = a.getQuery().getType(), k = a.getKey().getType();
            b << llvm::formatv("  stepc_cpu_attention({0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                               "{7}, {8}, {9}, {10:e}, {11});\n",
                               ptr(a.getQuery()), ptr(a.getKey()), ptr(a.getValue()),
                               q.getDimSize(0), q.getDimSize(1), k.getDimSize(1),
                               a.getNumHeads(), a.getNumKvHeads(), a.getHeadDim(),
                               a.getCausal() ? 1 : 0, a.getEffectiveScale(), ptr(a));
            return success();
          })
          .Case<BatchMatmulOp, MatmulOp>([&](auto m) {
            RankedTensorType lhs = m.getLhs().getType(), out = m.getType();
            int64_t k = lhs.getDimSize(lhs.getRank() - (m.getTransposeA() ? 2 : 1));
            int64_t batch = out.getNumElements() / (out.getShape().back() *
                                                    out.getDimSize(out.getRank() - 2));
            b << llvm::formatv("  stepc_cpu_matmul({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                               "{8}, {9});\n",
                               ptr(m.getLhs()), ptr(m.getRhs()), ptr(m), batch,
                               out.getDimSize(out.getRank() - 2), out.getShape().back(), k,
                               m.getTransposeA() ? 1 : 0, m.getTransposeB() ? 1 : 0,
                               isa<MatmulOp>(op) ? 1 : 0);
            return success();
          })
          .Case([&](BroadcastOp o) {
            b << "  stepc_cpu_broadcast(" << ptr(o.getInput()) << ", " << shape(o.getInput())
              << ", " << rank(o.getInput()) << ", " << ptr(o) << ", " << shape(o) << ", "
              << rank(o) << ");\n";
            return success();
          })
          .Case([&](ConcatOp c) {
            int64_t offset = 0, r = c.getType().getRank();
            for (Value in : c.getInputs()) {
              SmallVector<int64_t> at(r, 0);
              at[c.getDim()] = offset;
              offset += typeOf(in).getDimSize(c.getDim());
              b << "  stepc_cpu_copy_box(" << ptr(in) << ", " << shape(in) << ", "
                << zeros(r) << ", " << ptr(c) << ", " << shape(c) << ", " << array(at)
                << ", " << shape(in) << ", " << r << ");\n";
            }
            return success();
          })
          .Case([&](ConstantOp c) { return emitConstant(c); })
          .Case([&](mesh::AllGatherOp g) -> LogicalResult {
            int64_t count = typeOf(g.getInput()).getNumElements();
            int axes = axesMask(g.getMeshAxes());
            collectives.push_back({"STEPC_ALL_GATHER", axes, count});
            std::string request = startRequest(g.getResult());
            b << "  if (collectives->all_gather(collectives->ctx, " << axes << ", "
              << ptr(g.getInput()) << ", "
              << ptr(g.getResult()) << ", " << count << ", &" << request
              << "))\n    return stepc_fail_text(error, error_len, "
              << cString(where(op) + ": mesh.all_gather #" + std::to_string(collectives.size()) +
                         " failed")
              << ");\n";
            return success();
          })
          .Case([&](mesh::ReduceScatterOp r) -> LogicalResult {
            if (r.getReduction() != mesh::ReductionKind::Sum)
              return r.emitOpError() << "the CPU back end reduces with sum only";
            int64_t count = typeOf(r.getResult()).getNumElements();
            int axes = axesMask(r.getMeshAxes());
            collectives.push_back({"STEPC_REDUCE_SCATTER", axes, count});
            std::string request = startRequest(r.getResult());
            b << "  if (collectives->reduce_scatter_sum(collectives->ctx, " << axes << ", "
              << ptr(r.getInput())
              << ", " << ptr(r.getResult()) << ", " << count << ", &" << request
              << "))\n    return stepc_fail_text(error, error_len, "
              << cString(where(op) + ": mesh.reduce_scatter #" +
                         std::to_string(collectives.size()) + " failed")
              << ");\n";
            return success();
          })
          // all_reduce(sum): a copy, then the runtime's in-place reduction.
          .Case([&](mesh::AllReduceOp r) -> LogicalResult {
            if (r.getReduction() != mesh::ReductionKind::Sum)
              return r.emitOpError() << "the CPU back end reduces with sum only";
            int axes = axesMask(r.getMeshAxes());
            collectives.push_back({"STEPC_ALL_REDUCE", axes, typeOf(r.getInput()).getNumElements()});
            std::string request = startRequest(r.getResult());
            b << "  memcpy(" << ptr(r.getResult()) << ", " << ptr(r.getInput()) << ", "
              << numel(r.getInput()) << " * sizeof(float));\n"
              << "  if (collectives->all_reduce_sum(collectives->ctx, " << axes << ", "
              << ptr(r.getResult())
              << ", " << numel(r.getInput()) << ", &" << request
              << "))\n    return stepc_fail_text(error, error_len, "
              << cString(where(op) + ": mesh.all_reduce #" + std::to_string(collectives.size()) +
                         " failed")
              << ");\n";
            return success();
          })
          .Case([&](ConvertOp c) {
            loop(c, "(float)" + ptr(c.getInput()) + "[i]");
            return success();
          })
          .Case([&](CrossEntropyGradOp c) {
            int64_t v = lastDim(c.getLogits());
            checkIds(op,
                     llvm::formatv("stepc_cpu_cross_entropy_grad({0}, {1}, {2}, {3}, {4}, {5})",
                                   ptr(c.getGrad()), ptr(c.getLogits()), ptr(c.getTargets()),
                                   rows(c.getLogits()), v, ptr(c)),
                     c.getTargets(), "target", v);
            return success();
          })
          .Case([&](CrossEntropyOp c) {
            int64_t v = lastDim(c.getLogits());
            checkIds(op,
                     llvm::formatv("stepc_cpu_cross_entropy({0}, {1}, {2}, {3}, {4})",
                                   ptr(c.getLogits()), ptr(c.getTargets()),
                                   rows(c.getLogits()), v, ptr(c)),
                     c.getTargets(), "target", v);
            return success();
          })
          .Case([&](EmbeddingGradOp e) {
            int64_t v = e.getNumEmbeddings();
            checkIds(op,
                     llvm::formatv("stepc_cpu_embedding_grad({0}, {1}, {2}, {3}, {4}, {5})",
                                   ptr(e.getGrad()), ptr(e.getIds()), numel(e.getIds()), v,
                                   lastDim(e), ptr(e)),
                     e.getIds(), "id", v);
            return success();
          })
          .Case([&](EmbeddingOp e) {
            int64_t v = e.getTable().getType().getDimSize(0);
            checkIds(op,
                     llvm::formatv("stepc_cpu_embedding({0}, {1}, {2}, {3}, {4}, {5})",
                                   ptr(e.getTable()), ptr(e.getIds()), numel(e.getIds()), v,
                                   lastDim(e), ptr(e)),
                     e.getIds(), "id", v);
            return success();
          })
          .Case([&](LayerNormGradOp l) {
            b << llvm::formatv("  stepc_cpu_layer_norm_grad({0}, {1}, {2}, {3}, {4}, {5:e}, "
                               "{6}, {7}, {8});\n",
                               ptr(l.getGrad()), ptr(l.getInput()), ptr(l.getWeight()),
                               rows(l.getInput()), lastDim(l.getInput()),
                               l.getEpsilon().convertToDouble(), ptr(l.getInputGrad()),
                               ptr(l.getWeightGrad()), ptr(l.getBiasGrad()));
            return success();
          })
          .Case([&](LayerNormOp l) {
            b << llvm::formatv("  stepc_cpu_layer_norm({0}, {1}, {2}, {3}, {4}, {5:e}, {6});\n",
                               ptr(l.getInput()), ptr(l.getWeight()), ptr(l.getBias()),
                               rows(l.getInput()), lastDim(l.getInput()),
                               l.getEpsilon().convertToDouble(), ptr(l));
            return success();
          })
          .Case([&](PadOp p) {
            int64_t r = p.getType().getRank();
            b << "  stepc_cpu_fill(" << ptr(p) << ", " << numel(p) << ", 0.0f);\n";
            b << "  stepc_cpu_copy_box(" << ptr(p.getInput()) << ", " << shape(p.getInput())
              << ", " << zeros(r) << ", " << ptr(p) << ", " << shape(p) << ", "
              << array(p.getLow()) << ", " << shape(p.getInput()) << ", " << r << ");\n";
            return success();
          })
          .Case([&](ReduceMaxGradOp r) {
            int64_t rk = r.getInput().getType().getRank();
            b << "  stepc_cpu_reduce_max_grad(" << ptr(r.getGrad()) << ", " << ptr(r.getInput())
              << ", " << shape(r.getInput()) << ", " << rk << ", "
              << reduceMask(r.getDims(), rk) << ", " << ptr(r) << ");\n";
            return success();
          })
          .Case<ReduceMaxOp, ReduceMeanOp, ReduceSumOp>([&](auto r) {
            int kind = isa<ReduceSumOp>(op) ? 0 : isa<ReduceMaxOp>(op) ? 1 : 2;
            int64_t rk = r.getInput().getType().getRank();
            b << "  stepc_cpu_reduce(" << ptr(r.getInput()) << ", " << shape(r.getInput())
              << ", " << rk << ", " << reduceMask(r.getDims(), rk) << ", " << kind << ", "
              << ptr(r) << ");\n";
            return success();
          })
          .Case([&](RmsNormGradOp l) {
            b << llvm::formatv("  stepc_cpu_rms_norm_grad({0}, {1}, {2}, {3}, {4}, {5:e}, "
                               "{6}, {7});\n",
                               ptr(l.getGrad()), ptr(l.getInput()), ptr(l.getWeight()),
                               rows(l.getInput()), lastDim(l.getInput()),
                               l.getEpsilon().convertToDouble(), ptr(l.getInputGrad()),
                               ptr(l.getWeightGrad()));
            return success();
          })
          .Case([&](RmsNormOp l) {
            b << llvm::formatv("  stepc_cpu_rms_norm({0}, {1}, {2}, {3}, {4:e}, {5});\n",
                               ptr(l.getInput()), ptr(l.getWeight()), rows(l.getInput()),
                               lastDim(l.getInput()), l.getEpsilon().convertToDouble(), ptr(l));
            return success();
          })
          .Case([&](RotaryOp r) {
            RankedTensorType t = r.getType();
            b << llvm::formatv("  stepc_cpu_rotary({0}, {1}, {2}, {3}, {4}, {5:e}, {6}, {7});\n",
                               ptr(r.getInput()), t.getDimSize(0), t.getDimSize(1),
                               t.getDimSize(2), r.getHeadDim(),
                               r.getTheta().convertToDouble(), r.getInverse() ? 1 : 0, ptr(r));
            return success();
          })
          .Case([&](SliceOp sl) {
            int64_t r = sl.getType().getRank();
            b << "  stepc_cpu_copy_box(" << ptr(sl.getInput()) << ", " << shape(sl.getInput())
              << ", " << array(sl.getOffsets()) << ", " << ptr(sl) << ", " << shape(sl)
              << ", " << zeros(r) << ", " << shape(sl) << ", " << r << ");\n";
            return success();
          })
          .Case<SoftmaxGradOp, SoftmaxOp>([&](auto sm) {
            ArrayRef<int64_t> dims = sm.getType().getShape();
            int64_t d = sm.getDim(), outer = 1, inner = 1;
            for (int64_t i = 0; i < d; ++i)
              outer *= dims[i];
            for (size_t i = d + 1; i < dims.size(); ++i)
              inner *= dims[i];
            if constexpr (std::is_same_v<decltype(sm), SoftmaxOp>)
              b << llvm::formatv("  stepc_cpu_softmax({0}, {1}, {2}, {3}, {4});\n",
                                 ptr(sm.getInput()), outer, dims[d], inner, ptr(sm));
            else
              b << llvm::formatv("  stepc_cpu_softmax_grad({0}, {1}, {2}, {3}, {4}, {5});\n",
                                 ptr(sm.getGrad()), ptr(sm.getOutput()), outer, dims[d],
                                 inner, ptr(sm));
            return success();
          })
          .Case([&](TransposeOp t) {
            b << "  stepc_cpu_transpose(" << ptr(t.getInput()) << ", " << shape(t.getInput())
              << ", " << rank(t.getInput()) << ", " << array(t.getPermutation()) << ", "
              << ptr(t) << ");\n";
            return success();
          })
          .Default([&](Operation *other) {
            return other->emitOpError() << "has no CPU lowering";
          });
  return result;
}

std::string Emitter::metadata(const ModuleSummary &summary) {
  std::string text;
  llvm::raw_string_ostream os(text);
  unsigned n = step.getNumArguments();
  for (unsigned i = 0; i < n; ++i)
    os << "static const int64_t shape" << i << "[] = {"
       << llvm::join(llvm::map_range(typeOf(step.getArgument(i)).getShape(),
                                     [](int64_t d) { return std::to_string(d); }),
                     ", ")
       << (typeOf(step.getArgument(i)).getRank() == 0 ? "0" : "") << "};\n";
  os << "static const stepc_arg_info kArgs[] = {\n";
  for (unsigned i = 0; i < n; ++i) {
    RankedTensorType type = typeOf(step.getArgument(i));
    std::string name, kind = "STEPC_ARG_INPUT", init = "STEPC_INIT_ZEROS";
    double stddev = 0;
    int64_t bound = 0;
    int64_t globalRows = type.getRank() > 0 ? type.getDimSize(0) : 1;
    if (auto rows = step.getArgAttrOfType<IntegerAttr>(i, StepDialect::kShardOfAttrName))
      globalRows = rows.getInt();
    if (auto p = step.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName)) {
      name = p.getName().str();
      kind = "STEPC_ARG_PARAM";
      init = p.getInit() == InitKind::Ones    ? "STEPC_INIT_ONES"
             : p.getInit() == InitKind::Zeros ? "STEPC_INIT_ZEROS"
                                              : "STEPC_INIT_NORMAL";
      stddev = p.getEffectiveStd();
    } else if (auto s = step.getArgAttrOfType<StringAttr>(i, StepDialect::kStateAttrName)) {
      name = s.getValue().str();
      kind = StringRef(name).starts_with("exp_avg_sq.") ? "STEPC_ARG_EXP_AVG_SQ"
                                                        : "STEPC_ARG_EXP_AVG";
      // A moment is sharded like its parameter.
      StringRef param = StringRef(name).split('.').second;
      for (unsigned j = 0; j < n; ++j)
        if (auto p = step.getArgAttrOfType<ParamAttr>(j, StepDialect::kParamAttrName);
            p && p.getName() == param)
          if (auto rows = step.getArgAttrOfType<IntegerAttr>(j, StepDialect::kShardOfAttrName))
            globalRows = rows.getInt();
    } else if (auto h = step.getArgAttrOfType<StringAttr>(i, StepDialect::kHyperAttrName)) {
      name = h.getValue().str();
      kind = name == "lr" ? "STEPC_ARG_LR" : "STEPC_ARG_STEP";
    } else if (auto in = step.getArgAttrOfType<StringAttr>(i, StepDialect::kInputAttrName)) {
      name = in.getValue().str();
      for (Operation *user : step.getArgument(i).getUsers()) {
        if (auto e = dyn_cast<EmbeddingOp>(user))
          bound = std::max(bound, e.getTable().getType().getDimSize(0));
        if (auto c = dyn_cast<CrossEntropyOp>(user))
          bound = std::max(bound, c.getLogits().getType().getShape().back());
      }
    }
    os << llvm::formatv("  {{{0}, {1}, {2}, {3}, shape{4}, {5}, {6:e}, {7}, {8}},\n",
                        cString(name), kind,
                        type.getElementType().isF32() ? "STEPC_F32" : "STEPC_I32",
                        type.getRank(), i, init, stddev, bound, globalRows);
  }
  os << "};\n\n";
  if (!collectives.empty()) {
    os << "static const stepc_collective_info kCollectives[] = {\n";
    for (auto &[kind, axes, count] : collectives)
      os << "  {" << kind << ", " << axes << ", " << count << "},\n";
    os << "};\n\n";
  }
  os << "static const stepc_module_info kInfo = {\n"
     << "  STEPC_ABI_VERSION, \"cpu\", " << n << ", kArgs, " << plan.arenaBytes << ", "
     << summary.modelFlops << ", " << summary.executedFlops << ", " << summary.tokens << ",\n  "
     << cString(summary.reportJson) << ", " << summary.worldSize << ", "
     << cString(summary.sharding) << ", " << summary.meshShape.size() << ", {"
     << summary.meshShape[0] << ", " << (summary.meshShape.size() > 1 ? summary.meshShape[1] : 1)
     << "}, " << collectives.size() << ", " << (collectives.empty() ? "0" : "kCollectives")
     << "};\n\n"
     << "extern \"C\" const stepc_module_info *stepc_module_info_v2(void) { return &kInfo; }\n";
  return text;
}

FailureOr<std::string> Emitter::run(const ModuleSummary &summary) {
  Block &block = step.getBody().front();
  for (Operation &op : block)
    if (failed(emitOp(&op)))
      return failure();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  std::string lossExpr, normExpr;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto name = step.getResultAttrOfType<StringAttr>(i, StepDialect::kResultAttrName);
    if (name && name.getValue() == "loss")
      lossExpr = ptr(v) + "[0]";
    else if (name && name.getValue() == "grad_norm")
      normExpr = ptr(v) + "[0]";
    else if (!plan.argumentOf.count(v))
      return step.emitOpError() << "result #" << i
                                << " is neither the loss, the norm, nor updated in place";
  }
  if (lossExpr.empty() || normExpr.empty())
    return step.emitOpError() << "expects results named 'loss' and 'grad_norm'";

  std::string out;
  llvm::raw_string_ostream os(out);
  os << "// Generated by stepc for the CPU target; do not edit.\n"
     << "#include \"stepc_abi.h\"\n#include \"cpu_kernels.h\"\n\n"
     << "#include <math.h>\n#include <stdio.h>\n#include <string.h>\n\n"
     << "static int stepc_fail(char *error, size_t len, const char *what, long long id,\n"
     << "                      long long position, long long bound) {\n"
     << "  snprintf(error, len, \"%s %lld at position %lld is outside [0, %lld)\", what, id,\n"
     << "           position, bound);\n  return 1;\n}\n\n"
     << "static int stepc_fail_text(char *error, size_t len, const char *text) {\n"
     << "  snprintf(error, len, \"%s\", text);\n  return 1;\n}\n\n"
     << pre.str() << "\n" << metadata(summary) << "\n"
     << "extern \"C\" int stepc_train_step_v2(void *const *args, char *arena,\n"
     << "                                   const stepc_collectives *collectives, float *loss,\n"
     << "                                   float *grad_norm, char *error, size_t error_len) {\n";
  os << "  if (kInfo.world_size > 1 && (!collectives || collectives->size != kInfo.world_size))\n"
     << "    return stepc_fail_text(error, error_len, \"a sharded step needs collectives over "
     << "its world size\");\n";
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
    os << "  " << (typeOf(step.getArgument(i)).getElementType().isF32() ? "float" : "int32_t")
       << " *a" << i << " = (" << (typeOf(step.getArgument(i)).getElementType().isF32()
                                       ? "float"
                                       : "int32_t")
       << " *)args[" << i << "];\n";
  DenseMap<int64_t, Type> bufferTypes;
  for (auto [v, id] : plan.bufferOf)
    bufferTypes[id] = typeOf(v).getElementType();
  for (size_t id = 0; id < plan.buffers.size(); ++id) {
    bool isFloat = !bufferTypes.count(id) || bufferTypes[id].isF32();
    os << "  " << (isFloat ? "float" : "int32_t") << " *b" << id << " = ("
       << (isFloat ? "float" : "int32_t") << " *)(arena + " << plan.buffers[id].offset
       << ");\n";
  }
  os << body.str() << "  *loss = " << lossExpr << ";\n  *grad_norm = " << normExpr
     << ";\n  return 0;\n}\n";
  return out;
}

} // namespace

FailureOr<std::string> stepc::emitCpuSource(func::FuncOp step, const MemoryPlan &plan,
                                            const ModuleSummary &summary) {
  return Emitter(step, plan).run(summary);
}
