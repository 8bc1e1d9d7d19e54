//===- CpuEmitter.cpp - C++ source for the CPU target ---------------------===//
//
// The step becomes C++ (repeated blocks outlined, OutlineBlocks.cpp):
// composite ops call the library kernels in runtime/kernels/cpu/,
// elementwise ops become OpenMP SIMD loops (broadcasts folded in),
// reshapes are free (aliases), step.adamw updates parameters and moments in
// place; bf16 values (--precision=bf16) are stored as uint16_t, widened on
// load and rounded on store, their GEMMs on oneDNN (kernels/cpu/gemm_bf16.cc).
// Every buffer is `arena + offset` from the memory plan. One table
// (emitOp) covers every op; an op outside it is an error at its location.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "SourceEmitter.h"
#include "StepInOrder.h"

#include "stepc/Compiler/ArenaPlan.h"

#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

class CpuEmitter : public SourceEmitter {
public:
  CpuEmitter(func::FuncOp step, const MemoryPlan &plan, bool profile = false)
      : SourceEmitter(step, plan, "cpu") {
    this->profile = profile;
  }

private:
  /// bf16 (step-mixed-precision) is stored as uint16_t and computed in float.
  std::string cType(Type element) override {
    return element.isBF16() ? "stepc_bf16" : SourceEmitter::cType(element);
  }
  LogicalResult checkTypes(Operation *op) override {
    SmallVector<Value> values(op->getOperands());
    llvm::append_range(values, op->getResults());
    // bf16 flows through GEMMs, attention, elementwise loops (fused or not:
    // loaded as float, stored rounded) and reshapes; the other library
    // kernels take f32.
    // A bf16 kernel (packed attention) takes bf16 in all it computes.
    auto call = op->getParentOfType<stepk::CallOp>();
    bool mixed = isa<ConvertOp, stepk::GemmOp, AttentionOp,
                     AttentionGradOp, stepk::FusedOp, ReshapeOp>(op) ||
                 isFusableElementwise(op) || (call && call.getCallee().ends_with("_bf16"));
    for (Value v : values) {
      Type elem = typeOf(v).getElementType();
      if (elem.isF32() || elem.isInteger(32) || elem.isInteger(1) || (elem.isBF16() && mixed))
        continue;
      if (elem.isBF16())
        return op->emitOpError() << "takes bf16 only in GEMMs, attention and elementwise ops "
                                    "on the CPU target, got "
                                 << v.getType();
      return op->emitOpError() << "the CPU back end supports f32, bf16, i32 and i1 tensors, got "
                               << v.getType();
    }
    return success();
  }
  LogicalResult emitOp(Operation *op) override;
  void printCall(Operation *, StringRef callee, const std::string &args) override {
    body << "  stepc_cpu_" << callee << "(" << args << ");\n";
  }
  /// Each op's code stands alone, so equal blocks share a function.
  /// One loop over the kernel's elements: values in registers, results
  /// stored at the end of each iteration.
  LogicalResult emitFused(stepk::FusedOp fused) override {
    int64_t inner = innerPeriod(fused.getInputs());
    std::set<std::string> luts;
    GroupCode code = groupCode(
        fused, [&](unsigned k) { return load(fused.getInputs()[k], inner); },
        [](Type t, std::string e) {
          return t.isF32()          ? e
                 : t.isBF16()       ? "stepc_bf16_round(" + e + ")"
                 : t.isInteger(1) ? "(float)((" + e + ") != 0.0f)"
                                    : "(float)(int32_t)(" + e + ")";
        },
        [&](Operation *op, const std::function<std::string(unsigned)> &in) {
          return tableLookup(op, in, luts);
        });
    // The tables the loop reads, fetched once before it.
    if (!luts.empty()) {
      body << "  {\n";
      for (const std::string &lut : luts)
        body << "  const float *const " << lut << " = stepc_" << lut << "();\n";
    }
    // A bf16 register holds its value exactly (rounded where it was made,
    // or loaded): stored as is.
    std::string stores;
    for (auto [out, reg] : llvm::zip(fused.getResults(), code.outputRegisters))
      stores += "    " + ptr(out) + "[i] = " +
                (typeOf(out).getElementType().isBF16() ? "stepc_bf16_bits(" + reg + ")"
                                                       : stored(out, reg)) +
                ";\n";
    elementLoop(fused.getNumElements(), inner, code.statements + stores,
                streams(fused.getInputs(), fused.getResults()));
    if (!luts.empty())
      body << "  }\n";
    return success();
  }
  /// An expensive unary helper (gelu, silu, ...) of a bf16 value, or the
  /// gradient dy · g(x) of one at a bf16 x, as one load from a table of
  /// the helper at every bf16 value (cpu_kernels.h's stepc_fill_bf16_table,
  /// made by the same inlined code: the same floats, bit for bit): the GELU
  /// pair's math was most of a bf16 step's loop time. Adds the table's
  /// local name to `luts`; nullopt for any other op.
  std::optional<std::string> tableLookup(Operation *op,
                                         const std::function<std::string(unsigned)> &in,
                                         std::set<std::string> &luts) {
    auto exact = [this](Value v) {
      if (typeOf(v).getElementType().isBF16())
        return true;
      auto widen = asStepReads(v).getDefiningOp<ConvertOp>();
      return widen && typeOf(widen.getInput()).getElementType().isBF16();
    };
    bool unary = isa<GeluOp, SiluOp, SigmoidOp, TanhOp, ErfOp>(op);
    bool gradient = isa<GeluGradOp, SiluGradOp>(op);
    if ((!unary && !gradient) || !exact(op->getOperand(unary ? 0 : 1)))
      return std::nullopt;
    // The helper as a function of x (a gradient's at dy = 1: dy · g(x) is
    // how both gradients compute, so dy times the entry is their value; the
    // 1 is opaque to the compiler, so g(x) is contracted into multiply-adds
    // as in the loop, where dy is a variable).
    std::string helper = *elementwiseExpr(op, [&](unsigned k) {
      return unary || k == 1 ? std::string("x") : std::string("one");
    });
    auto [it, inserted] = lookupTables.try_emplace(helper);
    if (inserted) {
      it->second = "lut" + std::to_string(lookupTables.size() - 1);
      pre << "static const float *stepc_" << it->second << "() {\n"
          << "  static float table[65536];\n"
          << "  static const bool made = stepc_fill_bf16_table(table, ["
          << (unary ? "" : "one = stepc_opaque_one()") << "](float x) { return " << helper
          << "; });\n"
          << "  (void)made;\n  return table;\n}\n";
    }
    luts.insert(it->second);
    std::string entry = it->second + "[stepc_bf16_bits(" + in(unary ? 0 : 1) + ")]";
    return unary ? entry : "(" + in(0) + " * " + entry + ")";
  }
  /// Lookup tables by helper expression (equal helpers share one table, so
  /// equal blocks' code is equal text).
  std::map<std::string, std::string> lookupTables;
  /// Constant tables by type and contents.
  std::map<std::string, std::string> constantTables;
  void planFusions(Block &block) override;
  bool computedByConsumers(Operation *op) override {
    return op->getNumResults() == 1 && foldedBroadcasts.count(op->getResult(0));
  }
  /// Broadcasts of a trailing block (a bias over rows, a position table
  /// over the batch) whose consumers are all elementwise loops: the loops
  /// read the block at i modulo its size, nothing is materialised. Each
  /// broadcast's (input, period).
  /// (A broadcast in one block function call may feed loops in another,
  /// or in the step: the input's storage is that call's.)
  struct Fold {
    Value input;
    int64_t period;
    int64_t argument, buffer;  // where the input is (argument >= 0, or a buffer)
  };
  std::string foldInput(const Fold &f) {
    return ptrTo(typeOf(f.input).getElementType(), f.argument, f.buffer);
  }
  /// By the value a loop reads and by the broadcast's result, as the step
  /// (or the call being printed) names them.
  DenseMap<Value, Fold> foldedBroadcasts;
  /// Those of each block function call's values (by call, in order), put in
  /// foldedBroadcasts while that call is printed.
  std::vector<DenseMap<Value, Fold>> foldedInCalls;
  void planStepFusions();
  /// The period of the loop's inner dimension: the smallest folded
  /// broadcast's among `inputs` (0: none, a flat loop).
  int64_t innerPeriod(ValueRange inputs) {
    int64_t inner = 0;
    for (Value v : inputs)
      if (auto it = foldedBroadcasts.find(v); it != foldedBroadcasts.end() && it->second.period > 1)
        inner = inner ? std::min(inner, it->second.period) : it->second.period;
    return inner;
  }
  /// A float register's value as `out` stores it (bf16: rounded to nearest
  /// even; a mask: 0 or 1; an integer: truncated by the store).
  std::string stored(Value out, const std::string &value) {
    Type element = typeOf(out).getElementType();
    if (element.isInteger(1))
      return "(int32_t)((" + value + ") != 0.0f)";
    return element.isBF16() ? "stepc_f32_to_bf16(" + value + ")" : value;
  }
  /// Element i of `v` in a loop with that inner period (i = r·inner + j), as
  /// a float (bf16 widened; folded broadcasts are f32).
  std::string load(Value v, int64_t inner) {
    auto it = foldedBroadcasts.find(v);
    if (it == foldedBroadcasts.end())
      return typeOf(v).getElementType().isBF16() ? "stepc_bf16_to_f32(" + ptr(v) + "[i])"
                                                 : ptr(v) + "[i]";
    const std::string input = foldInput(it->second);
    const int64_t period = it->second.period;
    if (period == 1)
      return input + "[0]";
    if (period == inner)
      return input + "[j]";
    return input + "[(r % " + std::to_string(period / inner) + ") * " +
           std::to_string(inner) + " + j]";
  }
  /// An array a loop reads or writes at element i (`base`[i]).
  struct Stream {
    std::string base;
    int64_t size;
    bool write;
  };
  /// The arrays of a loop reading `inputs` (folded broadcasts aside: their
  /// blocks stay in cache) and writing `outputs`, one entry per address.
  std::vector<Stream> streams(ValueRange inputs, ValueRange outputs) {
    std::vector<Stream> all;
    auto add = [&](Value v, bool write) {
      std::string base = ptr(v);
      auto same = llvm::find_if(all, [&](const Stream &s) { return s.base == base; });
      if (same != all.end()) {
        same->write |= write;
        return;
      }
      RankedTensorType type = typeOf(v);
      all.push_back({base, tensorBytes(type) / std::max<int64_t>(1, type.getNumElements()), write});
    };
    for (Value v : inputs)
      if (!foldedBroadcasts.count(v))
        add(v, false);
    for (Value v : outputs)
      add(v, true);
    return all;
  }
  /// Loops over this many elements or more fetch their arrays ahead of use
  /// (cpu_kernels.h's stepc_prefetch_r/_w), in chunks of kChunk elements
  /// kAhead elements ahead: a smaller loop's arrays are in cache.
  static constexpr int64_t kPrefetchElements = 65536, kChunk = 256, kAhead = 4096;
  /// Fetches for a chunk [first, last) + `ahead` of every stream.
  void prefetch(const std::vector<Stream> &arrays, int64_t n, const std::string &first,
                const std::string &last, const std::string &ahead) {
    for (const Stream &s : arrays)
      body << "    stepc_prefetch_" << (s.write ? "w" : "r") << "(" << s.base << ", " << first
           << " + " << ahead << ", " << last << " + " << ahead << ", " << n << ", " << s.size
           << ");\n";
  }
  /// A vectorised loop over n elements running `statements` for each i: flat,
  /// or rows of `inner` elements (r, j) when a folded broadcast is read;
  /// over a large tensor in chunks, each fetching `arrays` ahead.
  void elementLoop(int64_t n, int64_t inner, const std::string &statements,
                   const std::vector<Stream> &arrays) {
    bool fetch = n >= kPrefetchElements && !arrays.empty();
    if (!inner && fetch) {
      body << "#pragma omp parallel for\n"
           << "  for (int64_t c = 0; c < " << n << "; c += " << kChunk << ") {\n"
           << "    const int64_t e = c + " << kChunk << " < " << n << " ? c + " << kChunk
           << " : " << n << ";\n";
      prefetch(arrays, n, "c", "e", std::to_string(kAhead));
      body << "#pragma omp simd\n"
           << "  for (int64_t i = c; i < e; ++i) {\n" << statements << "  }\n  }\n";
      return;
    }
    if (!inner) {
      simdPragma(n);
      body << "  for (int64_t i = 0; i < " << n << "; ++i) {\n" << statements << "  }\n";
      return;
    }
    if (n >= 4096)
      body << "#pragma omp parallel for\n";
    body << "  for (int64_t r = 0; r < " << n / inner << "; ++r) {\n";
    if (fetch)
      prefetch(arrays, n, "r * " + std::to_string(inner), "(r + 1) * " + std::to_string(inner),
               std::to_string((kAhead + inner - 1) / inner * inner));
    body << "#pragma omp simd\n"
         << "  for (int64_t j = 0; j < " << inner << "; ++j) {\n"
         << "    const int64_t i = r * " << inner << " + j;\n"
         << statements << "  }\n  }\n";
  }
  LogicalResult emitConstant(ConstantOp op);
  /// One GEMM call: f32 (oneDNN, else OpenBLAS), or bf16 operands with f32
  /// accumulation writing bf16 or f32 (oneDNN, with an f32 `bias` added to
  /// the sum);
  /// `sharedRhs` is step.matmul's form.
  void emitMatmul(Value lhs, Value rhs, Value result, bool ta, bool tb, bool sharedRhs,
                  Value bias = Value());
  /// Every elementwise loop is vectorised (on threads from 4096 elements):
  /// its operands are disjoint or the same element (in place), and a block
  /// outlined into a function hides that from the compiler, whose scalar
  /// fallback would round libmvec's functions differently from the
  /// vector path.
  void simdPragma(int64_t n) {
    body << (n >= 4096 ? "#pragma omp parallel for simd\n" : "#pragma omp simd\n");
  }
  void prologue(raw_ostream &os) override {
    os << "#include \"stepc_abi.h\"\n#include \"cpu_kernels.h\"\n\n"
       << "#include <math.h>\n#include <stdio.h>\n#include <string.h>\n\n"
       << "static int stepc_fail(char *error, size_t len, const char *what, long long id,\n"
       << "                      long long position, long long bound) {\n"
       << "  snprintf(error, len, \"%s %lld at position %lld is outside [0, %lld)\", what, id,\n"
       << "           position, bound);\n  return 1;\n}\n\n";
  }
  std::string libraryDeclaration(stepk::CallOp c) override {
    // A kernel that checks ids returns the first bad position + 1.
    SmallVector<std::string> params = libraryInputTypes(c);
    llvm::append_range(params, libraryResultTypes(c));
    return (c.getIdCheck() ? "int64_t" : "void") + (" stepc_cpu_" + c.getCallee()).str() + "(" +
           llvm::join(params, ", ") + ");";
  }
  void stepBegin(raw_ostream &) override {}
  void stepEnd(raw_ostream &os, const std::string &loss, const std::string &norm) override {
    os << "  *loss = " << loss << "[0];\n";
    if (!norm.empty())  // the eval entry has none
      os << "  *grad_norm = " << norm << "[0];\n";
  }
  std::string copyToHost(const std::string &dst, const std::string &src, int64_t bytes,
                         const char *) override {
    return copyStatement(dst, src, bytes);
  }
  std::string copyStatement(const std::string &dst, const std::string &src,
                            int64_t bytes) override {
    return "memcpy(" + dst + ", " + src + ", " + std::to_string(bytes) + ");";
  }
  /// `op`'s result at every i: `expr`.
  void loop(Operation *op, const std::string &expr, int64_t inner) {
    Value out = op->getResult(0);
    int64_t n = typeOf(out).getNumElements();
    if (inner || n >= kPrefetchElements) {
      elementLoop(n, inner, "    " + ptr(out) + "[i] = " + stored(out, expr) + ";\n",
                  streams(op->getOperands(), op->getResults()));
      return;
    }
    simdPragma(n);
    body << "  for (int64_t i = 0; i < " << n << "; ++i) " << ptr(out) << "[i] = "
         << stored(out, expr) << ";\n";
  }
  void checkIds(Operation *op, const std::string &call, Value ids, StringRef what,
                int64_t bound) {
    body << "  if (int64_t bad = " << call << ")\n    return stepc_fail(error, error_len, "
         << cString(where(op) + ": '" + op->getName().getStringRef().str() + "' " + what.str())
         << ", " << ptr(ids) << "[bad - 1], bad - 1, " << bound << ");\n";
  }
};

