//===- CudaEmitter.cpp - CUDA C++ source for the CUDA target -------------===//
//
// The step becomes one host function that enqueues everything on one
// stream: library kernels (runtime/kernels/cuda/cuda_kernels.h), cuBLASLt
// GEMMs, one generated kernel per distinct elementwise signature, and a
// multi-tensor AdamW per stepk.adamw_group. What a library kernel computes
// besides its op (a GEMM's epilogue, a widening, an attention's saved
// forward) and which updates share a launch are in the IR already
// (stepk.gemm, stepk.attention, stepk.adamw_group: step-fuse-cuda-kernels),
// and so is the arena
// around the plan's buffers (status word, cuBLASLt workspace, scratch:
// step-plan-memory).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "SourceEmitter.h"

#include "stepc/Compiler/ArenaPlan.h"

#include "runtime/kernels/cuda/launch_config.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;
namespace lc = stepc::cuda;

namespace {

std::string typeCode(Type element) {
  if (stepk::isFp8Bytes(element))
    return "STEPC_CUDA_FP8";
  return element.isBF16() ? "STEPC_CUDA_BF16" : "STEPC_CUDA_F32";
}

class CudaEmitter : public SourceEmitter {
public:
  CudaEmitter(func::FuncOp step, const MemoryPlan &plan)
      : SourceEmitter(step, plan, "cuda"),
        layout(readCudaArena(step).value_or(CudaArenaLayout())) {}
  /// Kernel launches and library calls the emitted step makes.
  int64_t launchCount() const { return launches; }

private:
  LogicalResult checkTypes(Operation *op) override;
  LogicalResult emitOp(Operation *op) override;
  void prologue(raw_ostream &os) override;
  std::string libraryDeclaration(stepk::CallOp c) override {
    // Many tensors travel as a table (emitSquaredNorms, emitBf16Copies).
    if (c.getCallee() == kSquaredNormsCall)
      return "int stepc_cuda_squared_norms(stepc_cuda_ctx *, const stepc_norm_tensor *, int, "
             "float *, float *);";
    if (c.getCallee() == kBf16CopiesCall)
      return "int stepc_cuda_bf16_copies(stepc_cuda_ctx *, const stepc_bf16_copy *, int);";
    // The context first; scratch after the scalars; an id check's site last.
    SmallVector<std::string> params{"stepc_cuda_ctx *"};
    llvm::append_range(params, libraryInputTypes(c));
    if (c.getScratchBytes())
      params.push_back("float *");
    llvm::append_range(params, libraryResultTypes(c));
    if (c.getIdCheck())
      params.push_back("int32_t");
    return ("int stepc_cuda_" + c.getCallee()).str() + "(" + llvm::join(params, ", ") + ");";
  }
  void stepBegin(raw_ostream &os) override;
  std::string prepareEntry() override;
  // After the step's start, which names its stream.
  std::string profileStart(const std::string &rank, bool afterBegin) const override {
    return afterBegin ? "  stepc_prof_begin(" + rank + ", stream);\n" : "";
  }
  // Events on the stream, read after a recorded step: every step counts.
  std::string profileTimers() override { return cudaProfileTimers(); }
  std::string profileSteps() const override { return "stepc_prof_steps"; }
  std::string profileTraceCollect() const override {
    return "  if (!record && stepc_prof_recording)\n    stepc_prof_collect();\n";
  }
  std::string profileTraceOrigin() const override {
    return "    stepc_prof_t0 = stepc_prof_now();\n";
  }
  void stepEnd(raw_ostream &os, const std::string &loss, const std::string &norm) override;
  std::string copyToHost(const std::string &dst, const std::string &src, int64_t bytes,
                         const char *what) override {
    return "STEPC_CUDA(cudaMemcpyAsync(" + dst + ", " + src + ", " + std::to_string(bytes) +
           ", cudaMemcpyDeviceToHost, stream), \"" + what + "\");";
  }
  std::string copyStatement(const std::string &dst, const std::string &src,
                            int64_t bytes) override {
    return "STEPC_CUDA(cudaMemcpyAsync(" + dst + ", " + src + ", " + std::to_string(bytes) +
           ", cudaMemcpyDeviceToDevice, stream), \"all_reduce copy\");";
  }
  std::string targetExpression() override { return "STEPC_TARGET"; }
  int64_t arenaBytes() override { return layout.bytes; }
  /// Each op's text stands alone, so equal blocks share a function; it
  /// takes the step's stream, context and scratch.
  std::string blockParameters() const override {
    return ", stepc_cuda_ctx *ctx, cudaStream_t stream, char *scratch";
  }
  std::string blockArguments() const override { return ", ctx, stream, scratch"; }
  /// A kernel's scratch must fit the layout's (its largest).
  LogicalResult needScratch(Operation *op, int64_t bytes) {
    if (bytes <= layout.scratchBytes)
      return success();
    return op->emitOpError() << "internal error: needs " << bytes
                             << " bytes of scratch, the memory plan has "
                             << layout.scratchBytes << " (step-plan-memory)";
  }

