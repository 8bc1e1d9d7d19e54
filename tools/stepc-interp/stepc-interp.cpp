//===- stepc-interp.cpp - run step functions on the reference interpreter -===//
//
//   stepc-interp MODEL.mlir [--grad | --train-step] [--inputs=DIR]
//       [--output=DIR] [--seed=S] [--f64] [--lr=X] [--step=N] [--steps=N]
//   stepc-interp MODEL.mlir --grad-check [--tolerance=T] [--samples=K]
//
// Arguments come from DIR/<name>.npy (parameter, input, state or
// hyperparameter name), else are drawn: parameters from their initialiser,
// integer inputs uniformly below the bound their uses imply, float inputs
// from N(0, 1), optimizer state as zeros, lr and step from the flags.
//
//===----------------------------------------------------------------------===//

#include "stepc/Compiler/SpecialFiles.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Compiler/Pipeline.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"
#include "stepc/Dialect/Step/Interpreter/Interpreter.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <cmath>
#include <random>

#include <unistd.h>

using namespace mlir;
using namespace stepc;
using namespace stepc::interp;
using namespace stepc::step;
namespace cl = llvm::cl;

/// stepc-interp's own flags: `--help` shows these, not LLVM's.
static cl::OptionCategory interpCategory("stepc-interp options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"), cl::Required,
                                      cl::cat(interpCategory));
static cl::opt<std::string> functionName("function", cl::desc("Function to run (default: "
                                         "the loss, gradient or train step function)"),
                                         cl::cat(interpCategory));
static cl::opt<bool> gradMode("grad", cl::desc("Run step-autodiff and evaluate the gradient function"),
                              cl::cat(interpCategory));
static cl::opt<bool> trainMode("train-step", cl::desc("Run step-autodiff and step-optimizer and "
                                                      "evaluate the training step"),
                               cl::cat(interpCategory));
static cl::opt<bool> gradCheck("grad-check", cl::desc("Compare autodiff gradients with central "
                                                      "finite differences in f64"),
                               cl::cat(interpCategory));
static cl::opt<std::string> inputsDir("inputs", cl::desc("Directory of <argument name>.npy files"),
                                      cl::cat(interpCategory));
static cl::opt<std::string> outputDir("output", cl::desc("Directory for <result name>.npy files"),
                                      cl::cat(interpCategory));
static cl::opt<unsigned> seed("seed", cl::desc("Seed for drawn arguments"), cl::init(0),
                              cl::cat(interpCategory));
static cl::opt<bool> exactF64("f64", cl::desc("Evaluate everything in double, unrounded"),
                              cl::cat(interpCategory));
static cl::opt<double> lrFlag("lr", cl::desc("Learning rate argument"), cl::init(1e-3),
                              cl::cat(interpCategory));
static cl::opt<unsigned> stepFlag("step", cl::desc("Step-number argument (from 1)"), cl::init(1),
                                  cl::cat(interpCategory));
static cl::opt<unsigned> steps("steps", cl::desc("Training steps to run, feeding parameters and "
                                                 "state back (with --train-step)"), cl::init(1),
                               cl::cat(interpCategory));
static cl::opt<double> tolerance("tolerance", cl::desc("Largest relative error --grad-check accepts"),
                                 cl::init(1e-6), cl::cat(interpCategory));
static cl::opt<unsigned> samples("samples", cl::desc("Elements checked per parameter by "
                                                     "--grad-check (all if fewer)"), cl::init(64),
                                 cl::cat(interpCategory));
static cl::opt<double> jitter("jitter", cl::desc("Add N(0, jitter^2) to drawn parameters"),
                              cl::init(0.0), cl::cat(interpCategory));
static cl::opt<std::string> precision("precision",
                                      cl::desc("With --train-step: fp32, or bf16 "
                                               "(step-mixed-precision, as stepc --precision)"),
                                      cl::init("fp32"), cl::cat(interpCategory));
static cl::opt<std::string> optimizer("optimizer",
                                      cl::desc("The update: adamw, adam, sgd, lion or muon (as stepc)"),
                                      cl::init("adamw"));
static cl::opt<std::string> optimizerOptions(
    "optimizer-options", cl::desc("Options for step-optimizer, e.g. 'beta2=0.99 weight-decay=0'"),
    cl::init(""), cl::cat(interpCategory));