/// The size of the block `b` repeats (its input with leading 1s dropped
/// is the result's trailing dims), or nullopt for another broadcast.
static std::optional<int64_t> trailingPeriod(BroadcastOp b) {
  ArrayRef<int64_t> in = typeOf(b.getInput()).getShape(), out = typeOf(b).getShape();
  while (!in.empty() && in.front() == 1)
    in = in.drop_front();
  if (in.size() > out.size() || in != out.take_back(in.size()))
    return std::nullopt;
  int64_t period = 1;
  for (int64_t d : in)
    period *= d;
  return period;
}

void CpuEmitter::planFusions(Block &block) {
  if (&block == &step.getBody().front()) {
    planStepFusions();
    return;
  }
  // A call being printed (the `runs`-th): its decisions.
  for (Operation &op : block)
    for (Value r : op.getResults())
      foldedBroadcasts.erase(r);
  for (BlockArgument argument : block.getArguments())
    foldedBroadcasts.erase(argument);
  if (runs < int64_t(foldedInCalls.size()))
    for (auto &[value, fold] : foldedInCalls[runs])
      foldedBroadcasts[value] = fold;
}

void CpuEmitter::planStepFusions() {
  foldedBroadcasts.clear();
  foldedInCalls.clear();
  FailureOr<StepInOrder> view = StepInOrder::of(step);
  if (failed(view))
    return;  // (emitCall says why)
  const std::vector<StepInOrder::Op> &ops = view->ops();
  foldedInCalls.resize(view->calls());
  auto overlaps = [&](StepInOrder::Storage a, StepInOrder::Storage b) {
    if (a.first >= 0 || b.first >= 0)
      return a.first >= 0 && a.first == b.first;
    const MemoryPlan::Buffer &x = plan.buffers[a.second], &y = plan.buffers[b.second];
    return !(x.offset + x.bytes <= y.offset || y.offset + y.bytes <= x.offset);
  };
  // The plan let the broadcast's input die at the broadcast: folding reads
  // it until the last consumer, so nothing written up to there may overlap
  // it (an AdamW on the bias, a buffer the plan reused).
  auto inputLivesOn = [&](int64_t at, ArrayRef<int64_t> users, StepInOrder::Instance input) {
    std::optional<StepInOrder::Storage> in = view->storage(input);
    if (!in)
      return false;
    int64_t last = at;
    for (int64_t user : users)
      last = std::max(last, user);
    for (int64_t k = at + 1; k <= last; ++k)
      for (Value r : ops[k].op->getResults())
        if (std::optional<StepInOrder::Storage> s = view->storage({r, ops[k].call});
            s && overlaps(*s, *in))
          return false;
    return true;
  };
  DenseMap<StepInOrder::Instance, Fold> folds;
  for (size_t k = 0; k < ops.size(); ++k) {
    auto b = dyn_cast<BroadcastOp>(ops[k].op);
    if (!b || !typeOf(b).getElementType().isF32())
      continue;
    const int64_t call = ops[k].call;
    StepInOrder::Instance result{b.getResult(), call};
    ArrayRef<int64_t> users = view->readers(result);
    std::optional<int64_t> period = trailingPeriod(b);
    bool consumersLoop = !users.empty() && view->nestedReaders(result).empty() &&
                         llvm::all_of(users, [&](int64_t user) {
                           Operation *op = ops[user].op;
                           return isa<stepk::FusedOp>(op) || isFusableElementwise(op);
                         });
    StepInOrder::Instance input = view->instance(b.getInput(), call);
    if (period && consumersLoop && inputLivesOn(k, users, input)) {
      auto [argument, buffer] = *view->storage(input);
      folds[result] = Fold{b.getInput(), *period, argument, buffer};
    }
  }
  // A loop's rows are its smallest period: every other folded input's
  // period must be a multiple of it (else that one is materialised, which
  // may change another loop's rows: until nothing changes).
  for (bool changed = true; changed;) {
    changed = false;
    for (const StepInOrder::Op &o : ops) {
      if (!isa<stepk::FusedOp>(o.op) && !isFusableElementwise(o.op))
        continue;
      int64_t inner = 0;
      for (Value v : o.op->getOperands())
        if (auto it = folds.find(view->instance(v, o.call));
            it != folds.end() && it->second.period > 1)
          inner = inner ? std::min(inner, it->second.period) : it->second.period;
      for (Value v : o.op->getOperands())
        if (auto it = folds.find(view->instance(v, o.call));
            it != folds.end() && inner && it->second.period % inner) {
          folds.erase(it);
          changed = true;
        }
    }
  }
  // Each fold under the names the step and each call give it: the
  // broadcast's result (not printed) and what each loop reads.
  auto names = [&](int64_t call) -> DenseMap<Value, Fold> & {
    return call < 0 ? foldedBroadcasts : foldedInCalls[call];
  };
  for (const StepInOrder::Op &o : ops) {
    for (Value r : o.op->getResults())
      if (auto it = folds.find({r, o.call}); it != folds.end())
        names(o.call)[r] = it->second;
    for (Value v : o.op->getOperands())
      if (auto it = folds.find(view->instance(v, o.call)); it != folds.end())
        names(o.call)[v] = it->second;
  }
}