  void printCall(Operation *site, StringRef callee, const std::string &args) override {
    call(site, "stepc_cuda_" + callee.str() + "(ctx, " + args + ")");
  }
  /// `STEPC_TRY(call, "site")` for a library call.
  void call(Operation *op, const std::string &text) {
    ++launches;
    body << "  STEPC_TRY(" << text << ", "
         << site(where(op) + ": '" + op->getName().getStringRef().str() + "'") << ");\n";
  }
  /// A new check site for an op whose ids the device checks.
  int checkSite(Operation *op, StringRef what) {
    checkSites.push_back(where(op) + ": '" + op->getName().getStringRef().str() + "' " +
                         what.str());
    return static_cast<int>(checkSites.size());
  }
  LogicalResult emitElementwise(Operation *op);
  LogicalResult emitFused(stepk::FusedOp fused) override;
  /// Declares (once per distinct text) and launches an elementwise kernel:
  /// `statements` compute element i; `vectorLoop`, when not empty, runs
  /// first over 8 elements a thread (vectorLoop()).
  void launchElementwise(Operation *site, const std::string &params,
                         const std::string &statements, const std::string &vectorLoop,
                         ArrayRef<Value> args, int64_t n, StringRef what);
  LogicalResult emitConstant(ConstantOp op);
  /// One GEMM call: `aux` is the pre-activation the epilogue writes (gelu)
  /// or reads (dgelu), or the bias gradient it writes (bgrad).
  LogicalResult emitMatmul(Operation *op, Value lhs, Value rhs, Value result, bool ta, bool tb,
                           bool sharedRhs, Value bias = {},
                           stepk::Epilogue epilogue = stepk::Epilogue::none, Value aux = {},
                           std::optional<ArrayRef<int32_t>> fp8 = std::nullopt,
                           Value lhsScales = {}, Value rhsScales = {});
  /// A forward attention kernel, and its log-sum-exp if it saves one.
  void emitAttention(stepk::AttentionOp a);
  /// An attention backward, reading the forward's output and log-sum-exp
  /// where it saved them.
  LogicalResult emitAttentionGrad(stepk::AttentionGradOp a);
  void emitAdamwGroup(stepk::AdamwGroupOp group);
  /// The gradient clipping's squared norms (step-fuse-cuda-kernels'
  /// "squared_norms" call): its inputs as one table of (pointer, numel).
  LogicalResult emitSquaredNorms(stepk::CallOp c);
  /// The parameters' bf16 copies (step-fuse-cuda-kernels' "bf16_copies"
  /// call): one table of (source, copy, numel).
  LogicalResult emitBf16Copies(stepk::CallOp c);

