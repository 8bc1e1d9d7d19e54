//===- SourceEmitter.cpp - what the CPU and CUDA emitters share ----------===//

#include "SourceEmitter.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <tuple>

#include "runtime/stepc_abi.h"
#include "stepc/Compiler/ArenaPlan.h"
#include "stepc/Compiler/BlockCalls.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/CollectiveSchedule.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

RankedTensorType stepc::typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string stepc::floatLiteral(double value) {
  if (std::isnan(value))
    return "__builtin_nanf(\"\")";
  if (std::isinf(value))
    return value > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
  return llvm::formatv("{0:e}", value).str() + "f";
}

std::string stepc::cString(StringRef text) {
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

int64_t stepc::storedInteger(const APInt &value) {
  return value.getBitWidth() == 1 ? static_cast<int64_t>(value.getZExtValue())
                                  : value.getSExtValue();
}

std::string stepc::where(Operation *op) {
  std::string text;
  if (auto loc = dyn_cast<FileLineColLoc>(op->getLoc()))
    text = llvm::formatv("{0}:{1}:{2}", loc.getFilename().getValue(), loc.getLine(),
                         loc.getColumn());
  return text;
}

std::string SourceEmitter::cType(Type element) {
  if (element.isF32())
    return "float";
  if (element.isBF16())
    return "__nv_bfloat16";
  if (stepk::isFp8Bytes(element))
    return "uint8_t";  // an fp8 GEMM operand's packed bytes
  return "int32_t";
}

std::string SourceEmitter::site(StringRef text) {
  if (!runScope)
    return cString(text);
  runScope->sites.push_back(cString(text));
  return "sites[" + std::to_string(runScope->sites.size() - 1) + "]";
}

std::string SourceEmitter::location(Operation *op) {
  if (!runScope)
    return " " + where(op);
  if (runScope->firstLocation.empty())
    runScope->firstLocation = where(op);
  runScope->lastLocation = where(op);
  return "";
}

unsigned SourceEmitter::slot(const std::string &address, int64_t at, RunScope::Slot kind) {
  auto [it, inserted] = runScope->slotOf.try_emplace(address, runScope->at.size());
  if (inserted) {
    runScope->at.push_back(at);
    runScope->kind.push_back(kind);
  }
  return it->second;
}

std::string SourceEmitter::ptr(Value v) {
  auto arg = plan.argumentOf.find(v);
  if (arg != plan.argumentOf.end())
    return ptrTo(typeOf(v).getElementType(), arg->second, -1);
  return ptrTo(typeOf(v).getElementType(), -1, plan.bufferOf.lookup(v));
}

std::string SourceEmitter::ptrTo(Type element, int64_t argument, int64_t buffer) {
  std::string type = cType(element);
  bool inArg = argument >= 0;
  if (runScope) {
    // One slot per address, not per value: an op in place reads and writes
    // one pointer, so the compiler vectorises it as it does inline (a
    // scalar fallback would round libmvec's exp differently).
    int64_t offset = inArg ? 0 : plan.buffers[buffer].offset;
    unsigned k = inArg ? slot("a" + std::to_string(argument), -argument - 1,
                              RunScope::Slot::Pointer)
                       : slot("@" + std::to_string(offset), offset, RunScope::Slot::Pointer);
    return "((" + type + " *)p" + std::to_string(k) + ")";
  }
  if (inArg) {
    usedArgs.insert(argument);
    return "a" + std::to_string(argument);
  }
  usedBuffers.insert(buffer);
  return "((" + type + " *)b" + std::to_string(buffer) + ")";
}

std::string SourceEmitter::words(Value v) {
  Type element = typeOf(v).getElementType();
  return element.isInteger(32) || element.isInteger(1) ? "(float *)" + ptr(v) : ptr(v);
}

std::string SourceEmitter::table(const std::string &type, const std::string &contents) {
  auto [it, inserted] = tableNames.try_emplace(type + "{" + contents + "}");
  if (inserted) {
    it->second = "k" + std::to_string(constants++);
    pre << "static const " << type << " " << it->second << "[] = {" << contents << "};\n";
  }
  return it->second;
}

std::string SourceEmitter::array(ArrayRef<int64_t> values) {
  std::string contents = values.empty() ? "0" : "";
  llvm::raw_string_ostream os(contents);
  llvm::interleaveComma(values, os);
  return table("int64_t", contents);
}

std::string SourceEmitter::intArray(ArrayRef<int> values) {
  std::string contents;
  llvm::raw_string_ostream os(contents);
  llvm::interleaveComma(values, os);
  return table("int", contents);
}

std::string SourceEmitter::boxCopyArgs(Value src, ArrayRef<int64_t> srcAt, Value dst,
                                       ArrayRef<int64_t> dstAt, Value box) {
  int64_t rank = typeOf(box).getRank();
  auto at = [&](ArrayRef<int64_t> offsets) {
    return offsets.empty() ? zerosArray(rank) : array(offsets);
  };
  return llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}", words(src), shapeArray(src),
                       at(srcAt), words(dst), shapeArray(dst), at(dstAt), shapeArray(box), rank)
      .str();
}

SmallVector<SmallVector<int64_t>> SourceEmitter::concatOffsets(Operation *op) {
  auto concat = cast<ConcatOp>(op);
  SmallVector<SmallVector<int64_t>> offsets;
  int64_t offset = 0;
  for (Value in : concat.getInputs()) {
    SmallVector<int64_t> at(concat.getType().getRank(), 0);
    at[concat.getDim()] = offset;
    offset += typeOf(in).getDimSize(concat.getDim());
    offsets.push_back(at);
  }
  return offsets;
}

bool SourceEmitter::disjoint(Value a, Value b) {
  auto argA = plan.argumentOf.find(a), argB = plan.argumentOf.find(b);
  bool inArgA = argA != plan.argumentOf.end(), inArgB = argB != plan.argumentOf.end();
  if (inArgA || inArgB)
    return !(inArgA && inArgB && argA->second == argB->second);
  const MemoryPlan::Buffer &x = plan.buffers[plan.bufferOf.lookup(a)];
  const MemoryPlan::Buffer &y = plan.buffers[plan.bufferOf.lookup(b)];
  return x.offset + x.bytes <= y.offset || y.offset + y.bytes <= x.offset;
}

std::optional<std::string>
SourceEmitter::elementwiseExpr(Operation *op, const std::function<std::string(unsigned)> &in) {
  if (isa<ConvertOp>(op))
    return in(0); // registers are float; the store rounds
  auto math = dyn_cast<ScalarMathOpInterface>(op);
  if (!math)
    return std::nullopt;
  // The op's helper in elementwise_math.h, in float, then its flags.
  std::string call = math.getScalarHelper().str() + "<float>(";
  for (unsigned k = 0, e = op->getNumOperands(); k < e; ++k)
    call += (k ? ", " : "") + in(k);
  // Flags exactly (17 significant digits read back as the same double).
  for (double flag : math.getScalarFlags()) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", flag);
    call += ", " + std::string(text);
  }
  return call + ")";
}

