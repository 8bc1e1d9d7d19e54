//===- stepc.cpp - the stepc compiler driver ------------------------------===//
//
//   stepc MODEL.mlir -o step.so [--target=cuda|cpu] [--arch=sm_90a]
//         [--precision=fp32|bf16] [--report=FILE.json] [--emit=so|mlir|source]
//         [--dump-after=PASS|all] [--batch=B] [--shard=...]
//
// Pipeline: verify → [step-rebind-batch] → step-autodiff → [sharding] →
// step-optimizer → [step-schedule-collectives] → [step-mixed-precision] →
// memory plan → emit C++ (CPU) or CUDA C++ → host compiler or nvcc → step.so
// (versioned C ABI, runtime/stepc_abi.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/stepc_abi.h"
#include "stepc/Compiler/ArenaPlan.h"
#include "llvm/Config/llvm-config.h"
#include "stepc/Compiler/Emitter.h"
#include "stepc/Compiler/SpecialFiles.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Compiler/Pipeline.h"
#include "stepc/Compiler/MemoryPlot.h"
#include "stepc/Compiler/Pareto.h"
#include "stepc/Compiler/Report.h"
#include "stepc/Compiler/Toolchain.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/Support/FileUtilities.h"

#include <cmath>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;
namespace cl = llvm::cl;

/// stepc's own flags: `stepc --help` shows these, not LLVM's.
static cl::OptionCategory stepcCategory("stepc options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"), cl::Required,
                                      cl::cat(stepcCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output file (step.so, or the IR/source "
                                                     "with --emit)"),
                                       cl::value_desc("file"), cl::init("step.so"),
                                       cl::cat(stepcCategory));
// The pipeline's options as stepc's flags (PipelineOptions.def: one source
// for both).
#define STEPC_PIPELINE_OPTION(member, flag, type, byDefault, help)                                 \
  static cl::opt<type> member(flag, cl::desc(help), cl::init(byDefault), cl::cat(stepcCategory));
#include "stepc/Compiler/PipelineOptions.def"
#undef STEPC_PIPELINE_OPTION
static cl::opt<std::string> cpu("cpu", cl::desc("CPU of --target=cpu: x86-64-v3 (the portable "
                                                "default: AVX2 and FMA, any x86-64 CPU since "
                                                "2015) or native (this machine's ISA; the "
                                                "step.so runs only on CPUs with its features)"),
                                cl::init("x86-64-v3"), cl::cat(stepcCategory));
static cl::opt<std::string> arch("arch", cl::desc("GPU architecture of --target=cuda"),
                                 cl::init("sm_90a"), cl::cat(stepcCategory));
static cl::opt<std::string> reportFile("report", cl::desc("Write the compile-time report (JSON)"),
                                       cl::value_desc("file.json"), cl::cat(stepcCategory));
static cl::opt<std::string> emit("emit", cl::desc("What to produce: so (default), mlir (the "
                                                  "training step IR), source (the C++)"),
                                 cl::init("so"), cl::cat(stepcCategory));
static cl::opt<std::string> dumpAfter("dump-after", cl::desc("Print the IR after this pass "
                                                             "(any registered pass, e.g. "
                                                             "step-autodiff; or all) to stderr"),
                                      cl::cat(stepcCategory));
static cl::opt<double> linkGBps("link-gbps", cl::desc("Predict the exposed communication time "
                                                     "in the report for this per-rank bus "
                                                     "bandwidth (GB/s)"),
                                cl::init(0.0), cl::cat(stepcCategory));
static cl::opt<double> computeGflops("compute-gflops", cl::desc("Compute rate the prediction "
                                                                "assumes (GFLOP/s)"),
                                     cl::init(100.0), cl::cat(stepcCategory));
static cl::opt<bool> cudaEmulation("cuda-emulation",
                                   cl::desc("With --target=cuda: build step.so for the host "
                                            "emulation of CUDA (every kernel on host threads; "
                                            "slow: for testing without a GPU)"),
                                   cl::init(false), cl::cat(stepcCategory));
static cl::opt<std::string> memoryPlot(
    "memory-plot",
    cl::desc("Also draw the training step's memory plan as SVG: bytes per rank at each op "
             "(arguments, live arena buffers), the planned peak, the budget, the largest "
             "buffers"),
    cl::value_desc("FILE.svg"), cl::cat(stepcCategory));
static cl::opt<std::string> reportPareto(
    "report-pareto",
    cl::desc("Also compile the step at 16 memory budgets, 25% to 100% of its planned peak "
             "without remat (--remat=auto), and write the budget -> planned peak -> executed "
             "FLOPs table to PREFIX.json and its chart to PREFIX.svg"),
    cl::value_desc("PREFIX"), cl::cat(stepcCategory));