  /// The arena's layout (step-plan-memory).
  CudaArenaLayout layout;
  /// Kernel launches and library calls a step makes (each library call
  /// launches one to three kernels or a cuBLASLt GEMM).
  int64_t launches = 0;
  /// Constant tables by type and contents.
  std::map<std::string, std::string> constantTables;
  /// Generated elementwise kernels by signature.
  llvm::StringMap<std::string> elementwiseKernels;
};

LogicalResult CudaEmitter::checkTypes(Operation *op) {
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  // What the kernels take, checked here so that the error has a location.
  for (Value v : values)
    if (typeOf(v).getRank() > lc::kMaxTensorRank)
      return op->emitOpError() << "the CUDA back end takes tensors of rank at most "
                               << lc::kMaxTensorRank << ", got " << v.getType();
  int64_t headDim = 0;
  if (auto a = dyn_cast<AttentionOp>(op))
    headDim = a.getHeadDim();
  if (auto a = dyn_cast<AttentionGradOp>(op))
    headDim = a.getHeadDim();
  if (auto a = dyn_cast<stepk::AttentionOp>(op))
    headDim = a.getHeadDim();
  if (auto a = dyn_cast<stepk::AttentionGradOp>(op))
    headDim = a.getHeadDim();
  if (headDim > lc::kAttentionMaxHeadDim)
    return op->emitOpError() << "head_dim " << headDim
                             << " is above the CUDA attention kernels' "
                             << lc::kAttentionMaxHeadDim;
  bool mixed = isa<ConvertOp, stepk::GemmOp, AttentionOp,
                   AttentionGradOp, stepk::AttentionOp, stepk::AttentionGradOp, ReshapeOp,
                   func::ReturnOp>(op);
  for (Value v : values) {
    Type elem = typeOf(v).getElementType();
    if (elem.isF32() || elem.isInteger(32) || elem.isInteger(1) || (elem.isBF16() && mixed))
      continue;
    // fp8 bytes: written by a packing pass, read by the fp8 GEMMs.
    if (stepk::isFp8Bytes(elem) &&
        isa<stepk::PackFp8Op, stepk::CallOp, stepk::YieldOp, stepk::GemmOp, func::ReturnOp>(op))
      continue;
    if (elem.isBF16())
      return op->emitOpError()
             << "takes bf16 only in GEMMs, attention and converts on the CUDA target "
                "(step-mixed-precision keeps everything else f32), got "
             << v.getType();
    return op->emitOpError() << "the CUDA back end supports f32, bf16, i32 and i1 tensors, got "
                             << v.getType();
  }
  return success();
}

void CudaEmitter::prologue(raw_ostream &os) {
  os << "#include \"stepc_abi.h\"\n#include \"cuda_kernels.h\"\n#include \"launch_config.h\"\n"
     << "#include \"../elementwise_math.h\"\n\n"
     << "#include <stdio.h>\n\n"
     << "// Built by nvcc for a GPU, or by the host compiler for the host emulation\n"
     << "// of CUDA (stepc --cuda-emulation: tests without a GPU).\n"
     << "#ifdef STEPC_CUDA_EMULATION\n#define STEPC_TARGET \"cuda-emulation\"\n#else\n"
     << "#include <cuda_bf16.h>\n#include <cuda_runtime.h>\n#define STEPC_TARGET \"cuda\"\n"
     << "#endif\n"
     << "#include \"vector_access.cuh\"\n\n"
     << "// Prefixes the failing op's location to the message a call left.\n"
     << "static int stepc_fail_at(char *error, size_t len, const char *site) {\n"
     << "  char detail[512];\n  snprintf(detail, sizeof(detail), \"%s\", error);\n"
     << "  snprintf(error, len, \"%s: %s\", site, detail);\n  return 1;\n}\n"
     << "#define STEPC_TRY(call, site) \\\n"
     << "  do { if (call) return stepc_fail_at(error, error_len, site); } while (0)\n"
     // step.cu: the generated source (--emit=source), not its path, which
     // is gone after the build and would make equal steps' code differ.
     << "#define STEPC_CUDA(call, site) \\\n"
     << "  do { cudaError_t rc_ = (call); if (rc_ != cudaSuccess) { \\\n"
     << "    snprintf(error, error_len, \"%s failed at step.cu:%d: %s\", #call, __LINE__, \\\n"
     << "             cudaGetErrorString(rc_)); \\\n"
     << "    return stepc_fail_at(error, error_len, site); } } while (0)\n"
     << "#define STEPC_LAUNCHED(site) STEPC_CUDA(cudaGetLastError(), site)\n\n"
     << "static inline unsigned stepc_blocks(int64_t n) {\n"
     << "  return (unsigned)stepc::cuda::ElementwiseBlocks(n);\n}\n\n";
}

// Every attention call of the training, eval and sampling steps again, on
// no buffer and with ctx->prepare set: cuDNN's graphs for their shapes are
// built here, when the session starts, and none in a step
// (kernels/cuda/cudnn_attention.h).
std::string CudaEmitter::prepareEntry() {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "\n// Before the first step (the runtime calls it once): what the steps' library\n"
     << "// calls build ahead, cuDNN's attention graphs; nothing runs, no buffer is read.\n"
     << "extern \"C\" int stepc_prepare_v1(const stepc_device *device, char *error,\n"
     << "                                size_t error_len) {\n"
     << "  if (!device || !device->stream)\n    "
     << failWith("a CUDA step needs a device: a stream and pinned status memory") << "\n"
     << "  stepc_cuda_ctx ctx_ = {(cudaStream_t)device->stream, 0, 0, error, error_len, 1};\n"
     << "  stepc_cuda_ctx *ctx = &ctx_;\n"
     << "  (void)ctx;\n"
     << "  // Stands for every buffer operand: not null where the step passes one (a\n"
     << "  // call's shape says whether it saves a log-sum-exp), never read or written.\n"
     << "  alignas(256) static char stepc_no_buffer_[256];\n"
     << "  char *const stepc_no_buffer = stepc_no_buffer_;\n"
     << "  char *const scratch = stepc_no_buffer;\n"
     << "  (void)scratch;\n";
  for (const auto &[call, statement] : prepareCalls)
    os << statement;
  os << "  return 0;\n}\n";
  return text;
}

void CudaEmitter::stepBegin(raw_ostream &os) {
  os << "  if (!device || !device->stream || !device->host_status)\n    "
     << failWith("a CUDA step needs a device: a stream and pinned status memory") << "\n"
     << "  cudaStream_t stream = (cudaStream_t)device->stream;\n"
     << "  stepc_cuda_ctx ctx_ = {stream, arena + " << layout.workspaceOffset << ", (int32_t *)(arena + "
     << layout.statusOffset << "), error, error_len};\n"
     << "  stepc_cuda_ctx *ctx = &ctx_;\n"
     << "  char *scratch = arena + " << layout.scratchOffset << ";\n"
     << "  (void)scratch;\n"
     << "  STEPC_CUDA(cudaMemsetAsync(ctx->status, 0, 4 * sizeof(int32_t), stream), \"step start\");\n";
}

void CudaEmitter::stepEnd(raw_ostream &os, const std::string &loss, const std::string &norm) {
  os << "  STEPC_CUDA(cudaMemcpyAsync(loss, " << loss
     << ", sizeof(float), cudaMemcpyDeviceToHost, stream), \"loss\");\n";
  if (!norm.empty())  // the eval entry has none
    os << "  STEPC_CUDA(cudaMemcpyAsync(grad_norm, " << norm
       << ", sizeof(float), cudaMemcpyDeviceToHost, stream), \"grad_norm\");\n";
  os << "  STEPC_CUDA(cudaMemcpyAsync(device->host_status, ctx->status, 4 * sizeof(int32_t), "
        "cudaMemcpyDeviceToHost, stream), \"status\");\n";
}

/// The load of element i of kernel parameter `name` as a float.
static std::string loadAs(Type t, const std::string &name) {
  std::string at = name + "[i]";
  return t.isBF16() ? "__bfloat162float(" + at + ")" : t.isF32() ? at : "(float)" + at;
}

/// `value` stored as element type t (a mask as a 32-bit 0 or 1).
static std::string storeAs(Type t, const std::string &value) {
  return t.isBF16()         ? "__float2bfloat16(" + value + ")"
         : t.isF32()        ? value
         : t.isInteger(1) ? "(int32_t)((" + value + ") != 0.0f)"
                            : "(int32_t)(" + value + ")";
}

/// Whether every operand of a generated kernel can move 8 elements with
/// 16-byte accesses (f32 and bf16; masks and ids cannot).
static bool vectorTypes(ArrayRef<Value> values) {
  return llvm::all_of(values, [](Value v) {
    Type t = cast<RankedTensorType>(v.getType()).getElementType();
    return t.isF32() || t.isBF16();
  });
}

/// The loop of a generated elementwise kernel over 8 elements a thread: when
/// every pointer is 16-byte aligned, each input's 8 elements are loaded into
/// l<k>[8] with 16-byte accesses (vector_access.cuh), `statements` compute
/// element j from them into s<k>[j], and each output's 8 are stored at once;
/// the scalar loop after it takes the elements past the last 8 (or all, when
/// a pointer is not aligned). One load a thread per 2 or 4 bytes reaches
/// about two thirds of HBM bandwidth; 16 bytes a load, most of it.
static std::string vectorLoop(unsigned inputs, unsigned outputs, const std::string &statements) {
  std::string pointers, loads, stores, declared;
  for (unsigned k = 0; k < inputs; ++k) {
    pointers += (pointers.empty() ? "" : " | ") + ("(uintptr_t)p" + std::to_string(k));
    loads += "      float l" + std::to_string(k) + "[8];\n      stepc::cuda::LoadEight(p" +
             std::to_string(k) + " + 8 * v, l" + std::to_string(k) + ");\n";
  }
  for (unsigned k = 0; k < outputs; ++k) {
    pointers += (pointers.empty() ? "" : " | ") + ("(uintptr_t)o" + std::to_string(k));
    declared += "      float s" + std::to_string(k) + "[8];\n";
    stores += "      stepc::cuda::StoreEight(o" + std::to_string(k) + " + 8 * v, s" +
              std::to_string(k) + ");\n";
  }
  std::string indented;
  for (StringRef line : llvm::split(StringRef(statements).rtrim('\n'), '\n'))
    indented += "    " + line.str() + "\n";
  return "  if (((" + pointers + ") & 15) == 0) {\n" +
         "    first = n / 8 * 8;\n" +
         "    for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < n / 8;\n" +
         "         v += (int64_t)gridDim.x * blockDim.x) {\n" + loads + declared +
         "      for (int j = 0; j < 8; ++j) {\n" + indented + "      }\n" + stores + "    }\n" +
         "  }\n";
}

void CudaEmitter::launchElementwise(Operation *site, const std::string &params,
                                    const std::string &statements, const std::string &vector,
                                    ArrayRef<Value> args, int64_t n, StringRef what) {
  std::string signature = params + "|" + statements + "|" + vector;
  std::string &name = elementwiseKernels[signature];
  if (name.empty()) {
    // (nvcc's launch stubs do not tell a namespace's kernel from a global one
    // of the same signature: the eval entry's kernels get their own names.)
    name = (evalEntry ? "stepc_eval_elementwise" : "stepc_elementwise") +
           std::to_string(elementwiseKernels.size() - 1);
    pre << "// " << what << "\nstatic __global__ void " << name << "(" << params
        << "int64_t n) {\n";
    if (vector.empty())
      pre << "  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;\n";
    else
      pre << "  int64_t first = 0;\n"
          << vector
          << "  for (int64_t i = first + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;\n";
    pre << "       i += (int64_t)gridDim.x * blockDim.x) {\n" << statements << "  }\n}\n\n";
  }
  ++launches;
  // With the vector loop a thread takes 8 elements a step: an eighth of the
  // threads.
  int64_t threads = vector.empty() ? n : (n + 7) / 8;
  body << "  STEPC_LAUNCH(stepc_blocks(" << threads << "), " << lc::kThreads << ", 0, stream, "
       << name << ")(";
  for (Value v : args)
    body << ptr(v) << ", ";
  body << n << ");\n  STEPC_LAUNCHED("
       << SourceEmitter::site(where(site) + ": '" + site->getName().getStringRef().str() + "'") << ");\n";
}

LogicalResult CudaEmitter::emitElementwise(Operation *op) {
  auto x = [](unsigned i) { return "x" + std::to_string(i); };
  std::optional<std::string> expr = elementwiseExpr(op, x);
  if (!expr)
    return failure();
  std::string params, statements, elements;
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    Type t = typeOf(op->getOperand(i)).getElementType();
    params += "const " + cType(t) + " *p" + std::to_string(i) + ", ";
    statements += "    const float x" + std::to_string(i) + " = " +
                  loadAs(t, "p" + std::to_string(i)) + ";\n";
    elements += "    const float x" + std::to_string(i) + " = l" + std::to_string(i) + "[j];\n";
  }
  Type outType = typeOf(op->getResult(0)).getElementType();
  params += cType(outType) + " *o0, ";
  statements += "    o0[i] = " + storeAs(outType, *expr) + ";\n";
  elements += "    s0[j] = " + *expr + ";\n";
  SmallVector<Value> args(op->getOperands());
  args.push_back(op->getResult(0));
  std::string vector =
      vectorTypes(args) ? vectorLoop(op->getNumOperands(), 1, elements) : std::string();
  launchElementwise(op, params, statements, vector, args,
                    typeOf(op->getResult(0)).getNumElements(), op->getName().getStringRef());
  return success();
}