SourceEmitter::GroupCode
SourceEmitter::groupCode(stepk::FusedOp fused,
                         const std::function<std::string(unsigned)> &load,
                         const std::function<std::string(Type, std::string)> &round,
                         const SpecialExpr &special) {
  GroupCode code;
  // The expression of each body value: an input's load, a register, or (a
  // reshape) its input's.
  DenseMap<Value, std::string> exprOf;
  Block &body = fused.getBody().front();
  for (BlockArgument arg : body.getArguments())
    exprOf[arg] = load(arg.getArgNumber());
  int registers = 0;
  for (Operation &op : body.without_terminator()) {
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      exprOf[reshape.getResult()] = exprOf.lookup(reshape.getInput());
      continue;
    }
    auto in = [&](unsigned k) { return exprOf.lookup(op.getOperand(k)); };
    std::string name = "v" + std::to_string(registers++);
    Value result = op.getResult(0);
    std::optional<std::string> expr = special ? special(&op, in) : std::nullopt;
    if (!expr)
      expr = elementwiseExpr(&op, in);
    code.statements += "    const float " + name + " = " +
                       round(typeOf(result).getElementType(), *expr) +
                       ";  // " + op.getName().getStringRef().str() + "\n";
    exprOf[result] = name;
  }
  for (Value out : fused.getYield().getValues())
    code.outputRegisters.push_back(exprOf.lookup(out));
  return code;
}

std::string SourceEmitter::libraryArgs(stepk::CallOp call, const std::string &scratch) {
  SmallVector<std::string> args;
  // transpose moves 4-byte words of any type.
  auto pointer = [&](Value v) {
    return call.getCallee() == "transpose" ? words(v) : ptr(v);
  };
  for (Value in : call.getInputs())
    args.push_back(pointer(in));
  for (Attribute scalar : call.getScalars()) {
    if (auto i = dyn_cast<IntegerAttr>(scalar))
      args.push_back(std::to_string(i.getInt()));
    else if (auto f = dyn_cast<FloatAttr>(scalar))
      args.push_back(std::isfinite(f.getValueAsDouble())
                         ? llvm::formatv("{0:e}", f.getValueAsDouble()).str()
                         : floatLiteral(f.getValueAsDouble()));
    else if (auto a = dyn_cast<DenseI64ArrayAttr>(scalar))
      args.push_back(array(a.asArrayRef()));
    else
      args.push_back(intArray(cast<DenseI32ArrayAttr>(scalar).asArrayRef()));
  }
  if (!scratch.empty())
    args.push_back(scratch);
  for (Value out : call.getResults())
    args.push_back(pointer(out));
  return llvm::join(args, ", ");
}

SmallVector<std::string> SourceEmitter::libraryInputTypes(stepk::CallOp call) {
  SmallVector<std::string> types;
  // transpose moves 4-byte words of any type (libraryArgs).
  bool words = call.getCallee() == "transpose";
  for (Value in : call.getInputs())
    types.push_back("const " + (words ? std::string("float") : cType(typeOf(in).getElementType())) +
                    " *");
  for (Attribute scalar : call.getScalars()) {
    if (auto i = dyn_cast<IntegerAttr>(scalar))
      types.push_back(i.getType().isInteger(32) ? "int" : "int64_t");
    else if (isa<FloatAttr>(scalar))
      types.push_back("double");
    else if (isa<DenseI64ArrayAttr>(scalar))
      types.push_back("const int64_t *");
    else
      types.push_back("const int *");
  }
  return types;
}

SmallVector<std::string> SourceEmitter::libraryResultTypes(stepk::CallOp call) {
  SmallVector<std::string> types;
  bool words = call.getCallee() == "transpose";
  for (Value out : call.getResults())
    types.push_back((words ? std::string("float") : cType(typeOf(out).getElementType())) + " *");
  return types;
}

std::string SourceEmitter::libraryDeclarations() {
  std::string text;
  llvm::StringSet<> declared;
  // In the order the steps run them (a block function's where it is
  // first called).
  auto declare = [&](Operation *op) {
    op->walk([&](stepk::CallOp call) {
      std::string declaration = libraryDeclaration(call);
      if (declared.insert(declaration).second)
        text += declaration + "\n";
    });
  };
  for (auto f : step->getParentOfType<ModuleOp>().getOps<func::FuncOp>()) {
    if (f->hasAttr(StepDialect::kBlockFunctionAttrName) || f.isExternal())
      continue;
    for (Operation &op : f.getBody().front()) {
      auto call = dyn_cast<func::CallOp>(op);
      func::FuncOp callee = call ? blockFunctionOf(call) : func::FuncOp();
      declare(callee ? callee.getOperation() : &op);
    }
  }
  if (text.empty())
    return text;
  return "// The library kernels this step calls, as the IR declares them.\nextern \"C\" {\n" +
         text + "}\n\n";
}

int64_t SourceEmitter::startRequest(Value result) {
  // The slot step-plan-memory gave the collective (emitCollective checked
  // it has one).
  int64_t number =
      result.getDefiningOp()->getAttrOfType<IntegerAttr>(StepDialect::kRequestAttrName).getInt();
  requests = std::max<int64_t>(requests, number + 1);
  if (int64_t(waitSites.size()) <= number)
    waitSites.resize(number + 1, "a collective nothing reads failed");
  pending[result] = number;
  return number;
}

std::string SourceEmitter::request(int64_t number) {
  // The step function's `requests`; a block run's function gets a slot
  // pointing into it.
  if (!runScope)
    return "requests[" + std::to_string(number) + "]";
  unsigned k = slot("q" + std::to_string(number), number, RunScope::Slot::Request);
  return "(*p" + std::to_string(k) + ")";
}

/// "return <failure>;" with the message of request `request`'s entry in
/// `table` (indexed by the request: the same text in every block).
static std::string failFromTable(StringRef table, const std::string &request) {
  return ("return stepc_fail_text(error, error_len, " + table + "[&" + request +
          " - requests]);")
      .str();
}

void SourceEmitter::waitFor(Operation *op) {
  for (Value operand : op->getOperands()) {
    auto it = pending.find(operand);
    if (it == pending.end())
      continue;
    waitSites[it->second] = where(op) + ": waiting for a collective failed";
    std::string name = request(it->second);
    body << "  if (collectives->wait(collectives->ctx, " << name << "))\n    "
         << failFromTable("kCollectiveWaits", name) << "\n";
    pending.erase(it);
  }
}

/// The module info's mesh_shape initializer: the ABI's axes, 1 past the
/// mesh's.
static std::string meshDims(ArrayRef<int64_t> shape) {
  std::string dims;
  for (size_t a = 0; a < std::size(stepc_module_info{}.mesh_shape); ++a)
    dims += (a ? ", " : "") + std::to_string(a < shape.size() ? shape[a] : 1);
  return dims;
}

static int axesMask(ArrayRef<int16_t> axes) {
  int mask = 0;
  for (int16_t a : axes)
    mask |= 1 << a;
  return mask;
}