static cl::opt<bool> profile("profile",
                              cl::desc("Time the step's kernels by kind (CPU: host clocks; "
                                       "CUDA: events on the stream, read for the steps "
                                       "stepc-run --trace records); "
                                       "the table (JSON: calls, bytes and FLOPs per step, "
                                       "seconds) is written to $STEPC_PROFILE, or stderr, "
                                       "when step.so is unloaded"),
                              cl::init(false), cl::cat(stepcCategory));

static int fail(const Twine &message) {
  llvm::errs() << "stepc: error: " << message << "\n";
  return 1;
}

/// Writes `text` to `path` ("-": stdout) through a temporary file in the
/// same directory, renamed into place: a failed write never leaves a
/// truncated file or touches the previous one.
static LogicalResult writeOutput(StringRef path, StringRef text) {
  if (path == "-") {
    llvm::outs() << text;
    return success();
  }
  // A device or pipe (/dev/null, a FIFO) is written in place: renaming over
  // it would replace it.
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status) &&
      !llvm::sys::fs::is_regular_file(status) && !llvm::sys::fs::is_directory(status)) {
    // Opened without blocking: a FIFO that no process reads fails (ENXIO)
    // instead of waiting forever; one with a reader (`--report >(jq .)`)
    // is then written as any file.
    std::string error;
    const int fd = openSpecialForWrite(path, error);
    if (fd < 0)
      return failure(fail(error));
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << text;
    os.close();
    if (os.has_error()) {
      std::string message = os.error().message();
      os.clear_error();
      return failure(fail("cannot write '" + path + "': " + message));
    }
    return success();
  }
  SmallString<256> temp;
  int fd;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%", fd, temp))
    return failure(fail("cannot write '" + path + "': " + ec.message()));
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << text;
    os.close();
    if (os.has_error()) {
      std::string message = os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(temp);
      return failure(fail("cannot write '" + path + "': " + message));
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return failure(fail("cannot write '" + path + "': " + ec.message()));
  }
  return success();
}

/// The report of a compiled module (a pipeline stage's under pp).
static FailureOr<StepReport> reportCompiled(ModuleOp module, const StepcPipelineOptions &options) {
  return reportCompiledModule(module, options, CommModel{linkGBps, computeGflops});
}

/// What step.so's metadata carries (`report`, the mesh the passes built,
/// the target: `summary`) and the emitted source of one compiled module (a
/// pipeline stage's under pp), printed as it is.
static FailureOr<std::string> emitCompiled(ModuleOp module, const StepReport &report,
                                           const CpuTarget &cpu, bool emitSource,
                                           ModuleSummary &summary) {
  summary = summarizeCompiledModule(module, report, shard, precision);
  if (target == "cpu") {
    summary.cpuIsa = cpu.isa;
    summary.cpuFeatures = cpu.features;
  }
  if (!emitSource)
    return std::string();
  FailureOr<CompiledSteps> steps = findCompiledSteps(module);
  if (failed(steps))
    return failure();
  return target == "cuda"
             ? emitCudaSource(steps->train, summary, steps->eval, steps->sample, profile)
             : emitCpuSource(steps->train, summary, steps->eval, steps->sample, profile);
}

/// 1234567 as "1,234,567".
static std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

/// One line on stderr after a step.so is written (stdout may be an output):
/// what was built and its size, from the report, and whether its compiled
/// code came from the compile cache.
static void printSummary(const std::string &reportJson, bool fromCache) {
  llvm::Expected<llvm::json::Value> report = llvm::json::parse(reportJson);
  const llvm::json::Object *r = report ? report->getAsObject() : nullptr;
  if (!report)
    llvm::consumeError(report.takeError());
  auto number = [&](llvm::StringRef key) {
    std::optional<int64_t> v = r ? r->getInteger(key) : std::nullopt;
    return v ? *v : int64_t{0};
  };
  int64_t peak = number("target_planned_peak_bytes");
  if (peak == 0)
    peak = number("planned_peak_bytes");
  std::string frozen = number("frozen_params") > 0
                           ? " (" + grouped(number("frozen_params")) + " frozen)"
                           : std::string();
  llvm::errs() << "stepc: wrote " << outputFile << " (" << (cudaEmulation ? "cuda-emulation"
                                                                         : target.getValue())
               << ", " << precision << ", " << shard << "): " << grouped(number("params"))
               << (shard == "none" ? " params" : " params per rank") << frozen << ", "
               << grouped(number("model_flops_per_step"))
               << " model FLOPs/step, planned peak "
               << llvm::formatv("{0:f1}", peak / 1e6) << " MB per rank"
               << (fromCache ? " (compiled code from the cache)" : "") << "\n";
}