// Values in registers; bf16 and i32 results rounded as if stored, so a fused
// group computes exactly what the unfused ops would.
LogicalResult CudaEmitter::emitFused(stepk::FusedOp fused) {
  ValueRange inputs = fused.getInputs(), outputs = fused.getResults();
  std::string params;
  for (auto [k, in] : llvm::enumerate(inputs))
    params += "const " + cType(typeOf(in).getElementType()) + " *p" + std::to_string(k) + ", ";
  for (auto [k, out] : llvm::enumerate(outputs))
    params += cType(typeOf(out).getElementType()) + " *o" + std::to_string(k) + ", ";
  auto roundAsStored = [](Type t, std::string e) {
    if (t.isBF16())
      return "__bfloat162float(__float2bfloat16(" + e + "))";
    if (t.isInteger(1))
      return "(float)((" + e + ") != 0.0f)";
    return t.isF32() ? e : "(float)(int32_t)(" + e + ")";
  };
  GroupCode code = groupCode(
      fused,
      [&](unsigned k) {
        return loadAs(typeOf(inputs[k]).getElementType(), "p" + std::to_string(k));
      },
      roundAsStored);
  std::string statements = code.statements;
  for (auto [k, out] : llvm::enumerate(outputs))
    statements += "    o" + std::to_string(k) + "[i] = " +
                  storeAs(typeOf(out).getElementType(), code.outputRegisters[k]) + ";\n";
  SmallVector<Value> args(inputs);
  llvm::append_range(args, outputs);
  // The same statements on element j of 8 loaded at once; a bf16 output's
  // rounding is its 16-byte store's.
  std::string vector;
  if (vectorTypes(args)) {
    GroupCode eight = groupCode(
        fused, [](unsigned k) { return "l" + std::to_string(k) + "[j]"; }, roundAsStored);
    std::string elements = eight.statements;
    for (unsigned k = 0; k < outputs.size(); ++k)
      elements += "    s" + std::to_string(k) + "[j] = " + eight.outputRegisters[k] + ";\n";
    vector = vectorLoop(inputs.size(), outputs.size(), elements);
  }
  std::string what = "fused";
  Operation *site = nullptr;
  for (Operation &op : fused.getBody().front().without_terminator()) {
    if (isa<ReshapeOp>(op))
      continue;
    site = site ? site : &op;
    what += " " + op.getName().getStringRef().drop_front(5).str();
  }
  launchElementwise(site, params, statements, vector, args, fused.getNumElements(), what);
  return success();
}