namespace {

/// The name an argument is looked up by in --inputs.
std::string argumentName(func::FuncOp f, unsigned i) {
  if (auto p = f.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName))
    return p.getName().str();
  if (auto s = f.getArgAttrOfType<StateAttr>(i, StepDialect::kStateAttrName))
    return s.getQualifiedName();
  if (auto h = f.getArgAttrOfType<HyperAttr>(i, StepDialect::kHyperAttrName))
    return stringifyHyper(h.getValue()).str();
  if (auto s = f.getArgAttrOfType<StringAttr>(i, StepDialect::kInputAttrName))
    return s.getValue().str();
  return "arg" + std::to_string(i);
}

std::string resultName(func::FuncOp f, unsigned i) {
  if (ResultAttr r = getResultRole(f, i))
    return r.getQualifiedName();
  return "result" + std::to_string(i);
}

/// The exclusive upper bound of an integer argument implied by its uses
/// (embedding table rows, cross_entropy classes), or 0 if none.
int64_t idBound(Value arg) {
  int64_t bound = 0;
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    if (auto e = dyn_cast<EmbeddingOp>(user))
      bound = std::max(bound, e.getTable().getType().getDimSize(0));
    if (auto c = dyn_cast<CrossEntropyOp>(user))
      bound = std::max(bound, c.getLogits().getType().getShape().back());
    // A lowered step: the library call that checks these ids says.
    auto call = dyn_cast<stepk::CallOp>(user);
    if (call && call.getIdCheck() && use.getOperandNumber() == *call.getIdOperand())
      bound = std::max(bound, static_cast<int64_t>(*call.getIdBound()));
  }
  return bound;
}