/// The flags' values that need no model: said before anything is read.
static LogicalResult checkFlags() {
  if (target != "cpu" && target != "cuda")
    return failure(fail("unknown --target '" + target + "' (expected cuda or cpu)"));
  if (precision != "fp32" && precision != "bf16" && precision != "fp8")
    return failure(fail("unknown --precision '" + precision + "' (expected fp32, bf16 or fp8)"));

  if (cudaEmulation && target != "cuda")
    return failure(fail("--cuda-emulation needs --target=cuda"));
  // sm_, two or three digits and an optional a or f (sm_90a, sm_100f):
  // nvcc would reject anything else only after the whole compile.
  if (target == "cuda" && !llvm::Regex("^sm_[0-9]{2,3}[af]?$").match(arch))
    return failure(fail("bad --arch '" + arch + "' (expected an sm_XY name such as sm_90a)"));
  if (target != "cuda" && arch.getNumOccurrences())
    return failure(fail("--arch names a GPU: it needs --target=cuda"));
  if (emit != "so" && emit != "mlir" && emit != "source")
    return failure(fail("unknown --emit '" + emit + "' (expected so, mlir or source)"));
  if (!std::isfinite(linkGBps) || !std::isfinite(computeGflops) || linkGBps < 0 ||
      computeGflops <= 0)
    return failure(fail("--link-gbps must be a finite value >= 0 and --compute-gflops a finite "
                        "value > 0"));
  return success();
}

/// Each output's directory exists, no output is a directory or the model
/// itself: said now, not after the compile.
static LogicalResult checkOutputs() {
  for (const std::string *path : {&outputFile.getValue(), &reportFile.getValue(),
                                  &memoryPlot.getValue()}) {
    if (*path == "-" || path->empty())
      continue;
    if (llvm::sys::fs::is_directory(*path))
      return failure(fail("cannot write '" + *path + "': it is a directory"));
    StringRef parent = llvm::sys::path::parent_path(*path);
    if (!parent.empty() && !llvm::sys::fs::is_directory(parent))
      return failure(fail("cannot write '" + *path + "': no directory '" + parent + "'"));
  }
  // --report-pareto writes PREFIX.json and PREFIX.svg after a sweep of 16
  // compiles: a missing directory is said now.
  if (!reportPareto.empty()) {
    StringRef parent = llvm::sys::path::parent_path(reportPareto);
    if (!parent.empty() && !llvm::sys::fs::is_directory(parent))
      return failure(
          fail("cannot write '" + reportPareto + ".json': no directory '" + parent + "'"));
    // A prefix is a file name's start: "out/" would write hidden "out/.json".
    if (llvm::sys::path::filename(reportPareto).empty() ||
        llvm::sys::path::is_separator(reportPareto.back()) ||
        llvm::sys::fs::is_directory(reportPareto))
      return failure(fail("--report-pareto '" + reportPareto +
                          "' names a directory; give a file prefix such as '" +
                          (llvm::sys::path::is_separator(reportPareto.back())
                               ? reportPareto
                               : reportPareto + "/") +
                          "pareto' (PREFIX.json and PREFIX.svg are written)"));
  }
  // Never write over the model being compiled.
  bool same = false;
  if (outputFile != "-" && !llvm::sys::fs::equivalent(inputFile, outputFile, same) && same)
    return failure(
        fail("the output '" + outputFile + "' is the input model; choose another -o"));
  return success();
}

/// The pipeline's options as stepc's flags set them.
static void pipelineOptionsFromFlags(StepcPipelineOptions &options) {
#define STEPC_PIPELINE_OPTION(member, flag, type, byDefault, help) options.member = member.getValue();
#include "stepc/Compiler/PipelineOptions.def"
#undef STEPC_PIPELINE_OPTION
}

/// Flags for a sharding the step does not have are refused, not ignored
/// (a bad --shard is buildStepcPipeline's error).
static LogicalResult checkPipelineFlags() {
  std::string ignored;
  if (FailureOr<ShardSpec> spec = parseShardSpec(shard, ignored); succeeded(spec)) {
    for (const cl::Option *flag :
         std::initializer_list<const cl::Option *>{&ppStage, &ppSchedule, &ppStages})
      if (spec->pp == 1 && flag->getNumOccurrences())
        return failure(fail("--" + flag->ArgStr + " needs a pipeline (--shard=...,pp:P)"));
    if (fsdpReshard.getNumOccurrences() && spec->kind != ShardSpec::Kind::Fsdp &&
        spec->kind != ShardSpec::Kind::Hsdp)
      return failure(
          fail("--fsdp-reshard needs fsdp or hsdp sharding (--shard=fsdp:N or hsdp:RxS)"));
  }
  return success();
}