std::optional<LogicalResult> SourceEmitter::emitSharedCall(Operation *op) {
  auto numel = [&](Value v) { return typeOf(v).getNumElements(); };
  auto done = [] { return std::optional<LogicalResult>(success()); };
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](SgdOp a) {
        printCall(op, "sgd",
                  llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6:e}, {7}, {8:e}",
                                ptr(a.getParam()), ptr(a.getGrad()), ptr(a.getBuf()),
                                numel(a.getParam()), ptr(a.getLr()), ptr(a.getGradScale()),
                                a.getMomentum().convertToDouble(), a.getNesterov() ? 1 : 0,
                                a.getWeightDecay().convertToDouble()));
        return done();
      })
      .Case([&](LionOp a) {
        printCall(op, "lion",
                  llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6:e}, {7:e}, {8:e}",
                                ptr(a.getParam()), ptr(a.getGrad()), ptr(a.getM()),
                                numel(a.getParam()), ptr(a.getLr()), ptr(a.getGradScale()),
                                a.getBeta1().convertToDouble(), a.getBeta2().convertToDouble(),
                                a.getWeightDecay().convertToDouble()));
        return done();
      })
      .Case([&](BroadcastOp b) {
        // In order: the shape tables are numbered as they are made.
        std::string in = words(b.getInput()) + ", " + shapeArray(b.getInput()) + ", " +
                         std::to_string(typeOf(b.getInput()).getRank());
        std::string out = words(b) + ", " + shapeArray(b) + ", " +
                          std::to_string(typeOf(b).getRank());
        printCall(op, "broadcast", in + ", " + out);
        return done();
      })
      .Case([&](ConcatOp c) {
        for (auto [in, at] : llvm::zip(c.getInputs(), concatOffsets(c)))
          printCall(op, "copy_box", boxCopyArgs(in, {}, c, at, in));
        return done();
      })
      .Case([&](PadOp p) {
        printCall(op, "fill", ptr(p) + ", " + std::to_string(numel(p)) + ", 0.0f");
        printCall(op, "copy_box", boxCopyArgs(p.getInput(), {}, p, p.getLow(), p.getInput()));
        return done();
      })
      .Case([&](SliceOp s) {
        printCall(op, "copy_box", boxCopyArgs(s.getInput(), s.getOffsets(), s, {}, s));
        return done();
      })
      .Default([](Operation *) { return std::nullopt; });
}

void SourceEmitter::startCollective(Operation *op, StringRef kind, StringRef name, int axes,
                                    int64_t count, Value result, const std::string &args) {
  collectives.push_back({kind.str(), axes, count});
  int64_t number = startRequest(result);
  std::string request = this->request(number);
  if (int64_t(startSites.size()) <= number)
    startSites.resize(number + 1);
  startSites[number] = where(op) + ": " + op->getName().getStringRef().str() + " #" +
                       std::to_string(collectives.size()) + " failed";
  body << "  if (collectives->" << name << "(collectives->ctx, " << axes << ", " << args << ", "
       << count << ", &" << request << "))\n    " << failFromTable("kCollectiveStarts", request)
       << "\n";
}

// Not in the collectives table (the stages differ).
LogicalResult SourceEmitter::emitTransfer(Operation *op, StringRef name, ArrayRef<int16_t> axes,
                                          ArrayRef<int64_t> peer, Value buffer, Value result) {
  auto tag = op->getAttrOfType<IntegerAttr>(StepDialect::kTransferAttrName);
  auto mesh = SymbolTable::lookupNearestSymbolFrom<mesh::MeshOp>(
      op, op->getAttrOfType<FlatSymbolRefAttr>("mesh"));
  if (!tag || peer.size() != 1 || axes.size() != 1 || !mesh ||
      axes[0] >= int64_t(mesh.getShape().size()))
    return op->emitOpError() << "needs a step.transfer tag and one peer along one mesh axis";
  ArrayRef<int64_t> shape = mesh.getShape();
  int64_t stride = 1;
  for (size_t a = axes[0] + 1; a < shape.size(); ++a)
    stride *= shape[a];
  std::string rank = "collectives->rank";
  std::string to = shape.size() == 1
                       ? std::to_string(peer[0])
                       : llvm::formatv("{0} + ({1} - {0} / {2} % {3}) * {2}", rank, peer[0],
                                       stride, shape[axes[0]])
                             .str();
  int64_t number = startRequest(result);
  std::string request = this->request(number);
  if (int64_t(startSites.size()) <= number)
    startSites.resize(number + 1);
  startSites[number] = where(op) + ": " + op->getName().getStringRef().str() + " (transfer " +
                       std::to_string(tag.getInt()) + ") failed";
  // In a block run the tag is the call's (one per micro-batch).
  std::string tagValue = std::to_string(tag.getInt());
  if (runScope)
    tagValue = "at[" +
               std::to_string(slot("t" + std::to_string(runScope->at.size()), tag.getInt(),
                                   RunScope::Slot::Value)) +
               "]";
  body << "  if (collectives->" << name << "(collectives->ctx, " << to << ", " << tagValue
       << ", " << ptr(buffer) << ", " << tensorBytes(typeOf(buffer)) << ", &" << request
       << "))\n    " << failFromTable("kCollectiveStarts", request) << "\n";
  return success();
}

// all_to_all: block i of the input (split along dimension 0) goes to rank
// i of the axes, whose blocks arrive in rank order (concatenated along
// dimension 0): the runtime's contiguous all-to-all.
LogicalResult SourceEmitter::emitAllToAll(mesh::AllToAllOp a) {
  if (a.getSplitAxis().getSExtValue() != 0 || a.getConcatAxis().getSExtValue() != 0)
    return a.emitOpError() << "splits and concatenates along dimension 0 only on the " << target
                           << " back end";
  auto mesh = SymbolTable::lookupNearestSymbolFrom<mesh::MeshOp>(a, a.getMeshAttr());
  if (!mesh)
    return a.emitOpError() << "names no mesh";
  int64_t ranks = 1;
  for (int16_t axis : a.getMeshAxes())
    ranks *= mesh.getShape()[axis];
  RankedTensorType in = typeOf(a.getInput());
  if (in != typeOf(a.getResult()) || in.getDimSize(0) % ranks != 0)
    return a.emitOpError() << "needs a result of its input's type and " << ranks
                           << " blocks along dimension 0";
  // The runtime moves 4-byte words: a block of 2-byte elements must fill
  // whole words.
  int64_t bytes = tensorBytes(in);
  if (bytes % (4 * ranks) != 0)
    return a.emitOpError() << "moves blocks of " << bytes / ranks
                           << " bytes: the runtime exchanges whole 4-byte words";
  startCollective(a, "STEPC_ALL_TO_ALL", "all_to_all", axesMask(a.getMeshAxes()),
                  bytes / 4 / ranks, a.getResult(),
                  words(a.getInput()) + ", " + words(a.getResult()));
  return success();
}

// all_slice: no communication, this rank's contiguous part of its input
// (its linear index over the axes, from the table's rank).
LogicalResult SourceEmitter::emitAllSlice(mesh::AllSliceOp s) {
  RankedTensorType in = typeOf(s.getInput()), out = typeOf(s.getResult());
  int64_t axis = s.getSliceAxis().getSExtValue();
  for (int64_t d = 0; d < axis; ++d)
    if (in.getDimSize(d) != 1)
      return s.emitOpError() << "slices dimension " << axis
                             << ", which is not contiguous (the dimensions before it are "
                                "not all 1): the back ends slice contiguous parts only";
  auto mesh = SymbolTable::lookupNearestSymbolFrom<mesh::MeshOp>(s, s.getMeshAttr());
  if (!mesh)
    return s.emitOpError() << "names no mesh";
  ArrayRef<int64_t> shape = mesh.getShape();
  std::string index = "0";
  for (int16_t a : s.getMeshAxes()) {
    int64_t stride = 1;
    for (size_t k = a + 1; k < shape.size(); ++k)
      stride *= shape[k];
    index = "(" + index + ") * " + std::to_string(shape[a]) + " + collectives->rank / " +
            std::to_string(stride) + " % " + std::to_string(shape[a]);
  }
  body << "  "
       << copyStatement(ptr(s.getResult()),
                        ptr(s.getInput()) + " + (" + index + ") * " +
                            std::to_string(out.getNumElements()),
                        tensorBytes(out))
       << "\n";
  return success();
}