LogicalResult CudaEmitter::emitConstant(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError() << "the CUDA back end supports dense constants only";
  Value out = op.getResult();
  bool isFloat = isa<FloatType>(dense.getElementType());
  if (dense.isSplat() && dense.getElementType().isF32()) {
    call(op, llvm::formatv("stepc_cuda_fill(ctx, {0}, {1}, {2})", ptr(out),
                           dense.getNumElements(),
                           floatLiteral(dense.getSplatValue<APFloat>().convertToDouble())));
    return success();
  }
  if (!dense.getElementType().isF32() && !dense.getElementType().isInteger(32))
    return op.emitOpError() << "the CUDA back end supports f32 and i32 constants";
  // A device table and a kernel that copies it (capturable in a graph);
  // equal constants share them (so equal block runs print equal code).
  std::string type = isFloat ? "float" : "int32_t";
  int64_t n = dense.getNumElements();
  std::string contents;
  llvm::raw_string_ostream os(contents);
  for (int64_t i = 0; i < n; ++i) {
    if (i)
      os << ", ";
    if (isFloat)
      os << floatLiteral((dense.isSplat() ? dense.getSplatValue<APFloat>()
                                          : dense.getValues<APFloat>()[i])
                             .convertToDouble());
    else
      os << storedInteger(dense.isSplat() ? dense.getSplatValue<APInt>()
                                          : dense.getValues<APInt>()[i]);
  }
  auto [named, inserted] = constantTables.try_emplace(type + " {" + contents + "}");
  if (inserted) {
    named->second = "c" + std::to_string(constants++);
    pre << "__device__ const " << type << " " << named->second << "[] = {" << contents
        << "};\nstatic __global__ void " << named->second << "_copy(" << type << " *out) {\n"
        << "  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < " << n
        << "; i += (int64_t)gridDim.x * blockDim.x) out[i] = " << named->second << "[i];\n}\n";
  }
  const std::string &name = named->second;
  ++launches;
  body << "  STEPC_LAUNCH(stepc_blocks(" << n << "), " << lc::kThreads << ", 0, stream, " << name
       << "_copy)(" << ptr(out) << ");\n  STEPC_LAUNCHED("
       << site(where(op) + ": 'step.constant'") << ");\n";
  return success();
}