/// Whether `f` can run here: every argument and result a static tensor
/// (what the interpreter holds), and no tensor, nor the arguments together,
/// larger than this machine's memory (values are held as f64). An error at
/// the culprit otherwise, before anything is allocated.
LogicalResult checkRunnable(func::FuncOp f) {
  for (auto [i, type] : llvm::enumerate(f.getArgumentTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape())
      return emitError(f.getArgument(i).getLoc())
             << "argument #" << i << " ('" << argumentName(f, i) << "') of @" << f.getSymName()
             << " is " << type << ": stepc-interp runs functions of static tensors";
  }
  for (auto [i, type] : llvm::enumerate(f.getResultTypes()))
    if (auto tensor = dyn_cast<RankedTensorType>(type); !tensor || !tensor.hasStaticShape())
      return f.emitOpError() << "result #" << i << " is " << type
                             << ": stepc-interp runs functions of static tensors";
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  auto bytes = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && tensor.hasStaticShape() ? 8.0 * double(tensor.getNumElements()) : 0.0;
  };
  auto tooLarge = [&](Location loc, double need, StringRef what) {
    return emitError(loc) << what << " needs " << llvm::formatv("{0:e2}", need)
                          << " bytes in the f64 reference interpreter, more than this machine's "
                          << llvm::formatv("{0:e2}", memory) << " bytes of memory";
  };
  double arguments = 0;
  for (Type type : f.getArgumentTypes())
    arguments += bytes(type);
  if (arguments > memory)
    return tooLarge(f.getLoc(), arguments, "@" + f.getSymName().str() + "'s arguments together");
  WalkResult walk = f.walk([&](Operation *op) {
    for (Value r : op->getResults())
      if (bytes(r.getType()) > memory) {
        (void)tooLarge(op->getLoc(), bytes(r.getType()), "a result of this op");
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

FailureOr<std::vector<Tensor>> prepareArguments(func::FuncOp f) {
  if (failed(checkRunnable(f)))
    return failure();
  std::vector<Tensor> args;
  for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i) {
    auto type = cast<RankedTensorType>(f.getArgumentTypes()[i]);
    std::string name = argumentName(f, i);
    std::mt19937_64 rng(seed * 1000003ull + i);
    if (!inputsDir.empty()) {
      SmallString<256> path(inputsDir);
      llvm::sys::path::append(path, name + ".npy");
      if (llvm::sys::fs::exists(path)) {
        std::string error;
        FailureOr<Tensor> t = readNpy(std::string(path), error);
        if (failed(t))
          return emitError(f.getLoc()) << error;
        if (ArrayRef<int64_t>(t->shape) != type.getShape())
          return emitError(f.getArgument(i).getLoc())
                 << "'" << path << "' does not have the shape of " << type;
        args.push_back(std::move(*t));
        continue;
      }
    }
    Tensor t = Tensor::zerosLike(type);
    if (auto p = f.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName)) {
      std::normal_distribution<double> normal(0.0, p.getEffectiveStd());
      std::normal_distribution<double> noise(0.0, 1.0);
      for (double &x : t.data) {
        x = p.getInit() == InitKind::Ones ? 1.0
            : p.getInit() == InitKind::Zeros ? 0.0
                                             : normal(rng);
        x += jitter * noise(rng);
      }
    } else if (auto hyper = f.getArgAttrOfType<HyperAttr>(i, StepDialect::kHyperAttrName)) {
      t.data[0] = hyper.getValue() == Hyper::Lr     ? lrFlag
                  : hyper.getValue() == Hyper::Step ? static_cast<double>(stepFlag)
                                                    : static_cast<double>(seed);
    } else if (f.getArgAttr(i, StepDialect::kStateAttrName)) {
      // Optimizer state starts at zero.
    } else if (isa<IntegerType>(type.getElementType())) {
      int64_t bound = idBound(f.getArgument(i));
      if (bound == 0)
        return emitError(f.getArgument(i).getLoc())
               << "cannot draw integer argument '" << name
               << "': no use implies a bound; give " << name << ".npy in --inputs";
      std::uniform_int_distribution<int64_t> uniform(0, bound - 1);
      for (double &x : t.data)
        x = static_cast<double>(uniform(rng));
    } else {
      std::normal_distribution<double> normal(0.0, 1.0);
      for (double &x : t.data)
        x = normal(rng);
    }
    args.push_back(std::move(t));
  }
  return args;
}

double l2(const Tensor &t) {
  double s = 0;
  for (double x : t.data)
    s += x * x;
  return std::sqrt(s);
}

/// Finds the function marked `attr` (the first), or by --function.
func::FuncOp findFunction(ModuleOp module, StringRef attr) {
  for (auto f : module.getOps<func::FuncOp>())
    if (functionName.empty() ? f->hasAttr(attr) : f.getSymName() == functionName)
      return f;
  return {};
}

/// Writes each result as --output/<result name>.npy and, after a training
/// step, each frozen parameter (`args`, unchanged) as param.<name>.npy, as
/// stepc-run --save-npy does.
LogicalResult writeResults(func::FuncOp f, ArrayRef<Tensor> results,
                           ArrayRef<Tensor> args = {}) {
  if (outputDir.empty())
    return success();
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    return emitError(f.getLoc()) << "cannot create '" << outputDir << "': " << ec.message();
  auto write = [&](const std::string &name, const Tensor &t, Type type) -> LogicalResult {
    SmallString<256> path(outputDir);
    llvm::sys::path::append(path, name + ".npy");
    std::string error;
    if (failed(writeNpy(std::string(path), t, cast<RankedTensorType>(type).getElementType(),
                        exactF64, error)))
      return emitError(f.getLoc()) << error;
    return success();
  };
  for (auto [i, t] : llvm::enumerate(results))
    if (failed(write(resultName(f, i), t, f.getResultTypes()[i])))
      return failure();
  for (auto [i, t] : llvm::enumerate(args)) {
    auto p = f.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName);
    if (p && !p.isTrained() && failed(write("param." + p.getName().str(), t, f.getArgumentTypes()[i])))
      return failure();
  }
  return success();
}

void printSummary(func::FuncOp f, ArrayRef<Tensor> results, int64_t stepIndex) {
  llvm::json::OStream json(llvm::outs());
  json.object([&] {
    json.attribute("function", f.getSymName());
    if (stepIndex >= 0)
      json.attribute("step", stepIndex);
    for (auto [i, t] : llvm::enumerate(results)) {
      if (t.numel() == 1)
        json.attribute(resultName(f, i), t.data[0]);
      else if (stepIndex < 0)
        json.attribute(resultName(f, i) + ".l2", l2(t));
    }
  });
  llvm::outs() << "\n";
}