LogicalResult CpuEmitter::emitConstant(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError() << "the CPU back end supports dense constants only";
  Value out = op.getResult();
  if (dense.isSplat() && isa<FloatType>(dense.getElementType())) {
    body << "  stepc_cpu_fill(" << ptr(out) << ", " << dense.getNumElements() << ", "
         << floatLiteral(dense.getSplatValue<APFloat>().convertToDouble()) << ");\n";
    return success();
  }
  bool isFloat = isa<FloatType>(dense.getElementType());
  std::string contents;
  llvm::raw_string_ostream os(contents);
  os << (isFloat ? "float " : "int32_t ");
  if (isFloat)
    llvm::interleaveComma(dense.getValues<APFloat>(), os, [&](APFloat v) {
      os << floatLiteral(v.convertToDouble());
    });
  else
    llvm::interleaveComma(dense.getValues<APInt>(), os, [&](APInt v) { os << storedInteger(v); });
  // Equal constants share one table (so equal block runs print equal code).
  auto [named, inserted] = constantTables.try_emplace(contents);
  if (inserted) {
    named->second = "c" + std::to_string(constants++);
    StringRef type = StringRef(contents).take_until([](char c) { return c == ' '; });
    pre << "static const " << type << " " << named->second << "[] = {"
        << StringRef(contents).drop_front(type.size() + 1) << "};\n";
  }
  const std::string &name = named->second;
  body << "  memcpy(" << ptr(out) << ", " << name << ", sizeof(" << name << "));\n";
  return success();
}