LogicalResult CudaEmitter::emitMatmul(Operation *op, Value lhs, Value rhs, Value result, bool ta,
                                      bool tb, bool sharedRhs, Value bias,
                                      stepk::Epilogue epilogue, Value aux,
                                      std::optional<ArrayRef<int32_t>> fp8, Value lhsScales,
                                      Value rhsScales) {
  RankedTensorType lhsType = typeOf(lhs), out = typeOf(result);
  int64_t k = lhsType.getDimSize(lhsType.getRank() - (ta ? 2 : 1));
  int64_t m = out.getDimSize(out.getRank() - 2), n = out.getShape().back();
  int64_t batch = out.getNumElements() / (m * n);
  // The operands' element types: one, or (an fp8 GEMM) each its own.
  std::string types = typeCode(lhsType.getElementType());
  if (fp8)
    types += ", " + typeCode(typeOf(rhs).getElementType());
  // The arguments after the operands.
  std::string rest = llvm::formatv(
      "{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}", ptr(result), batch,
      m, n, k, ta ? 1 : 0, tb ? 1 : 0, sharedRhs ? 1 : 0, types, typeCode(out.getElementType()),
      bias ? ptr(bias) : "0", "STEPC_EPILOGUE_" + stepk::stringifyEpilogue(epilogue).upper(),
      aux ? ptr(aux) : "0");
  std::string args = "ctx, " + ptr(lhs) + ", " + ptr(rhs) + ", " + rest;
  if (!fp8) {
    call(op, "stepc_cuda_matmul(" + args + ")");
    return success();
  }
  // Operands packed to fp8 bytes and block scales in scratch (operands
  // packed already: their bf16 values there where the GEMM runs in bf16).
  if (failed(needScratch(op, lc::Fp8GemmScratchBytes(batch, m, n, k, ta, sharedRhs, (*fp8)[0],
                                                     (*fp8)[1], (*fp8)[2], lhsScales ? 1 : 0,
                                                     rhsScales ? 1 : 0))))
    return failure();
  // The formats and the rhs's scaling.
  std::string formats = llvm::formatv("{0}, {1}, {2}", (*fp8)[0], (*fp8)[1], (*fp8)[2]);
  if (!lhsScales && !rhsScales) {
    call(op, "stepc_cuda_matmul_fp8(" + args + ", " + formats + ", scratch)");
    return success();
  }
  // The packed form's arguments: each operand with its scales (0: packed
  // by the GEMM).
  std::string packedArgs =
      llvm::formatv("ctx, {0}, {1}, {2}, {3}, {4}", ptr(lhs), lhsScales ? ptr(lhsScales) : "0",
                    ptr(rhs), rhsScales ? ptr(rhsScales) : "0", rest);
  call(op, "stepc_cuda_matmul_fp8_packed(" + packedArgs + ", " + formats + ", scratch)");
  return success();
}

/// A masked attention's callee suffix and its mask arguments (pointer and
/// the strides of its [Bm, Hm, Tqm, Tk] dims, 0 where one broadcasts).
static std::pair<std::string, std::string> maskArguments(Value mask,
                                                         function_ref<std::string(Value)> ptr) {
  if (!mask)
    return {"", ""};
  ArrayRef<int64_t> m = cast<RankedTensorType>(mask.getType()).getShape();
  return {"_masked",
          llvm::formatv(", {0}, {1}, {2}, {3}", ptr(mask), m[0] == 1 ? 0 : m[1] * m[2] * m[3],
                        m[1] == 1 ? 0 : m[2] * m[3], m[2] == 1 ? 0 : m[3])
              .str()};
}

/// A packed attention's source arguments after the context: the packed
/// operand, its row width and the three column offsets.
static std::string packedArguments(Value source, ArrayRef<int64_t> offsets,
                                   function_ref<std::string(Value)> ptr) {
  return llvm::formatv("{0}, {1}, {2}, {3}, {4}", ptr(source),
                       cast<RankedTensorType>(source.getType()).getDimSize(2), offsets[0],
                       offsets[1], offsets[2])
      .str();
}

void CudaEmitter::emitAttention(stepk::AttentionOp a) {
  double scale = a.getScale().convertToDouble();
  Value out = a.getResult(), lse = a.getLse();
  RankedTensorType q = typeOf(a.getQuery()), k = typeOf(a.getKey());
  // The call over `ptr`'s operands: the step's buffers, or none (prepare).
  auto text = [&](function_ref<std::string(Value)> ptr) -> std::string {
    if (std::optional<ArrayRef<int64_t>> packed = a.getPacked())
      return llvm::formatv("stepc_cuda_attention_packed(ctx, {0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                           "{7}, {8:e}, {9}, {10}, {11})",
                           packedArguments(a.getQuery(), *packed, ptr),
                           typeCode(q.getElementType()), q.getDimSize(0), q.getDimSize(1),
                           a.getNumHeads(), a.getNumKvHeads(), a.getHeadDim(),
                           a.getCausal() ? 1 : 0, scale, ptr(out),
                           typeCode(typeOf(out).getElementType()),
                           lse ? ptr(lse) : std::string("0"));
    auto [masked, mask] = maskArguments(a.getMask(), ptr);
    return llvm::formatv("stepc_cuda_attention{15}(ctx, {0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                         "{8}, {9}, {10}, {11:e}{16}, {12}, {13}, {14})",
                         ptr(a.getQuery()), ptr(a.getKey()), ptr(a.getValue()),
                         typeCode(q.getElementType()), q.getDimSize(0), q.getDimSize(1),
                         k.getDimSize(1), a.getNumHeads(), a.getNumKvHeads(), a.getHeadDim(),
                         a.getCausal() ? 1 : 0, scale, ptr(out),
                         typeCode(typeOf(out).getElementType()),
                         lse ? ptr(lse) : std::string("0"), masked, mask);
  };
  call(a, text([&](Value v) { return this->ptr(v); }));
  prepareCall(a, text([&](Value v) { return noBuffer(v); }));
}