std::optional<LogicalResult> SourceEmitter::emitCollective(Operation *op) {
  if (communicates(op) && !op->getAttrOfType<IntegerAttr>(StepDialect::kRequestAttrName))
    return LogicalResult(op->emitOpError()
                         << "has no request slot (step.request: step-plan-memory did not run)");
  auto notSum = [&](mesh::ReductionKind kind) -> std::optional<LogicalResult> {
    if (kind == mesh::ReductionKind::Sum)
      return std::nullopt;
    return LogicalResult(op->emitOpError() << "the " << target << " back end reduces with sum only");
  };
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](mesh::SendOp s) -> std::optional<LogicalResult> {
        return emitTransfer(op, "send", s.getMeshAxes(), s.getDestination(), s.getInput(),
                            s.getResult());
      })
      .Case([&](mesh::RecvOp r) -> std::optional<LogicalResult> {
        return emitTransfer(op, "recv", r.getMeshAxes(),
                            r.getSource().value_or(ArrayRef<int64_t>{}), r.getResult(),
                            r.getResult());
      })
      .Case([&](mesh::AllGatherOp g) -> std::optional<LogicalResult> {
        startCollective(op, "STEPC_ALL_GATHER", "all_gather", axesMask(g.getMeshAxes()),
                        typeOf(g.getInput()).getNumElements(), g.getResult(),
                        words(g.getInput()) + ", " + words(g.getResult()));
        return success();
      })
      .Case([&](mesh::ReduceScatterOp r) -> std::optional<LogicalResult> {
        if (auto bad = notSum(r.getReduction()))
          return bad;
        startCollective(op, "STEPC_REDUCE_SCATTER", "reduce_scatter_sum",
                        axesMask(r.getMeshAxes()), typeOf(r.getResult()).getNumElements(),
                        r.getResult(), ptr(r.getInput()) + ", " + ptr(r.getResult()));
        return success();
      })
      // all_reduce(sum): a copy, then the runtime's in-place reduction.
      .Case([&](mesh::AllReduceOp r) -> std::optional<LogicalResult> {
        if (auto bad = notSum(r.getReduction()))
          return bad;
        int64_t count = typeOf(r.getInput()).getNumElements();
        body << "  " << copyStatement(ptr(r.getResult()), ptr(r.getInput()), count * 4) << "\n";
        startCollective(op, "STEPC_ALL_REDUCE", "all_reduce_sum", axesMask(r.getMeshAxes()),
                        count, r.getResult(), ptr(r.getResult()));
        return success();
      })
      .Case([&](mesh::AllToAllOp a) -> std::optional<LogicalResult> { return emitAllToAll(a); })
      .Case([&](mesh::AllSliceOp s) -> std::optional<LogicalResult> { return emitAllSlice(s); })
      .Default([](Operation *) { return std::nullopt; });
}

/// The bound a step.so checks input `arg` against (the tightest a kernel
/// that reads it as ids checks: an embedding's rows, a cross-entropy's
/// classes, through the slices micro-batches read; 0: none) and the id it
/// may hold beyond it (a target the loss does not count), or
/// STEPC_NO_IGNORED_ID.
static std::pair<int64_t, int64_t> inputIdBound(Value arg) {
  int64_t bound = 0, ignored = STEPC_NO_IGNORED_ID;
  SmallVector<Value> reads{arg};
  while (!reads.empty())
    for (OpOperand &use : reads.pop_back_val().getUses()) {
      if (auto slice = dyn_cast<SliceOp>(use.getOwner()))
        reads.push_back(slice);
      // Read in a block function: where its argument is read.
      if (auto blockCall = dyn_cast<func::CallOp>(use.getOwner()))
        if (func::FuncOp callee = blockFunctionOf(blockCall))
          reads.push_back(callee.getArgument(use.getOperandNumber()));
      auto call = dyn_cast<stepk::CallOp>(use.getOwner());
      // Targets whose ignored ones are masked or counted out.
      if (call)
        call.getBody().walk([&](Operation *op) {
          if (auto m = dyn_cast<TargetMaskOp>(op))
            ignored = m.getIgnoreIndex();
          if (auto c = dyn_cast<TokenCountOp>(op))
            ignored = c.getIgnoreIndex();
        });
      if (call && call.getIdCheck() &&
          static_cast<int64_t>(use.getOperandNumber()) == *call.getIdOperand()) {
        bound = std::max(bound, static_cast<int64_t>(*call.getIdBound()));
        // Targets a cross-entropy does not count may hold its ignore_index.
        call.getBody().walk([&](Operation *op) {
          std::optional<int64_t> ignore;
          if (auto ce = dyn_cast<CrossEntropyOp>(op))
            ignore = ce.getIgnoreIndex();
          if (auto ce = dyn_cast<CrossEntropyGradOp>(op))
            ignore = ce.getIgnoreIndex();
          if (ignore)
            ignored = *ignore;
        });
      }
    }
  return {bound, ignored};
}

/// An argument table record's split fields ("parts dim segments table
/// axis") for an argument split as `tpShard` says: over tp, or (expert
/// weights) over the mesh axis it names.
std::string SourceEmitter::splitFields(DictionaryAttr tpShard, int segmentTable) {
  int64_t parts = summary.tensorParallel, axis = -1;
  if (auto named = tpShard.getAs<IntegerAttr>("axis")) {
    axis = named.getInt();
    auto module = step->getParentOfType<ModuleOp>();
    auto meshes = module.getOps<mesh::MeshOp>();
    parts = !meshes.empty() && axis < int64_t((*meshes.begin()).getShape().size())
                ? (*meshes.begin()).getShape()[axis]
                : 1;
  }
  return llvm::formatv("{0} {1} {2} {3} {4}", parts, tpShard.getAs<IntegerAttr>("dim").getInt(),
                       tpShard.getAs<DenseI64ArrayAttr>("segments").size(), segmentTable, axis);
}