void CpuEmitter::emitMatmul(Value lhs, Value rhs, Value result, bool ta, bool tb,
                            bool sharedRhs, Value bias) {
  RankedTensorType lhsType = typeOf(lhs), out = typeOf(result);
  int64_t k = lhsType.getDimSize(lhsType.getRank() - (ta ? 2 : 1));
  int64_t m = out.getDimSize(out.getRank() - 2), n = out.getShape().back();
  int64_t batch = out.getNumElements() / (m * n);
  if (lhsType.getElementType().isBF16()) {  // f32 accumulation
    body << llvm::formatv("  stepc_cpu_matmul_bf16({0}, {1}, {2}, {10}, {3}, {4}, {5}, {6}, "
                          "{7}, {8}, {9}, {11});\n",
                          ptr(lhs), ptr(rhs), ptr(result), batch, m, n, k, ta ? 1 : 0,
                          tb ? 1 : 0, sharedRhs ? 1 : 0, out.getElementType().isF32() ? 1 : 0,
                          bias ? ptr(bias) : std::string("0"));
    return;
  }
  if (bias) {
    body << llvm::formatv("  stepc_cpu_matmul_bias({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                          "{8}, {9}, {10});\n",
                          ptr(lhs), ptr(rhs), ptr(result), batch, m, n, k, ta ? 1 : 0,
                          tb ? 1 : 0, sharedRhs ? 1 : 0, ptr(bias));
    return;
  }
  body << llvm::formatv("  stepc_cpu_matmul({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
                        "{9});\n",
                        ptr(lhs), ptr(rhs), ptr(result), batch, m, n, k, ta ? 1 : 0, tb ? 1 : 0,
                        sharedRhs ? 1 : 0);
}