LogicalResult CudaEmitter::emitAttentionGrad(stepk::AttentionGradOp a) {
  double scale = a.getScale().convertToDouble();
  Value out = a.getOut(), lse = a.getLse();
  RankedTensorType q = typeOf(a.getQuery()), k = typeOf(a.getKey());
  Value dq = a.getGrads()[0]; // the packed gradient when packed
  if (failed(needScratch(
          a, lc::AttentionGradScratchBytesFor(
                 q.getDimSize(0), q.getDimSize(1), k.getDimSize(1), a.getNumHeads(),
                 a.getNumKvHeads(), a.getHeadDim(), /*saved=*/lse != nullptr,
                 q.getElementType().isBF16(), typeOf(dq).getElementType().isF32()))))
    return failure();
  auto text = [&](function_ref<std::string(Value)> ptr) -> std::string {
    std::string saved = "0, 0, 0";
    if (lse)
      saved = ptr(out) + ", " + typeCode(typeOf(out).getElementType()) + ", " + ptr(lse);
    if (std::optional<ArrayRef<int64_t>> packed = a.getPacked())
      return llvm::formatv("stepc_cuda_attention_grad_packed(ctx, {0}, {1}, {2}, {3}, {4}, {5}, "
                           "{6}, {7}, {8}, {9:e}, scratch, {10}, {11}, {12})",
                           ptr(a.getGrad()), packedArguments(a.getQuery(), *packed, ptr),
                           typeCode(q.getElementType()), q.getDimSize(0), q.getDimSize(1),
                           a.getNumHeads(), a.getNumKvHeads(), a.getHeadDim(),
                           a.getCausal() ? 1 : 0, scale, saved, ptr(dq),
                           typeCode(typeOf(dq).getElementType()));
    auto [masked, mask] = maskArguments(a.getMask(), ptr);
    return llvm::formatv("stepc_cuda_attention_grad{18}(ctx, {0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                         "{7}, {8}, {9}, {10}, {11}, {12:e}{19}, scratch, {13}, {14}, {15}, {16}, "
                         "{17})",
                         ptr(a.getGrad()), ptr(a.getQuery()), ptr(a.getKey()),
                         ptr(a.getValue()), typeCode(q.getElementType()), q.getDimSize(0),
                         q.getDimSize(1), k.getDimSize(1), a.getNumHeads(), a.getNumKvHeads(),
                         a.getHeadDim(), a.getCausal() ? 1 : 0, scale, saved, ptr(dq),
                         ptr(a.getKeyGrad()), ptr(a.getValueGrad()),
                         typeCode(typeOf(dq).getElementType()), masked, mask);
  };
  call(a, text([&](Value v) { return this->ptr(v); }));
  prepareCall(a, text([&](Value v) { return noBuffer(v); }));
  return success();
}

// One launch updates every tensor of a group (step-fuse-cuda-kernels made
// it: one set of hyperparameters) from a table of its tensors.
void CudaEmitter::emitAdamwGroup(stepk::AdamwGroupOp group) {
  SmallVector<AdamwOp> updates = group.getUpdates();
  AdamwOp first = updates.front();
  // Pointers of the group's inputs (the body's operands stand for them).
  auto at = [&](Value bodyValue) { return ptr(group.inputOf(bodyValue)); };
  std::string table = "adamw" + std::to_string(constants++);
  body << "  // multi-tensor AdamW over " << updates.size() << " tensors\n"
       << "  const stepc_adamw_tensor " << table << "[] = {\n";
  for (AdamwOp a : updates)
    body << "    {" << at(a.getParam()) << ", " << at(a.getGrad()) << ", " << at(a.getM())
         << ", " << at(a.getV()) << ", " << typeOf(a.getParam()).getNumElements() << "},\n";
  body << "  };\n";
  call(group, llvm::formatv("stepc_cuda_{9}(ctx, {0}, {1}, {2}, {3}, {4}, {5:e}, {6:e}, "
                            "{7:e}, {8:e})",
                            table, updates.size(), at(first.getLr()), at(first.getStep()),
                            at(first.getGradScale()), first.getBeta1().convertToDouble(),
                            first.getBeta2().convertToDouble(),
                            first.getEpsilon().convertToDouble(),
                            first.getWeightDecay().convertToDouble(),
                            first.getDecoupledWeightDecay() ? "adamw" : "adam"));
}

LogicalResult CudaEmitter::emitSquaredNorms(stepk::CallOp c) {
  auto f32 = [&](Value v) { return typeOf(v).getElementType().isF32(); };
  if (c.getInputs().empty() || !llvm::all_of(c.getInputs(), f32) || c.getNumResults() != 1 ||
      !f32(c.getResult(0)) || typeOf(c.getResult(0)).getRank() != 0)
    return c.emitOpError() << "internal error: squared_norms takes f32 tensors and returns an "
                              "f32 scalar";
  if (failed(needScratch(c, c.getScratchBytes().value_or(0))))
    return failure();
  std::string table = "norms" + std::to_string(constants++);
  body << "  // squared norms of " << c.getInputs().size() << " tensors\n"
       << "  const stepc_norm_tensor " << table << "[] = {\n";
  for (Value in : c.getInputs())
    body << "    {" << ptr(in) << ", " << typeOf(in).getNumElements() << "},\n";
  body << "  };\n";
  call(c.getKernelOp(),
       llvm::formatv("stepc_cuda_squared_norms(ctx, {0}, {1}, (float *)scratch, {2})", table,
                     c.getInputs().size(), ptr(c.getResult(0))));
  return success();
}