namespace {

/// One argument's fields in the module info, but its shape and split.
struct ArgumentFields {
  std::string name;
  int kind = STEPC_ARG_INPUT, init = STEPC_INIT_ZEROS;
  double stddev = 0;
  int64_t bound = 0, ignored = STEPC_NO_IGNORED_ID, globalRows = 1;
};

/// Argument `i` of `step` by its role; a moment's rows are those of its
/// parameter, argument `owner`.
ArgumentFields argumentFields(func::FuncOp step, unsigned i, unsigned owner) {
  ArgumentFields f;
  RankedTensorType type = typeOf(step.getArgument(i));
  f.globalRows = type.getRank() > 0 ? type.getDimSize(0) : 1;
  if (auto rows = step.getArgAttrOfType<IntegerAttr>(i, StepDialect::kShardOfAttrName))
    f.globalRows = rows.getInt();
  if (auto p = step.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName)) {
    f.name = p.getName().str();
    f.kind = STEPC_ARG_PARAM;
    f.init = p.getInit() == InitKind::Ones    ? STEPC_INIT_ONES
             : p.getInit() == InitKind::Zeros ? STEPC_INIT_ZEROS
                                              : STEPC_INIT_NORMAL;
    f.stddev = p.getEffectiveStd();
  } else if (auto s = step.getArgAttrOfType<StateAttr>(i, StepDialect::kStateAttrName)) {
    f.name = s.getQualifiedName();
    f.kind = s.getMoment() == Moment::ExpAvgSq ? STEPC_ARG_EXP_AVG_SQ : STEPC_ARG_EXP_AVG;
    if (auto rows = step.getArgAttrOfType<IntegerAttr>(owner, StepDialect::kShardOfAttrName))
      f.globalRows = rows.getInt();
  } else if (auto h = step.getArgAttrOfType<HyperAttr>(i, StepDialect::kHyperAttrName)) {
    f.name = stringifyHyper(h.getValue()).str();
    f.kind = h.getValue() == Hyper::Lr     ? STEPC_ARG_LR
             : h.getValue() == Hyper::Step ? STEPC_ARG_STEP
                                           : STEPC_ARG_SEED;
  } else if (auto in = step.getArgAttrOfType<StringAttr>(i, StepDialect::kInputAttrName)) {
    f.name = in.getValue().str();
    std::tie(f.bound, f.ignored) = inputIdBound(step.getArgument(i));
  }
  return f;
}

/// The tables the argument text indexes and `stepc_decode_args`, which
/// reads the text into kArgs (n arguments).
std::string argumentDecoder(unsigned n, const std::vector<std::string> &shapeTables,
                            const std::vector<std::string> &segmentTables) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "static const int64_t *const kShapeTables[] = {" << llvm::join(shapeTables, ", ")
     << (shapeTables.empty() ? "0" : "") << "};\n"
     << "static const int64_t *const kSegmentTables[] = {" << llvm::join(segmentTables, ", ")
     << (segmentTables.empty() ? "0" : "") << "};\n"
     << "static stepc_arg_info kArgs[" << std::max(n, 1u) << "];\n\n"
     << "static void stepc_decode_args() {\n"
     << "  const char *s = kArgsText;\n"
     << "  for (unsigned i = 0; i < " << n << "; ++i) {\n"
     << "    char *end;\n"
     << "    stepc_arg_info &a = kArgs[i];\n"
     << "    a.kind = (int32_t)strtol(s, &end, 10);\n"
     << "    a.dtype = (int32_t)strtol(end, &end, 10);\n"
     << "    a.rank = (int32_t)strtol(end, &end, 10);\n"
     << "    a.shape = kShapeTables[strtol(end, &end, 10)];\n"
     << "    a.init = (int32_t)strtol(end, &end, 10);\n"
     << "    unsigned long long bits = strtoull(end, &end, 16);\n"
     << "    memcpy(&a.init_std, &bits, sizeof a.init_std);\n"
     << "    a.id_bound = strtoll(end, &end, 10);\n"
     << "    a.id_ignored = strtoll(end, &end, 10);\n"
     << "    a.global_dim0 = strtoll(end, &end, 10);\n"
     << "    a.tp_parts = (int32_t)strtol(end, &end, 10);\n"
     << "    a.tp_dim = (int32_t)strtol(end, &end, 10);\n"
     << "    a.tp_num_segments = (int32_t)strtol(end, &end, 10);\n"
     << "    long segments = strtol(end, &end, 10);\n"
     << "    a.tp_segments = segments < 0 ? 0 : kSegmentTables[segments];\n"
     << "    a.tp_axis = (int32_t)strtol(end, &end, 10);\n"
     << "    a.name = end + 1;\n"
     << "    s = a.name + strlen(a.name) + 1;\n"
     << "  }\n}\n\n";
  return text;
}

} // namespace

std::string SourceEmitter::argumentTable() {
  std::string text;
  llvm::raw_string_ostream os(text);
  unsigned n = step.getNumArguments();
  // Equal shapes (segment lists) share one table: a deep model's
  // thousands of arguments have a few dozen shapes.
  std::map<std::string, std::string> tables;
  auto tableOf = [&](StringRef prefix, unsigned i, ArrayRef<int64_t> values) {
    std::string contents = values.empty() ? "0" : "";
    llvm::raw_string_ostream cs(contents);
    llvm::interleaveComma(values, cs);
    auto [it, inserted] = tables.try_emplace((prefix + "{" + contents).str());
    if (inserted) {
      it->second = (prefix + Twine(i)).str();
      os << "static const int64_t " << it->second << "[] = {" << contents << "};\n";
    }
    return it->second;
  };
  SmallVector<std::string> shapeNames;
  for (unsigned i = 0; i < n; ++i)
    shapeNames.push_back(tableOf("shape", i, typeOf(step.getArgument(i)).getShape()));
  // A moment is sharded (fsdp rows, tp parts) like its parameter: each
  // argument's parameter, found through one table (a search per moment
  // was quadratic in the arguments: 4 s of 7 at 400 layers).
  llvm::StringMap<unsigned> paramArg;
  for (unsigned j = 0; j < n; ++j)
    if (auto p = step.getArgAttrOfType<ParamAttr>(j, StepDialect::kParamAttrName))
      paramArg[p.getName()] = j;
  auto ownerOf = [&](unsigned i) -> unsigned {
    if (auto s = step.getArgAttrOfType<StateAttr>(i, StepDialect::kStateAttrName))
      if (auto it = paramArg.find(s.getParam()); it != paramArg.end())
        return it->second;
    return i;
  };
  auto tpShardOf = [&](unsigned i) -> DictionaryAttr {
    return step.getArgAttrOfType<DictionaryAttr>(ownerOf(i), StepDialect::kTpShardAttrName);
  };
  SmallVector<std::string> segmentNames(n);
  for (unsigned i = 0; i < n; ++i)
    if (DictionaryAttr tpShard = tpShardOf(i))
      segmentNames[i] =
          tableOf("tpSegments", i, tpShard.getAs<DenseI64ArrayAttr>("segments").asArrayRef());
  // The argument table as one string (fields, a space, the name, NUL),
  // decoded into kArgs when the module info is first asked for: as an
  // aggregate of thousands of entries it cost the C++ compiler a third of
  // a second per hundred layers; as a string, nothing.
  std::vector<std::string> shapeTables, segmentTables;
  std::map<std::string, int> shapeIndex, segmentIndex;
  auto indexOf = [](std::map<std::string, int> &index, std::vector<std::string> &names,
                    const std::string &name) {
    auto [it, inserted] = index.try_emplace(name, names.size());
    if (inserted)
      names.push_back(name);
    return it->second;
  };
  os << "#include <stdlib.h>\n#include <string.h>\n\nstatic const char kArgsText[] =\n";
  for (unsigned i = 0; i < n; ++i) {
    RankedTensorType type = typeOf(step.getArgument(i));
    ArgumentFields f = argumentFields(step, i, ownerOf(i));
    DictionaryAttr tpShard = tpShardOf(i);
    std::string tp = tpShard ? splitFields(tpShard, indexOf(segmentIndex, segmentTables,
                                                            segmentNames[i]))
                             : "0 0 0 -1 -1";
    // The standard deviation as the bits of its 7-digit decimal (the value
    // the module info has always held); bits, as strtod would read the host
    // trainer's locale.
    double printed = std::strtod(llvm::formatv("{0:e}", f.stddev).str().c_str(), nullptr);
    uint64_t stdBits;
    std::memcpy(&stdBits, &printed, sizeof stdBits);
    os << llvm::formatv("  \"{0} {1} {2} {3} {4} {5:x} {6} {7} {8} {9} \" {10} \"\\0\"\n",
                        f.kind, type.getElementType().isF32() ? STEPC_F32 : STEPC_I32,
                        type.getRank(), indexOf(shapeIndex, shapeTables, shapeNames[i]), f.init,
                        stdBits, f.bound, f.ignored, f.globalRows, tp, cString(f.name));
  }
  if (n == 0)
    os << "  \"\"";
  os << ";\n\n" << argumentDecoder(n, shapeTables, segmentTables);
  return text;
}