LogicalResult CpuEmitter::emitOp(Operation *op) {
  if (isFusableElementwise(op)) {
    int64_t inner = innerPeriod(op->getOperands());
    auto in = [&](unsigned i) { return load(op->getOperand(i), inner); };
    if (std::optional<std::string> expr = elementwiseExpr(op, in)) {
      loop(op, *expr, inner);
      return success();
    }
  }
  auto numel = [&](Value v) { return std::to_string(typeOf(v).getNumElements()); };
  llvm::raw_string_ostream &b = body;
  LogicalResult result =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](AdamwOp a) {
            b << llvm::formatv("  stepc_cpu_{12}({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                               "{8:e}, {9:e}, {10:e}, {11:e});\n",
                               ptr(a.getParam()), ptr(a.getGrad()), ptr(a.getM()),
                               ptr(a.getV()), numel(a.getParam()), ptr(a.getLr()),
                               ptr(a.getStep()), ptr(a.getGradScale()),
                               a.getBeta1().convertToDouble(), a.getBeta2().convertToDouble(),
                               a.getEpsilon().convertToDouble(),
                               a.getWeightDecay().convertToDouble(),
                               a.getDecoupledWeightDecay() ? "adamw" : "adam");
            return success();
          })
          .Case([&](stepk::GemmOp g) {
            // step-fold-widening-gemms makes these: perhaps a bias (f32,
            // along the rows), no epilogue.
            if (g.getEpilogue() != stepk::Epilogue::none || g.getAux() || g.getEpilogueResult())
              return LogicalResult(g.emitOpError()
                                   << "has an epilogue: the CPU back end's GEMMs have none");
            if (g.getLhsScales() || g.getRhsScales())
              return LogicalResult(g.emitOpError()
                                   << "reads packed fp8 operands: the CPU back end's GEMMs read "
                                      "rounded values");
            emitMatmul(g.getLhs(), g.getRhs(), g.getResult(), g.getTransposeA(),
                       g.getTransposeB(), g.getSharedRhs(), g.getBias());
            return success();
          })
          .Case([&](stepk::CallOp c) {
            std::string text = "stepc_cpu_" + c.getCallee().str() + "(" + libraryArgs(c) + ")";
            // A kernel that checks ids returns the first bad position + 1.
            if (std::optional<StringRef> what = c.getIdCheck())
              checkIds(c.getKernelOp(), text, c.getInputs()[*c.getIdOperand()],
                       *what, *c.getIdBound());
            else
              b << "  " << text << ";\n";
            return success();
          })
          .Case([&](ConstantOp c) { return emitConstant(c); })
          .Default([&](Operation *other) {
            return other->emitOpError() << "has no CPU lowering";
          });
  return result;
}

} // namespace

FailureOr<std::string> stepc::emitCpuSource(func::FuncOp step, const ModuleSummary &summary,
                                            func::FuncOp evalStep, func::FuncOp sampleStep,
                                            bool profile) {
  // The plans are step-plan-memory's, made for the CPU (no CUDA layout).
  auto planFor = [](func::FuncOp f) -> FailureOr<MemoryPlan> {
    if (readCudaArena(f))
      return f.emitOpError() << "has a CUDA memory plan: the CPU emitter needs one made by "
                                "step-plan-memory target=cpu";
    return readMemoryPlan(f);
  };
  FailureOr<MemoryPlan> plan = planFor(step);
  if (failed(plan))
    return failure();
  CpuEmitter emitter(step, *plan, profile);
  if (failed(emitter.addForwardEntries(
          evalStep, sampleStep, planFor,
          [](func::FuncOp f, const MemoryPlan &p) -> std::unique_ptr<SourceEmitter> {
            return std::make_unique<CpuEmitter>(f, p);
          })))
    return failure();
  return emitter.run(summary);
}