/// Runs the training step --steps times, feeding `param.X`, `exp_avg.X`,
/// `exp_avg_sq.X` results back into the arguments of the same names.
LogicalResult train(func::FuncOp f, const Interpreter &interp, std::vector<Tensor> args) {
  llvm::StringMap<unsigned> argIndex;
  for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i)
    argIndex[argumentName(f, i)] = i;
  FailureOr<std::vector<Tensor>> results;
  for (unsigned s = 0; s < steps; ++s) {
    results = interp.run(f, args);
    if (failed(results))
      return failure();
    printSummary(f, *results, s + 1);
    for (auto [i, t] : llvm::enumerate(*results)) {
      // An updated parameter or moment replaces its argument.
      ResultAttr role = getResultRole(f, i);
      if (!role || (role.getRole() != Role::Param && role.getRole() != Role::Moment))
        continue;
      auto it = argIndex.find(role.getRole() == Role::Param ? role.getName().str()
                                                            : role.getQualifiedName());
      if (it != argIndex.end())
        args[it->second] = t;
    }
    for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i)
      if (auto hyper = f.getArgAttrOfType<HyperAttr>(i, StepDialect::kHyperAttrName);
          hyper && hyper.getValue() == Hyper::Step)
        args[i].data[0] += 1.0;
  }
  return writeResults(f, *results, args);
}

/// Fourth-order central differences against the gradient function, in f64:
/// f' ≈ (-f(x+2h) + 8f(x+h) - 8f(x-h) + f(x-2h)) / 12h, whose truncation
/// error O(h⁴) allows an h large enough to keep rounding error near 1e-13.
/// The error of a parameter is max |ad - fd| over the checked elements,
/// relative to the largest of them in magnitude.
FailureOr<double> checkFunction(func::FuncOp loss, func::FuncOp grad,
                                llvm::json::OStream &json, int64_t &checked) {
  Interpreter interp(/*exactF64=*/true);
  FailureOr<std::vector<Tensor>> args = prepareArguments(loss);
  if (failed(args))
    return failure();
  FailureOr<std::vector<Tensor>> analytic = interp.run(grad, *args);
  if (failed(analytic))
    return failure();
  const double h = 1e-3;
  double worst = 0;
  unsigned gradIndex = 1;
  for (unsigned i = 0, e = loss.getNumArguments(); i < e; ++i) {
    ParamAttr p = getTrainedParam(loss, i); // a frozen one has no gradient
    if (!p)
      continue;
    const Tensor &ad = (*analytic)[gradIndex++];
    Tensor &x = (*args)[i];
    std::vector<int64_t> elements(x.numel());
    for (int64_t k = 0; k < x.numel(); ++k)
      elements[k] = k;
    std::mt19937_64 rng(seed + i);
    if (elements.size() > samples) {
      std::shuffle(elements.begin(), elements.end(), rng);
      elements.resize(samples);
    }
    double maxDiff = 0, scale = 0;
    for (int64_t k : elements) {
      double saved = x.data[k], f[4];
      const double offsets[4] = {2 * h, h, -h, -2 * h};
      for (int s = 0; s < 4; ++s) {
        x.data[k] = saved + offsets[s];
        FailureOr<std::vector<Tensor>> value = interp.run(loss, *args);
        if (failed(value))
          return failure();
        f[s] = (*value)[0].data[0];
      }
      x.data[k] = saved;
      double fd = (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h);
      maxDiff = std::max(maxDiff, std::fabs(fd - ad.data[k]));
      scale = std::max({scale, std::fabs(fd), std::fabs(ad.data[k])});
      ++checked;
    }
    double rel = scale > 0 ? maxDiff / scale : maxDiff;
    worst = std::max(worst, rel);
    json.attribute((loss.getSymName() + ":" + p.getName()).str(), rel);
  }
  return worst;
}