std::string SourceEmitter::metadata() {
  std::string text = argumentTable();
  llvm::raw_string_ostream os(text);
  const unsigned n = step.getNumArguments();
  if (!collectives.empty()) {
    os << "static const stepc_collective_info kCollectives[] = {\n";
    for (auto &[kind, axes, count] : collectives)
      os << "  {" << kind << ", " << axes << ", " << count << "},\n";
    os << "};\n\n";
  }
  if (!checkSites.empty()) {
    os << "static const char *const kCheckSites[] = {\n";
    for (const std::string &site : checkSites)
      os << "  " << cString(site) << ",\n";
    os << "};\n\n";
  }
  if (!evalLogitsShape.empty())
    os << "static const int64_t kLogitsShape[] = {"
       << llvm::join(llvm::map_range(evalLogitsShape, [](int64_t d) { return std::to_string(d); }),
                     ", ")
       << "};\n\n";
  // The eval entry's outputs and the training step's metrics.
  auto table = [&](StringRef name, ArrayRef<std::pair<std::string, std::vector<int64_t>>> rows) {
    if (rows.empty())
      return;
    for (auto [k, row] : llvm::enumerate(rows))
      os << "static const int64_t k" << name << "Shape" << k << "[] = {"
         << llvm::join(llvm::map_range(row.second, [](int64_t d) { return std::to_string(d); }),
                       ", ")
         << (row.second.empty() ? "0" : "") << "};\n";
    os << "static const stepc_output_info k" << name << "s[] = {\n";
    for (auto [k, row] : llvm::enumerate(rows))
      os << "  {" << cString(row.first) << ", " << row.second.size() << ", k" << name << "Shape"
         << k << "},\n";
    os << "};\n\n";
  };
  table("Output", evalOutputs);
  table("Metric", trainMetrics);
  os << "static const stepc_module_info kInfo = {\n"
     << "  STEPC_ABI_VERSION, " << targetExpression() << ", " << n << ", kArgs, " << arenaBytes()
     << ", " << summary.modelFlops << ", " << summary.executedFlops << ", " << summary.tokens
     << ",\n  " << cString(summary.reportJson) << ", " << summary.worldSize << ", "
     << cString(summary.sharding) << ", " << summary.meshShape.size() << ", {"
     << meshDims(summary.meshShape) << "}, " << collectives.size() << ", " << (collectives.empty() ? "0" : "kCollectives")
     << ", " << checkSites.size() << ", " << (checkSites.empty() ? "0" : "kCheckSites") << ", "
     << cString(summary.precision) << ", " << evalArenaBytes << ", " << evalLogitsShape.size()
     << ", " << (evalLogitsShape.empty() ? "0" : "kLogitsShape") << ", " << evalOutputs.size()
     << ", " << (evalOutputs.empty() ? "0" : "kOutputs") << ", " << summary.tensorParallel
     << ", " << cString(summary.cpuIsa) << ", " << cString(summary.cpuFeatures) << ", "
     << summary.pipelineStages << ", " << summary.pipelineAxis << ", " << sampleArenaBytes
     << ", " << trainMetrics.size() << ", " << (trainMetrics.empty() ? "0" : "kMetrics")
     << "};\n\n"
     << "extern \"C\" const stepc_module_info *stepc_module_info_v12(void) {\n"
     << "  static const bool decoded = (stepc_decode_args(), true);\n"
     << "  (void)decoded;\n  return &kInfo;\n}\n";
  return text;
}

void SourceEmitter::beginRun(int64_t function, const std::string &block) {
  runScope.emplace();
  runScope->run = runs++;
  runScope->function = function;
  runScope->block = block;
  runScope->begin = bodyText.size();
  runScope->kernels = 0;
}

LogicalResult SourceEmitter::endRun() {
  RunScope scope = std::move(*runScope);
  runScope.reset();
  // The function: the run's pointer and request slots as locals (a loop
  // reads a pointer in a register, not through an array the compiler must
  // reload), then its code.
  std::string code;
  for (size_t k = 0; k < scope.at.size(); ++k) {
    if (scope.kind[k] == RunScope::Slot::Request)
      code += llvm::formatv("  int32_t *const p{0} = requests + at[{0}];\n", k).str();
    else if (scope.kind[k] == RunScope::Slot::Pointer)
      code += llvm::formatv("  char *const p{0} = at[{0}] < 0 ? (char *)args[-at[{0}] - 1] "
                            ": arena + at[{0}];\n",
                            k)
                  .str();
  }
  code += bodyText.substr(scope.begin);
  bodyText.resize(scope.begin);
  // Each block function of the IR is one C function: every run of it
  // prints the same code, since step-outline-blocks compared all that the
  // code depends on. One that does not is a compiler bug, said as one
  // rather than printed as a second function the IR does not have.
  int64_t function = scope.function;
  std::string name = (evalEntry ? "stepc_eval_block" : "stepc_block") + std::to_string(function);
  auto [printed, first] = functionCode.try_emplace(function, code);
  if (first)
    functionsText += "static int " + name +
                     "(void *const *args, char *arena, const int64_t *at,\n"
                     "    const char *const *sites, int32_t *requests,\n"
                     "    const stepc_collectives *collectives, const stepc_device *device,\n"
                     "    char *error, size_t error_len" + blockParameters() + ") {\n" + code +
                     "  return 0;\n}\n\n";
  else if (printed->second != code)
    return step.emitOpError() << "internal error: block run " << scope.run << " (" << scope.block
                              << ") of block function " << function
                              << " prints other code than that function's first run: "
                                 "step-outline-blocks compared less than the code depends on";
  std::string siteTable = "nullptr";
  if (!scope.sites.empty()) {
    siteTable = (evalEntry ? "kEvalSites" : "kSites") + std::to_string(siteTables++);
    pre << "static const char *const " << siteTable << "[] = {" << llvm::join(scope.sites, ", ")
        << "};\n";
  }
  bool usesRequests = llvm::is_contained(scope.kind, RunScope::Slot::Request);
  body << "  // " << scope.block << ": " << scope.kernels << " kernels from "
       << scope.firstLocation << " to " << scope.lastLocation << "\n  if (int failed = " << name
       << "(args, arena, " << array(scope.at) << ", " << siteTable << ", "
       << (usesRequests ? "requests" : "nullptr") << ", collectives, device, error, error_len"
       << blockArguments() << "))\n    return failed;\n";
  return success();
}

