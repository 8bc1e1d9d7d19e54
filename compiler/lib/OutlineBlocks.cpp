//===- OutlineBlocks.cpp - one function per distinct block body ----------===//
//
// After the body is written, ops are grouped into runs by the block whose
// parameters, moments or gradient they read; each run's text, with its
// pointers renumbered by first appearance (one per address), becomes a
// function shared by every run with the same text, called with a static
// table of that run's pointers. Collective requests are slots of the step
// function's `requests` passed the same way, and error-site strings (CUDA's)
// come from a table per run. A deep model's source and compile time do not
// grow with its depth, sharded or not, on either target
// (docs/design/cpu-backend.md).
//
//===----------------------------------------------------------------------===//

#include "SourceEmitter.h"

#include "stepc/Analysis/StepStructure.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

DenseMap<Value, std::string> stepc::computedForBlocks(func::FuncOp step) {
  DenseMap<Value, std::string> blockOf = attributeBlocks(step);
  // Walking back from the loss's gradient to the first block's.
  DenseMap<Value, std::string> gradients = parameterBlocks(step);
  std::string next;
  for (Operation &o : llvm::reverse(step.getBody().front())) {
    std::optional<Phase> phase = getPhase(&o);
    if (phase != Phase::Backward && phase != Phase::Recompute)
      continue;
    for (Value r : o.getResults())
      if (auto it = gradients.find(r); it != gradients.end())
        next = it->second == "#" ? "" : it->second;
    for (Value r : o.getResults())
      blockOf[r] = next;
  }
  return blockOf;
}

DenseMap<Value, std::string> stepc::parameterBlocks(func::FuncOp step) {
  // Each parameter's block marker, which its moments share.
  llvm::StringMap<int64_t> blockOfParam;
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
    if (auto p = step.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName))
      blockOfParam[p.getName()] = p.getBlock();
  DenseMap<Value, std::string> blockOf;
  for (BlockArgument arg : step.getArguments()) {
    unsigned i = arg.getArgNumber();
    std::optional<int64_t> block;
    if (auto p = step.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName))
      block = p.getBlock();
    else if (auto s = step.getArgAttrOfType<StateAttr>(i, StepDialect::kStateAttrName))
      if (auto it = blockOfParam.find(s.getParam()); it != blockOfParam.end())
        block = it->second;
    if (!block)
      continue;
    std::string label = blockLabel(*block);
    blockOf[arg] = label.empty() ? "#" : label;
  }
  // A parameter's gradient too (through the reshapes that made it), so the
  // clipping norm's terms run in their block's code.
  auto gradientOf = [&](Value param, Value grad) {
    auto it = blockOf.find(param);
    if (it == blockOf.end())
      return;
    std::string block = it->second;
    for (Value g = grad; g;) {
      blockOf.try_emplace(g, block);
      auto reshape = g.getDefiningOp<ReshapeOp>();
      g = reshape ? reshape.getInput() : Value();
    }
  };
  for (Operation &update : step.getBody().front()) {
    // Every optimizer update reads (param, grad, ...); a multi-tensor group's
    // updates read its inputs through the body.
    if (isa<AdamwOp, SgdOp, LionOp>(update))
      gradientOf(update.getOperand(0), update.getOperand(1));
    if (auto group = dyn_cast<stepk::AdamwGroupOp>(update))
      for (AdamwOp u : group.getUpdates())
        gradientOf(group.inputOf(u.getParam()), group.inputOf(u.getGrad()));
  }
  for (Operation &op : step.getBody().front())
    if (isa<ReshapeOp, ConvertOp, SliceOp>(op) || getPhase(&op) == Phase::Collective)
      if (op.getNumOperands() > 0)
        if (auto it = blockOf.find(op.getOperand(0)); it != blockOf.end()) {
          // A copy: inserting may move the map's entries.
          std::string block = it->second;
          for (Value r : op.getResults())
            blockOf[r] = block;
        }
  return blockOf;
}

std::string stepc::resolveMarkers(StringRef from) {
  std::string out;
  out.reserve(from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    char c = from[i];
    if (c == kPtrBegin) {  // the name, without an argument's type
      size_t close = from.find(kPtrEnd, i);
      StringRef name = from.slice(i + 1, close).split(':').first;
      if (name[0] == 'q')  // a collective's request
        out += "requests[" + name.drop_front().str() + "]";
      else
        out += name;
      i = close;
    } else if (c != kLocBegin && c != kLocEnd && c != kSiteBegin && c != kSiteEnd) {
      out += c;
    }
  }
  return out;
}