/// The model has one loss function, and the flags that depend on nothing
/// else make sense.
static LogicalResult checkModel(ModuleOp module) {
  SmallVector<func::FuncOp> losses;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(StepDialect::kLossAttrName))
      losses.push_back(f);
  if (losses.size() != 1)
    return emitError(module.getLoc())
           << "expects exactly one function marked 'step.loss', found " << losses.size();
  // `--memory-budget=` (empty, e.g. an unset shell variable) is a mistake,
  // not "no budget": the budget is a contract.
  if (memoryBudget.getNumOccurrences() && memoryBudget.empty())
    return failure(
        fail("--memory-budget is empty (expected a byte count such as 512MB or 2GiB)"));
  if (batch.getNumOccurrences() && batch < 1)
    return failure(fail("--batch must be at least 1, got " + std::to_string(batch.getValue())));
  return success();
}

/// The compiled module to what --emit asks for (step.so: every pipeline
/// stage's step, each a module nested in it), with --report and
/// --memory-plot of the stage --pp-stage shows; the exit code.
static int emitStep(ModuleOp module, const StepcPipelineOptions &options, const CpuTarget &cpu,
                    int64_t budgetBytes) {
  SmallVector<ModuleOp> stages = compiledStages(module);
  const size_t shown = stages.size() > 1 ? size_t(ppStage.getValue()) : 0;
  // Every stage's report holds every stage's planned peak (stash
  // included), as the one step.so carries them.
  std::vector<StepReport> reports;
  llvm::json::Array peaks;
  for (ModuleOp stage : stages) {
    FailureOr<StepReport> report = reportCompiled(stage, options);
    if (failed(report))
      return 1;
    peaks.push_back(report->plannedPeakBytes);
    reports.push_back(std::move(*report));
  }
  if (stages.size() > 1)
    for (StepReport &report : reports)
      report.pipeline["stage_planned_peak_bytes"] = llvm::json::Array(peaks);
  ModuleSummary summary;
  std::vector<std::string> stageSources(stages.size());
  for (size_t i = 0; i < stages.size(); ++i) {
    // --emit=mlir needs no emission (a bf16 step can be shown though the
    // CPU cannot run it); --emit=source shows one stage's.
    bool emitSource = emit == "so" || (emit == "source" && i == shown);
    ModuleSummary stageSummary;
    FailureOr<std::string> source = emitCompiled(stages[i], reports[i], cpu, emitSource,
                                                 stageSummary);
    if (failed(source))
      return 1;
    stageSources[i] = std::move(*source);
    if (i == shown)
      summary = std::move(stageSummary);
  }
  // The plot walks the step as it runs, a block function's ops per call.
  if (!memoryPlot.empty()) {
    FailureOr<CompiledSteps> steps = findCompiledSteps(stages[shown]);
    if (failed(steps))
      return 1;
    FailureOr<std::string> svg =
        memoryPlotSvg(steps->train, budgetBytes ? std::optional<int64_t>(budgetBytes) : std::nullopt);
    if (failed(svg) || failed(writeOutput(memoryPlot, *svg)))
      return 1;
  }
  if (!reportFile.empty() && failed(writeOutput(reportFile, summary.reportJson + "\n")))
    return 1;
  if (emit == "mlir") {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    os << "\n";
    return failed(writeOutput(outputFile, text)) ? 1 : 0;
  }
  if (emit == "source")
    return failed(writeOutput(outputFile, stageSources[shown])) ? 1 : 0;
  bool fromCache = false;
  if (llvm::Error err =
          target == "cpu"  ? compileCpuSharedObject(stageSources, outputFile, cpu, &fromCache)
          : cudaEmulation ? compileCudaEmulatedSharedObject(stageSources, outputFile, &fromCache)
                          : compileCudaSharedObject(stageSources, outputFile, arch.getValue(),
                                                    &fromCache))
    return fail(llvm::toString(std::move(err)));
  printSummary(summary.reportJson, fromCache);
  return 0;
}