/// Checks every loss function of the module against its gradient function
/// (the one step-autodiff marked as differentiating it).
LogicalResult checkGradients(ModuleOp module) {
  llvm::StringMap<func::FuncOp> gradientOf;
  for (auto f : module.getOps<func::FuncOp>())
    if (auto loss = f->getAttrOfType<FlatSymbolRefAttr>(StepDialect::kGradientAttrName))
      gradientOf[loss.getValue()] = f;
  double worst = 0;
  int64_t checked = 0;
  llvm::json::OStream json(llvm::outs(), 2);
  json.objectBegin();
  json.attributeBegin("params");
  json.objectBegin();
  for (auto loss : module.getOps<func::FuncOp>()) {
    if (!loss->hasAttr(StepDialect::kLossAttrName))
      continue;
    func::FuncOp grad = gradientOf.lookup(loss.getSymName());
    if (!grad)
      return loss.emitOpError() << "has no gradient function";
    FailureOr<double> rel = checkFunction(loss, grad, json, checked);
    if (failed(rel))
      return failure();
    worst = std::max(worst, *rel);
  }
  json.objectEnd();
  json.attributeEnd();
  json.attribute("checked_elements", checked);
  json.attribute("tolerance", tolerance.getValue());
  json.attribute("max_rel_err", worst);
  json.objectEnd();
  llvm::outs() << "\n";
  if (!(worst <= tolerance))
    return emitError(module.getLoc()) << "gradient check failed: relative error " << worst
                              << " exceeds " << tolerance.getValue();
  return success();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(interpCategory);
  cl::ParseCommandLineOptions(argc, argv, "stepc reference interpreter\n");

  DialectRegistry registry;
  registry.insert<StepDialect, stepk::StepKDialect, func::FuncDialect, arith::ArithDialect>();
  MLIRContext context(registry);
  // A diagnostic names its source location; a dump of the whole op (often the
  // whole model) after it helps no user.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  if (std::optional<std::string> blocking = blockingInputError(inputFile)) {
    llvm::errs() << "stepc-interp: " << *blocking << "\n";
    return 1;
  }
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(inputFile, sourceMgr, &context);
  if (!module)
    return 1;

  if (precision != "fp32" && precision != "bf16" && precision != "fp8") {
    llvm::errs() << "stepc-interp: unknown --precision '" << precision << "'\n";
    return 1;
  }
  if (steps < 1) {
    llvm::errs() << "stepc-interp: --steps must be at least 1\n";
    return 1;
  }
  // A check of no element would pass whatever the gradients are.
  if (gradCheck && samples < 1) {
    llvm::errs() << "stepc-interp: --samples must be at least 1 (elements --grad-check "
                    "compares per parameter)\n";
    return 1;
  }
  if (steps.getNumOccurrences() && !trainMode) {
    llvm::errs() << "stepc-interp: --steps runs training steps: give --train-step\n";
    return 1;
  }
  if (!std::isfinite(lrFlag) || lrFlag < 0 || !std::isfinite(jitter) || jitter < 0 ||
      !std::isfinite(tolerance) || tolerance <= 0) {
    llvm::errs() << "stepc-interp: --lr and --jitter must be finite and >= 0, --tolerance "
                    "finite and > 0\n";
    return 1;
  }
  if (!inputsDir.empty() && !llvm::sys::fs::is_directory(inputsDir)) {
    llvm::errs() << "stepc-interp: --inputs '" << inputsDir << "' is not a directory\n";
    return 1;
  }
  PassManager pm(&context);
  if (gradMode || trainMode || gradCheck) {
    // The passes stepc runs, up to the gradient or the whole training step.
    StepcPipelineOptions options;
    options.until = trainMode ? "train-step" : "autodiff";
    options.precision = precision.getValue();
    options.optimizer = optimizer.getValue();
    options.optimizerOptions = optimizerOptions.getValue();
    if (failed(buildStepcPipeline(pm, options, [](const Twine &message) {
          llvm::errs() << "stepc-interp: " << message << "\n";
          return failure();
        })))
      return 1;
    // bf16 GEMMs whose sums only f32 reads write f32, as the CPU kernels do
    // (step-fold-widening-gemms), so the interpreter rounds where they do.
    if (trainMode && precision != "fp32")
      pm.addPass(createStepFoldWideningGemms());
  }
  if (failed(pm.run(*module)))
    return 1;

  if (gradCheck)
    return failed(checkGradients(*module)) ? 1 : 0;

  StringRef marker = trainMode  ? StepDialect::kTrainStepAttrName
                     : gradMode ? StepDialect::kGradientAttrName
                                : StepDialect::kLossAttrName;
  func::FuncOp f = findFunction(*module, marker);
  if (!f) {
    emitError(module->getLoc()) << "no function "
                        << (functionName.empty() ? "marked '" + marker.str() + "'"
                                                 : "named '" + functionName + "'");
    return 1;
  }
  Interpreter interp(exactF64);
  FailureOr<std::vector<Tensor>> args = prepareArguments(f);
  if (failed(args))
    return 1;
  if (trainMode)
    return failed(train(f, interp, std::move(*args))) ? 1 : 0;
  FailureOr<std::vector<Tensor>> results = interp.run(f, *args);
  if (failed(results))
    return 1;
  printSummary(f, *results, -1);
  return failed(writeResults(f, *results)) ? 1 : 0;
}