std::string SourceEmitter::outlinedBody(std::string &functions) {
  const std::string &text = bodyText;
  std::string out;
  std::map<std::string, int> functionOf;
  auto outline = [&](size_t first, size_t last) {
    StringRef code = StringRef(text).slice(chunks[first].begin, chunks[last].end);
    // The function's text: pointers become p[k] by first appearance,
    // locations are dropped (they are at the call).
    std::string canonical;
    SmallVector<std::string> pointers;
    llvm::StringMap<unsigned> slot;
    SmallVector<std::string> locations, sites;
    for (size_t i = 0; i < code.size(); ++i) {
      char c = code[i];
      if (c == kSiteBegin) {  // an error site: sites[k] of the run's table
        size_t close = code.find(kSiteEnd, i);
        canonical += "sites[" + std::to_string(sites.size()) + "]";
        sites.push_back(code.slice(i + 1, close).str());
        i = close;
        continue;
      }
      if (c == kPtrBegin || c == kLocBegin) {
        size_t close = code.find(c == kPtrBegin ? kPtrEnd : kLocEnd, i);
        StringRef mark = code.slice(i + 1, close), argType;
        if (c == kPtrBegin)
          std::tie(mark, argType) = mark.split(':');
        std::string name = mark.str();
        if (c == kPtrBegin) {
          // One slot per address, not per name: an op in place reads and
          // writes one pointer, so the compiler vectorises it as it does
          // inline (a scalar fallback would round libmvec's exp differently).
          std::string address =
              name[0] == 'b' ? "@" + std::to_string(plan.buffers[std::stoll(name.substr(1))].offset)
                             : name;
          auto [it, inserted] = slot.try_emplace(address, pointers.size());
          if (inserted)
            pointers.push_back(name);
          std::string local = "p" + std::to_string(it->second);
          canonical += name[0] == 'q'    ? "(*" + local + ")"
                       : argType.empty() ? local
                                         : "((" + argType.str() + " *)" + local + ")";
        } else {
          locations.push_back(name);
          if (!canonical.empty() && canonical.back() == ' ')
            canonical.pop_back();
        }
        i = close;
        continue;
      }
      canonical += c;
    }
    // Where each pointer is: args[-t - 1] for t < 0, arena + t otherwise;
    // a request: its index in `requests`.
    SmallVector<int64_t> at;
    for (const std::string &name : pointers) {
      int64_t id = std::stoll(name.substr(1));
      at.push_back(name[0] == 'a'   ? -id - 1
                   : name[0] == 'q' ? id
                                    : plan.buffers[id].offset);
    }
    std::string where = array(at);
    // This run's error sites, in order of appearance.
    std::string siteTable = "nullptr";
    if (!sites.empty()) {
      siteTable = (evalEntry ? "kEvalSites" : "kSites") + std::to_string(siteTables++);
      functions += "static const char *const " + siteTable + "[] = {" + llvm::join(sites, ", ") +
                   "};\n";
    }
    auto [it, inserted] = functionOf.try_emplace(canonical, functionOf.size());
    std::string fn = (evalEntry ? "stepc_eval_block" : "stepc_block") + std::to_string(it->second);
    // Locals, as the step function's are: a loop reads a pointer in a
    // register, not through an array the compiler must reload.
    std::string declarations;
    for (size_t k = 0; k < pointers.size(); ++k)
      declarations +=
          pointers[k][0] == 'q'
              ? llvm::formatv("  int32_t *const p{0} = requests + at[{0}];\n", k).str()
              : llvm::formatv("  char *const p{0} = at[{0}] < 0 ? (char *)args[-at[{0}] - 1] "
                              ": arena + at[{0}];\n",
                              k)
                    .str();
    if (inserted)
      functions += "static int " + fn +
                   "(void *const *args, char *arena, const int64_t *at,\n"
                   "    const char *const *sites, int32_t *requests,\n"
                   "    const stepc_collectives *collectives, const stepc_device *device,\n"
                   "    char *error, size_t error_len" + blockParameters() + ") {\n" +
                   declarations + canonical + "  return 0;\n}\n\n";
    out += "  // " + chunks[first].block + ": " + std::to_string(last - first + 1) +
           " kernels from " + (locations.empty() ? "" : locations.front()) + " to " +
           (locations.empty() ? "" : locations.back()) + "\n  if (int failed = " + fn +
           "(args, arena, " + where + ", " + siteTable + ", " +
           (requests ? "requests" : "nullptr") + ", collectives, device, error, error_len" +
           blockArguments() + "))\n" +
           "    return failed;\n";
  };
  // A block's run: consecutive ops reading its parameters, with the ops
  // after them that read none. A collective's request lives in the step
  // function (`requests`); a run that starts or waits for one gets its slot.
  std::string current;
  size_t start = 0;
  auto flush = [&](size_t endChunk) {
    if (endChunk == start)
      return;
    if (current.empty() || current == "#")
      out += StringRef(text).slice(chunks[start].begin, chunks[endChunk - 1].end);
    else
      outline(start, endChunk - 1);
    start = endChunk;
  };
  for (size_t i = 0; i < chunks.size(); ++i) {
    bool inlineOnly = i + 1 == chunks.size();
    const std::string &block = chunks[i].block;
    if (inlineOnly) {
      flush(i);
      current = "#";
      flush(i + 1);
      current = "";
      continue;
    }
    if (!block.empty() && block != current) {
      flush(i);
      current = block;
    }
  }
  flush(chunks.size());
  return out;
}