LogicalResult CudaEmitter::emitBf16Copies(stepk::CallOp c) {
  if (c.getInputs().empty() || c.getNumResults() != c.getInputs().size() ||
      !llvm::all_of(llvm::zip(c.getInputs(), c.getResults()), [&](auto pair) {
        auto [in, out] = pair;
        return typeOf(in).getElementType().isF32() && typeOf(out).getElementType().isBF16() &&
               typeOf(in).getShape() == typeOf(out).getShape();
      }))
    return c.emitOpError() << "internal error: bf16_copies rounds each f32 input to a bf16 "
                              "result of its shape";
  std::string table = "copies" + std::to_string(constants++);
  body << "  // bf16 copies of " << c.getInputs().size() << " parameters\n"
       << "  const stepc_bf16_copy " << table << "[] = {\n";
  for (auto [in, out] : llvm::zip(c.getInputs(), c.getResults()))
    body << "    {" << ptr(in) << ", " << ptr(out) << ", " << typeOf(in).getNumElements()
         << "},\n";
  body << "  };\n";
  call(c.getKernelOp(), llvm::formatv("stepc_cuda_bf16_copies(ctx, {0}, {1})", table,
                                      c.getInputs().size()));
  return success();
}

LogicalResult CudaEmitter::emitOp(Operation *op) {
  if (isFusableElementwise(op) &&
      succeeded(emitElementwise(op)))
    return success();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](stepk::AttentionOp a) {
        emitAttention(a);
        return success();
      })
      .Case([&](stepk::AttentionGradOp a) {
        return emitAttentionGrad(a);
      })
      .Case([&](stepk::AdamwGroupOp g) {
        emitAdamwGroup(g);
        return success();
      })
      .Case([&](stepk::GemmOp g) {
        // The epilogue never writes over what the GEMM reads.
        SmallVector<Value> outs{g.getResult()}, ins{g.getLhs(), g.getRhs()};
        if (Value second = g.getEpilogueResult())
          outs.push_back(second);
        for (Value v : {g.getBias(), g.getAux()})
          if (v)
            ins.push_back(v);
        for (Value o : outs)
          for (Value in : ins)
            if (!disjoint(o, in))
              return LogicalResult(op->emitOpError()
                                   << "internal error: a result overlaps an input in the "
                                      "memory plan");
        return emitMatmul(op, g.getLhs(), g.getRhs(), g.getResult(), g.getTransposeA(),
                          g.getTransposeB(), g.getSharedRhs(), g.getBias(), g.getEpilogue(),
                          g.getEpilogueResult() ? g.getEpilogueResult() : g.getAux(),
                          g.getFp8(), g.getLhsScales(), g.getRhsScales());
      })
      .Case([&](stepk::CallOp c) {
        if (c.getCallee() == kSquaredNormsCall)
          return emitSquaredNorms(c);
        if (c.getCallee() == kBf16CopiesCall)
          return emitBf16Copies(c);
        std::optional<int64_t> scratch = c.getScratchBytes();
        if (scratch && failed(needScratch(op, *scratch)))
          return failure();
        // Errors name the op the call computes; a kernel that checks ids
        // records the first bad one under its check site, passed last.
        Operation *site = c.getKernelOp();
        std::string args = libraryArgs(c, scratch ? "(float *)scratch" : "");
        if (std::optional<StringRef> what = c.getIdCheck())
          args += ", " + std::to_string(checkSite(site, *what));
        call(site, "stepc_cuda_" + c.getCallee().str() + "(ctx, " + args + ")");
        return success();
      })
      .Case([&](ConstantOp c) { return emitConstant(c); })
      .Case([&](AdamwOp a) {
        return a.emitOpError() << "expects step-fuse-cuda-kernels to have grouped it into a "
                                  "stepk.adamw_group";
      })
      .Default([&](Operation *other) {
        return other->emitOpError() << "has no CUDA lowering";
      });
}

} // namespace

FailureOr<std::string> stepc::emitCudaSource(func::FuncOp step, const ModuleSummary &summary,
                                             func::FuncOp evalStep, func::FuncOp sampleStep,
                                             bool profile) {
  // The plans are step-plan-memory's (made for CUDA: the layout around
  // them).
  auto planFor = [](func::FuncOp f) -> FailureOr<MemoryPlan> {
    if (!readCudaArena(f))
      return f.emitOpError() << "has no CUDA memory plan (step-plan-memory target=cuda did "
                                "not run)";
    return readMemoryPlan(f);
  };
  FailureOr<MemoryPlan> plan = planFor(step);
  if (failed(plan))
    return failure();
  CudaEmitter emitter(step, *plan);
  emitter.setProfile(profile);
  if (failed(emitter.addForwardEntries(
          evalStep, sampleStep, planFor,
          [](func::FuncOp f, const MemoryPlan &p) -> std::unique_ptr<SourceEmitter> {
            return std::make_unique<CudaEmitter>(f, p);
          })))
    return failure();
  FailureOr<std::string> source = emitter.run(summary);
  // The report counted the launches from the IR before emission.
  if (succeeded(source) && emitter.launchCount() != cudaLaunchesPerStep(step))
    return step.emitOpError() << "internal error: the emitted step makes "
                              << emitter.launchCount() << " launches, its IR "
                              << cudaLaunchesPerStep(step) << " (cudaLaunchesPerStep)";
  return source;
}