LogicalResult SourceEmitter::emitOpInOrder(Operation &op) {
  flatIndex = nextFlatIndex++;
  size_t begin = bodyText.size();
  auto recordKernel = llvm::make_scope_exit([&] {
    // The time since the previous mark is this op's (waits included).
    if (profile && !evalEntry && bodyText.size() > begin)
      body << "  stepc_prof_mark(" << profileKind(&op) << ");\n";
    if (runScope && bodyText.size() > begin)
      ++runScope->kernels;
  });
  // A kernel with a body (stepk.fused, stepk.call) has its members' types.
  if (op.getNumRegions() == 1) {
    for (Operation &member : op.getRegion(0).front().without_terminator())
      if (failed(checkTypes(&member)))
        return failure();
  } else if (failed(checkTypes(&op))) {
    return failure();
  }
  waitFor(&op);
  if (isa<ReshapeOp, func::ReturnOp>(op) || computedByConsumers(&op))
    return success();
  if (auto fused = dyn_cast<stepk::FusedOp>(op)) {
    int64_t ops = llvm::count_if(fused.getBody().front().without_terminator(),
                                 [](Operation &member) { return !isa<ReshapeOp>(member); });
    body << "  // fused: " << ops << " elementwise ops from" << location(&op) << "\n";
    return emitFused(fused);
  }
  // A library call is named after the op it computes.
  Operation *named = isa<stepk::CallOp>(op) ? cast<stepk::CallOp>(op).getKernelOp() : &op;
  body << "  // " << named->getName() << location(&op) << "\n";
  if (std::optional<LogicalResult> done = emitCollective(&op))
    return *done;
  if (std::optional<LogicalResult> done = emitSharedCall(&op))
    return *done;
  return emitOp(&op);
}

LogicalResult SourceEmitter::emitCall(func::CallOp call, func::FuncOp callee) {
  // The callee's ops as this call runs them: the call's plan on them, its
  // operands' storage and collectives in flight as the arguments'.
  FailureOr<std::unique_ptr<RunPlanScope>> scope = RunPlanScope::apply(call, callee);
  if (failed(scope))
    return failure();
  Block &entry = callee.getBody().front();
  // (Each found entry is copied out before an insertion may move the map.)
  for (auto [argument, operand] : llvm::zip_equal(entry.getArguments(), call.getOperands())) {
    plan.bufferOf.erase(argument);
    plan.argumentOf.erase(argument);
    if (auto it = plan.bufferOf.find(operand); it != plan.bufferOf.end()) {
      int64_t buffer = it->second;
      plan.bufferOf[argument] = buffer;
    }
    if (auto it = plan.argumentOf.find(operand); it != plan.argumentOf.end()) {
      unsigned index = it->second;
      plan.argumentOf[argument] = index;
    }
    if (auto it = pending.find(operand); it != pending.end()) {
      int64_t number = it->second;
      pending[argument] = number;
    }
  }
  for (Operation &op : entry.without_terminator())
    if (op.getNumResults() &&
        failed(placeValues(&op, op.getResults(), plan, step.getNumArguments())))
      return failure();
  boundCall = call;
  planFusions(entry);
  auto block = call->getAttrOfType<StringAttr>(StepDialect::kRunBlockAttrName);
  beginRun(callee->getAttrOfType<IntegerAttr>(StepDialect::kBlockFunctionAttrName).getInt(),
           block ? block.str() : std::string());
  for (Operation &op : entry.without_terminator())
    if (failed(emitOpInOrder(op)))
      return failure();
  if (failed(endRun()))
    return failure();
  boundCall = nullptr;
  // A collective the run waited for is waited for; one it started is
  // waited for where the step reads the call's result, or at its end.
  for (auto [argument, operand] : llvm::zip_equal(entry.getArguments(), call.getOperands())) {
    if (pending.count(operand) && !pending.count(argument))
      pending.erase(operand);
    pending.erase(argument);
  }
  for (auto [result, returned] :
       llvm::zip_equal(call.getResults(), entry.getTerminator()->getOperands()))
    if (auto it = pending.find(returned); it != pending.end()) {
      int64_t number = it->second;
      pending.erase(it);
      pending[result] = number;
    }
  for (Operation &op : entry.without_terminator())
    for (Value r : op.getResults())
      if (auto it = pending.find(r); it != pending.end()) {
        unreadInRuns.push_back(it->second);
        pending.erase(it);
      }
  return success();
}

Value SourceEmitter::asStepReads(Value v) {
  auto argument = dyn_cast<BlockArgument>(v);
  if (!boundCall || !argument ||
      argument.getOwner()->getParentOp() != blockFunctionOf(boundCall).getOperation())
    return v;
  return boundCall.getOperand(argument.getArgNumber());
}

LogicalResult SourceEmitter::emitBody() {
  Block &block = step.getBody().front();
  planFusions(block);
  for (Operation &op : block) {
    auto call = dyn_cast<func::CallOp>(op);
    if (func::FuncOp callee = call ? blockFunctionOf(call) : func::FuncOp()) {
      if (failed(emitCall(call, callee)))
        return failure();
      continue;
    }
    if (failed(emitOpInOrder(op)))
      return failure();
  }
  // A collective nothing reads is still waited for before the step returns
  // (in start order: the same source every time).
  SmallVector<int64_t> unread(unreadInRuns);
  for (auto &[value, number] : pending)
    unread.push_back(number);
  llvm::sort(unread);
  for (int64_t number : unread)
    body << "  if (collectives->wait(collectives->ctx, " << request(number) << "))\n    "
         << failFromTable("kCollectiveWaits", request(number)) << "\n";
  // Each request's messages, where the start and the wait are.
  auto messages = [&](StringRef table, ArrayRef<std::string> sites) {
    if (sites.empty())
      return;
    pre << "static const char *const " << table << "[] = {\n";
    for (const std::string &site : sites)
      pre << "    " << cString(site) << ",\n";
    pre << "};\n";
  };
  messages("kCollectiveStarts", startSites);
  messages("kCollectiveWaits", waitSites);
  pending.clear();
  return success();
}

/// The function's head: the argument and arena buffers it names.
void SourceEmitter::bufferNames(raw_ostream &os) {
  os << "  if (kInfo.world_size > 1 && (!collectives || collectives->size != kInfo.world_size))\n"
     << "    " << failWith("a sharded step needs collectives over its world size") << "\n";
  // The requests of the collectives in flight (block runs get a slot).
  if (requests)
    os << "  int32_t requests[" << requests << "];\n";
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
    if (!usedArgs.contains(i))
      continue;
    std::string type = cType(typeOf(step.getArgument(i)).getElementType());
    os << "  " << type << " *a" << i << " = (" << type << " *)args[" << i << "];\n";
  }
  for (size_t id = 0; id < plan.buffers.size(); ++id)
    if (usedBuffers.contains(id))
      os << "  char *b" << id << " = arena + " << plan.buffers[id].offset << ";\n";
}