/// The passes (--dump-after names them) and stepc's flags, parsed.
static void parseCommandLine(int argc, char **argv) {
  registerStepcPasses();
  registerStepcCompilerPasses();
  registerTransformsPasses();
  cl::HideUnrelatedOptions(stepcCategory);
  memoryBudget.setValueStr("bytes");
  cl::AddExtraVersionPrinter([](raw_ostream &os) {
    os << "stepc " << STEPC_VERSION << " (step.so ABI " << STEPC_ABI_VERSION
       << ", MLIR/LLVM " << LLVM_VERSION_STRING << ")\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "stepc: compile a model's training step\n\n"
      "Environment:\n"
      "  CXX, NVCC            the host C++ compiler (c++) and the CUDA compiler\n"
      "  STEPC_CACHE_DIR      stepc's cache (else $XDG_CACHE_HOME/stepc, else\n"
      "                       ~/.cache/stepc): steps/ holds step.so files built before,\n"
      "                       copied when the same inputs are compiled again\n"
      "  STEPC_COMPILE_CACHE  off: always run the compiler\n"
      "  STEPC_CACHE_MAX_MB   the compile cache's size (1024), least recently used\n"
      "                       evicted first\n");
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  parseCommandLine(argc, argv);
  if (failed(checkFlags()))
    return 1;
  std::string error;

  DialectRegistry registry;
  registry.insert<StepDialect, stepk::StepKDialect, func::FuncDialect, arith::ArithDialect,
                  mesh::MeshDialect>();
  MLIRContext context(registry);
  // A pipeline's stages run the passes in parallel: no dialect may load
  // lazily under them.
  context.loadAllAvailableDialects();
  // A diagnostic names its source location; a dump of the whole op (often the
  // whole model) after it helps no user.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  if (std::optional<std::string> blocking = blockingInputError(inputFile))
    return fail(*blocking);
  // Read once: a pipe (`stepc <(gen.py)`, stdin) has nothing left for a
  // second open.
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input)
    return fail(error);
  if (failed(checkOutputs()))
    return 1;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  if (failed(checkModel(*module)))
    return 1;
  // --shard is parsed once, by buildStepcPipeline; the mesh it builds is
  // what the metadata reads.
  llvm::Expected<CpuTarget> cpuTargetOf = cpuTarget(cpu);
  if (!cpuTargetOf)
    return fail(llvm::toString(cpuTargetOf.takeError()));
  if (!dumpAfter.empty() && dumpAfter != "all" && !PassInfo::lookup(dumpAfter))
    return fail("unknown --dump-after '" + dumpAfter +
                "' (expected all or a registered pass, e.g. step-autodiff; "
                "stepc-opt --help lists them)");

  // The IR passes, exactly as `stepc-opt --stepc-pipeline` runs them.
  StepcPipelineOptions options;
  pipelineOptionsFromFlags(options);
  if (failed(checkPipelineFlags()))
    return 1;
  // The sweep compiles the model as written, after the step itself has
  // compiled (so its errors are the model's, reported once, not a row).
  OwningOpRef<ModuleOp> asWritten;
  if (!reportPareto.empty())
    asWritten = module->clone();
  // parseByteSize succeeded in buildStepcPipeline.
  int64_t budgetBytes = memoryBudget.empty() ? 0 : *parseByteSize(memoryBudget);
  // Everything up to the memory plan (budget checked on it) and the block
  // functions is the pipeline; the report, the plot and the emitters read
  // the module it leaves as it is.
  PassManager pm(&context);
  if (failed(buildStepcPipeline(pm, options, [](const Twine &message) {
        fail(message);
        return failure();
      })))
    return 1;
  bool dumped = false;
  if (!dumpAfter.empty()) {
    context.disableMultithreading();
    pm.enableIRPrinting(
        [](Pass *, Operation *) { return false; },
        [&](Pass *pass, Operation *) {
          bool print = dumpAfter == "all" || pass->getArgument() == dumpAfter;
          dumped |= print;
          return print;
        },
        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
  }
  if (failed(pm.run(*module)))
    return 1;
  if (asWritten) {
    std::string json, svg;
    if (failed(sweepMemoryBudgets(*asWritten, options, json, svg)) ||
        failed(writeOutput(reportPareto + ".json", json)) ||
        failed(writeOutput(reportPareto + ".svg", svg)))
      return 1;
    asWritten = nullptr;
  }
  if (!dumpAfter.empty() && !dumped)
    llvm::errs() << "stepc: warning: --dump-after '" << dumpAfter
                 << "': the pass is not in this pipeline (stepc-opt "
                    "--dump-pass-pipeline --stepc-pipeline=... lists it)\n";
  return emitStep(*module, options, *cpuTargetOf, budgetBytes);
}