FailureOr<SourceEmitter::EvalFragment> SourceEmitter::runEval(StringRef entry) {
  evalEntry = true;
  if (failed(emitBody()))
    return failure();
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  auto hasRole = [&](unsigned i, Role role) { return hasResultRole(step, i, role); };
  // loss, then optionally logits, then the loss function's outputs.
  unsigned n = ret.getNumOperands();
  if (n < 1 || !hasRole(0, Role::Loss))
    return step.emitOpError() << "expects its first result to be the loss (a step.eval_step)";
  std::optional<unsigned> logits;
  SmallVector<unsigned> outputs;
  for (unsigned i = 1; i < n; ++i) {
    if (i == 1 && hasRole(i, Role::Logits))
      logits = i;
    else if (hasRole(i, Role::Output))
      outputs.push_back(i);
    else
      return step.emitOpError() << "result #" << i
                                << " is neither the logits nor a loss function output";
  }
  EvalFragment fragment;
  fragment.arenaBytes = arenaBytes();
  fragment.checkSites = checkSites;
  auto shapeOf = [&](unsigned i) {
    ArrayRef<int64_t> shape = typeOf(ret.getOperand(i)).getShape();
    return std::vector<int64_t>(shape.begin(), shape.end());
  };
  fragment.prepareCalls = prepareCalls;
  if (logits)
    fragment.logitsShape = shapeOf(*logits);
  for (unsigned i : outputs)
    fragment.outputs.push_back({getResultRole(step, i).getName().str(), shapeOf(i)});
  llvm::raw_string_ostream os(fragment.text);
  // Its own namespace: its constant tables and kernels keep their names.
  std::string stepBody = bodyText;
  const std::string space = ("stepc_" + entry).str();
  os << "\n// "
     << (entry == "sample" ? "The sampling step: the forward of one row (its loss and logits)."
                           : "The forward-only step (evaluation): the loss, no gradient or update.")
     << "\nnamespace " << space << " {\n\n"
     << pre.str() << "\n" << functionsText
     << "extern \"C\" int " << space << "_step_v12(void *const *args, char *arena,\n"
     << "    const stepc_collectives *collectives, const stepc_device *device, float *loss,\n"
     << "    float *logits, float *const *outputs, char *error, size_t error_len) {\n";
  std::string innerText;
  llvm::raw_string_ostream inner(innerText);
  stepBegin(inner);
  inner << stepBody;
  auto bytes = [&](unsigned i) { return typeOf(ret.getOperand(i)).getNumElements() * 4; };
  if (logits)
    inner << "  if (logits) " << copyToHost("logits", ptr(ret.getOperand(*logits)), bytes(*logits),
                                          "logits")
       << "\n";
  for (auto [k, i] : llvm::enumerate(outputs)) {
    std::string dst = "outputs[" + std::to_string(k) + "]";
    inner << "  if (outputs && " << dst << ") "
          << copyToHost(dst, ptr(ret.getOperand(i)), bytes(i), "output") << "\n";
  }
  stepEnd(inner, ptr(ret.getOperand(0)), "");
  bufferNames(os);
  os << innerText << "  return 0;\n}\n\n}  // namespace " << space << "\n";
  return fragment;
}

LogicalResult SourceEmitter::addForwardEntries(
    func::FuncOp evalStep, func::FuncOp sampleStep,
    llvm::function_ref<FailureOr<MemoryPlan>(func::FuncOp)> planFor,
    llvm::function_ref<std::unique_ptr<SourceEmitter>(func::FuncOp, const MemoryPlan &)> make) {
  if (!evalStep)
    return success();
  FailureOr<MemoryPlan> evalPlan = planFor(evalStep);
  if (failed(evalPlan))
    return failure();
  FailureOr<EvalFragment> eval = make(evalStep, *evalPlan)->runEval();
  if (failed(eval))
    return failure();
  setEval(*eval);
  if (!sampleStep)
    return success();
  FailureOr<MemoryPlan> samplePlan = planFor(sampleStep);
  if (failed(samplePlan))
    return failure();
  std::unique_ptr<SourceEmitter> sampler = make(sampleStep, *samplePlan);
  sampler->continueSites(*eval);
  FailureOr<EvalFragment> sample = sampler->runEval("sample");
  if (failed(sample))
    return failure();
  setSample(*sample);
  return success();
}

FailureOr<std::string> SourceEmitter::run(const ModuleSummary &moduleSummary) {
  summary = moduleSummary;
  if (failed(emitBody()))
    return failure();
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  std::string lossExpr, normExpr;
  SmallVector<std::pair<std::string, Value>> metrics;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    ResultAttr role = getResultRole(step, i);
    if (role && role.getRole() == Role::Loss)
      lossExpr = ptr(v);
    else if (role && role.getRole() == Role::GradNorm)
      normExpr = ptr(v);
    else if (role && role.getRole() == Role::Output)
      continue;  // read through the eval entry
    else if (role && role.getRole() == Role::Metric)
      metrics.push_back({role.getName().str(), v});
    else if (!plan.argumentOf.count(v))
      return step.emitOpError() << "result #" << i
                                << " is neither the loss, the norm, nor updated in place";
  }
  if (lossExpr.empty() || normExpr.empty())
    return step.emitOpError() << "expects a loss and a grad_norm result";
  for (auto &[name, v] : metrics) {
    ArrayRef<int64_t> shape = typeOf(v).getShape();
    trainMetrics.push_back({name, std::vector<int64_t>(shape.begin(), shape.end())});
  }
  std::string stepBody = bodyText;
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "// Generated by stepc for the " << target << " target; do not edit.\n";
  prologue(os);
  os << libraryDeclarations();
  os << "static int stepc_fail_text(char *error, size_t len, const char *text) {\n"
     << "  snprintf(error, len, \"%s\", text);\n  return 1;\n}\n\n"
     << pre.str() << "\n"
     << metadata() << "\n"
     << (profile ? profileSupport() : "")
     << functionsText
     << "extern \"C\" int stepc_train_step_v12(void *const *args, char *arena,\n"
     << "                                   const stepc_collectives *collectives,\n"
     << "                                   const stepc_device *device, float *loss,\n"
     << "                                   float *grad_norm, float *metrics, char *error,\n"
     << "                                   size_t error_len) {\n";
  std::string innerText;
  llvm::raw_string_ostream inner(innerText);
  const std::string profileRank = "collectives && kInfo.world_size > 1 ? collectives->rank : -1";
  if (profile)
    inner << profileStart(profileRank, /*afterBegin=*/false);
  stepBegin(inner);
  if (profile)
    inner << profileStart(profileRank, /*afterBegin=*/true);
  inner << stepBody;
  stepEnd(inner, lossExpr, normExpr);
  // The metrics one after another in the caller's buffer.
  if (!metrics.empty()) {
    inner << "  if (metrics) {\n";
    int64_t offset = 0;
    for (auto &[name, v] : metrics) {
      int64_t count = typeOf(v).getNumElements();
      inner << "    " << copyToHost("metrics + " + std::to_string(offset), ptr(v), count * 4,
                                    "metric")
            << "\n";
      offset += count;
    }
    inner << "  }\n";
  }
  bufferNames(os);
  os << innerText << "  return 0;\n}\n";
  return out + evalText + sampleText + prepareEntry();
}
