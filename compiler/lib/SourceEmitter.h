//===- SourceEmitter.h - what the CPU and CUDA emitters share -----*- C++ -*-===//
//
// A training step becomes one C++ function over buffers at the memory
// plan's offsets. The base class owns what does not depend on the target:
// naming buffers, constant tables, the collectives (asynchronous start, wait
// before first use), the elementwise math, the ABI's metadata and the
// function around the body. A target subclass lowers each op.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_LIB_SOURCEEMITTER_H
#define STEPC_COMPILER_LIB_SOURCEEMITTER_H

#include "stepc/Compiler/Emitter.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mlir::mesh {
class AllSliceOp;
class AllToAllOp;
} // namespace mlir::mesh

namespace stepc {

mlir::RankedTensorType typeOf(mlir::Value v);

/// A C string literal of `text`.
std::string cString(llvm::StringRef text);
/// A float literal of `value` for C++ and CUDA ("1.000000e+00f"; infinities
/// and NaN as builtins, which have no literal).
std::string floatLiteral(double value);
/// An integer constant's element as stored (a mask's true is 1, not -1).
int64_t storedInteger(const llvm::APInt &value);
/// "file:line:col" of an op, for runtime error messages.
std::string where(mlir::Operation *op);

class SourceEmitter {
public:
  SourceEmitter(mlir::func::FuncOp step, const MemoryPlan &plan, llvm::StringRef target)
      : step(step), plan(plan), target(target) {}
  virtual ~SourceEmitter() = default;

  /// Emits the body and returns the source, its metadata table from
  /// `moduleSummary` (the eval entry given to setEval appended).
  mlir::FailureOr<std::string> run(const ModuleSummary &moduleSummary);

  /// A forward-only entry of a function marked step.eval_step (`entry`
  /// "eval": stepc_eval_step_v12) or step.sample_step ("sample":
  /// stepc_sample_step_v12, the same signature): source to append to its
  /// training step's, its arena and the id-check sites it numbers (1-based,
  /// after those given to continueSites).
  struct EvalFragment {
    std::string text;
    int64_t arenaBytes = 0;
    std::vector<std::string> checkSites;
    /// The logits it returns (empty: none), and the loss function's outputs
    /// (name, shape).
    std::vector<int64_t> logitsShape;
    std::vector<std::pair<std::string, std::vector<int64_t>>> outputs;
    /// Its statements of stepc_prepare_v1 (prepareCall), by call.
    std::map<std::string, std::string> prepareCalls;
  };
  mlir::FailureOr<EvalFragment> runEval(llvm::StringRef entry = "eval");
  /// Numbers this entry's check sites after `before`'s.
  void continueSites(const EvalFragment &before) { checkSites = before.checkSites; }
  /// Appends `eval` to this step's source and describes it in the metadata;
  /// this step's check sites are numbered after the eval entry's.
  void setEval(const EvalFragment &eval) {
    evalText = eval.text;
    evalArenaBytes = eval.arenaBytes;
    evalLogitsShape = eval.logitsShape;
    evalOutputs = eval.outputs;
    checkSites = eval.checkSites;
    prepareCalls.insert(eval.prepareCalls.begin(), eval.prepareCalls.end());
  }
  /// Appends the sampling entry (after setEval; its sites were numbered
  /// after the eval entry's) and its arena to the metadata.
  void setSample(const EvalFragment &sample) {
    sampleText = sample.text;
    sampleArenaBytes = sample.arenaBytes;
    checkSites = sample.checkSites;
    prepareCalls.insert(sample.prepareCalls.begin(), sample.prepareCalls.end());
  }
  /// The forward-only entries beside this step: `evalStep` (null: none),
  /// then `sampleStep` (null: none), each emitted by `make(function, plan)`
  /// over the plan `planFor` reads (setEval, setSample).
  mlir::LogicalResult addForwardEntries(
      mlir::func::FuncOp evalStep, mlir::func::FuncOp sampleStep,
      llvm::function_ref<mlir::FailureOr<MemoryPlan>(mlir::func::FuncOp)> planFor,
      llvm::function_ref<std::unique_ptr<SourceEmitter>(mlir::func::FuncOp, const MemoryPlan &)>
          make);

protected:
  // ---- Target hooks.
  /// Before the first op of `block` (the step's, or a block function's
  /// for the call being printed): decide fusions over it.
  virtual void planFusions(mlir::Block &block) {}
  /// Whether `op` needs no code of its own (its consumers compute it).
  virtual bool computedByConsumers(mlir::Operation *op) { return false; }
  /// Rejects element types the target cannot run.
  virtual mlir::LogicalResult checkTypes(mlir::Operation *op) = 0;
  /// Lowers one op (its collectives already waited for).
  virtual mlir::LogicalResult emitOp(mlir::Operation *op) = 0;
  /// Includes and helpers at the top of the file.
  virtual void prologue(llvm::raw_ostream &os) = 0;
  /// Statements at the start and end of the step function.
  virtual void stepBegin(llvm::raw_ostream &os) = 0;
  /// stepc_prepare_v1 over the prepareCalls of the module's entries (the
  /// runtime calls it once, before the first step), or nothing.
  virtual std::string prepareEntry() { return ""; }
  /// A statement of stepc_prepare_v1: `text`, a call of `op`'s that builds
  /// what it will need and runs nothing; equal statements once.
  void prepareCall(mlir::Operation *op, const std::string &text) {
    prepareCalls.try_emplace(
        text, "  STEPC_TRY(" + text + ", " +
                  cString(where(op) + ": '" + op->getName().getStringRef().str() + "'") +
                  ");\n");
  }
  /// An operand of a prepare statement: a typed pointer to no buffer.
  std::string noBuffer(mlir::Value v) {
    return "((" + cType(typeOf(v).getElementType()) + " *)stepc_no_buffer)";
  }
  /// The prepare statements of the entries emitted so far, by their call
  /// (a call repeated in many layers once, at its first site).
  std::map<std::string, std::string> prepareCalls;
  /// --profile: the statement starting the step's profile for `rank`
  /// before stepBegin's statements (`afterBegin` false) or after them.
  virtual std::string profileStart(const std::string &rank, bool afterBegin) const {
    return afterBegin ? "" : "  stepc_prof_begin(" + rank + ");\n";
  }
  /// --profile's timers (stepc_prof_begin, stepc_prof_mark): host clocks.
  virtual std::string profileTimers() { return hostProfileTimers(); }
  /// The host's timers: clocks (step 1 dropped once a second step starts);
  /// CUDA's: events on the stream, read after a recorded step.
  std::string hostProfileTimers();
  std::string cudaProfileTimers();
  /// The steps the profile's table covers: the host's leaves out step 1
  /// (it pays the arena's first touch) once a second step ran.
  virtual std::string profileSteps() const {
    return "stepc_prof_steps > 1 ? stepc_prof_steps - 1 : 1";
  }
  /// Statements of stepc_profile_trace: before it answers (`collect`: what
  /// the device timed) and when recording starts (`origin`).
  virtual std::string profileTraceCollect() const { return ""; }
  virtual std::string profileTraceOrigin() const { return ""; }
  virtual void stepEnd(llvm::raw_ostream &os, const std::string &loss,
                       const std::string &norm) = 0;
  /// Emits a fused elementwise kernel.
  virtual mlir::LogicalResult emitFused(stepk::FusedOp fused) = 0;
  /// Prints one call of the library kernel `stepc_<target>_<callee>` with
  /// `args` after the target's own leading parameters (CUDA's context), its
  /// errors at `site`.
  virtual void printCall(mlir::Operation *site, llvm::StringRef callee,
                         const std::string &args) = 0;
  /// The declaration of the kernel `call` calls, from the IR's types
  /// (libraryInputTypes, libraryResultTypes) and the target's conventions.
  virtual std::string libraryDeclaration(stepk::CallOp call) = 0;
  /// A statement copying `bytes` of device memory at src to host memory;
  /// `what` names the copy in its error ("logits", "output", "metric").
  virtual std::string copyToHost(const std::string &dst, const std::string &src, int64_t bytes,
                                 const char *what) = 0;
  /// A statement copying `bytes` from src to dst (all_reduce's input).
  virtual std::string copyStatement(const std::string &dst, const std::string &src,
                                    int64_t bytes) = 0;
  /// C type of an element type.
  virtual std::string cType(mlir::Type element);
  /// The C expression of the module info's target name.
  virtual std::string targetExpression() { return cString(target); }
  /// Bytes of the whole arena (the plan's, plus what the target adds).
  virtual int64_t arenaBytes() { return plan.arenaBytes; }
  // ---- Shared helpers.
  /// The C expression of a value's storage, typed: its local in the step
  /// function, or (in a block run) a slot of the run's pointer table.
  std::string ptr(mlir::Value v);
  /// The same for storage of element type `element` in an argument
  /// (`argument` >= 0) or an arena buffer.
  std::string ptrTo(mlir::Type element, int64_t argument, int64_t buffer);
  /// The C string literal of an error site (`where: 'op'`), or in a block
  /// run the entry of the run's site table.
  std::string site(llvm::StringRef text);
  /// `v`'s pointer for a kernel that moves 4-byte words (box copies,
  /// broadcast, transpose, all_gather): i32 ids and i1 masks as float *.
  std::string words(mlir::Value v);
  /// A static array of int64 (int) values; returns its name.
  std::string array(llvm::ArrayRef<int64_t> values);
  std::string intArray(llvm::ArrayRef<int> values);
  /// Static arrays of a value's shape and of `rank` zeros.
  std::string shapeArray(mlir::Value v) { return array(typeOf(v).getShape()); }
  std::string zerosArray(int64_t rank) { return array(llvm::SmallVector<int64_t>(rank, 0)); }
  /// The arguments of a box copy (the kernels' copy_box): the box of
  /// `box`'s shape from `src` at `srcAt` to `dst` at `dstAt` (empty: zeros).
  std::string boxCopyArgs(mlir::Value src, llvm::ArrayRef<int64_t> srcAt, mlir::Value dst,
                          llvm::ArrayRef<int64_t> dstAt, mlir::Value box);
  /// Where each input of a concat starts in its result.
  static llvm::SmallVector<llvm::SmallVector<int64_t>> concatOffsets(mlir::Operation *concat);
  /// The last dim, and the rows before it.
  static int64_t lastDim(mlir::Value v) { return typeOf(v).getShape().back(); }
  static int64_t rows(mlir::Value v) { return typeOf(v).getNumElements() / lastDim(v); }
  /// "return <failure with text>;" for a plain message.
  std::string failWith(const std::string &text) {
    return "return stepc_fail_text(error, error_len, " + cString(text) + ");";
  }
  /// The float expression of an elementwise op given its operands' float
  /// expressions (x0, x1), or nullopt if it is not one.
  static std::optional<std::string>
  elementwiseExpr(mlir::Operation *op, const std::function<std::string(unsigned)> &in);
  /// A fused kernel's per-element statements ("const float vK = ...;"),
  /// reading input k with load(k) and rounding a result of element type t
  /// with round(t, expr); and the register holding each result.
  struct GroupCode {
    std::string statements;
    llvm::SmallVector<std::string> outputRegisters;
  };
  /// `special`, where given, may replace an op's expression (the CPU's
  /// table lookups); nullopt keeps elementwiseExpr's.
  using SpecialExpr = std::function<std::optional<std::string>(
      mlir::Operation *, const std::function<std::string(unsigned)> &)>;
  static GroupCode groupCode(stepk::FusedOp fused,
                             const std::function<std::string(unsigned)> &load,
                             const std::function<std::string(mlir::Type, std::string)> &round,
                             const SpecialExpr &special = nullptr);
  /// The arguments of a library call both targets share: inputs, scalars,
  /// `scratch` (when the kernel takes one and the target passes it),
  /// results.
  std::string libraryArgs(stepk::CallOp call, const std::string &scratch = "");
  /// The parameter types of `call`'s inputs and scalars, then of its
  /// results, as the IR states them (an i32 scalar is an int, an i64 one an
  /// int64_t, a float a double; i64 and i32 arrays are pointers).
  llvm::SmallVector<std::string> libraryInputTypes(stepk::CallOp call);
  llvm::SmallVector<std::string> libraryResultTypes(stepk::CallOp call);
  /// Every library kernel the module's steps call, declared once from the
  /// IR (libraryDeclaration): printed after the kernel header, a signature
  /// the header states differently is a compile error (C functions do not
  /// overload), not a call through the wrong parameters.
  std::string libraryDeclarations();
  /// Lowers an op whose library calls are the same on every target (SGD and
  /// Lion updates, broadcast and the box copies of concat, pad and slice):
  /// their arguments stated once; nullopt if `op` is not one.
  std::optional<mlir::LogicalResult> emitSharedCall(mlir::Operation *op);
  /// Lowers a mesh collective (start, request); nullopt if `op` is not one.
  std::optional<mlir::LogicalResult> emitCollective(mlir::Operation *op);
  /// Starts collective `op` (a table entry of `kind`) through the runtime's
  /// `name` on the mesh axes `axes` (a bit mask), `count` elements per rank.
  void startCollective(mlir::Operation *op, llvm::StringRef kind, llvm::StringRef name, int axes,
                       int64_t count, mlir::Value result, const std::string &args);
  /// A pipeline transfer: to or from the rank at index `peer` along one
  /// mesh axis (the others this rank's), matched by its tag.
  mlir::LogicalResult emitTransfer(mlir::Operation *op, llvm::StringRef name,
                                   llvm::ArrayRef<int16_t> axes, llvm::ArrayRef<int64_t> peer,
                                   mlir::Value buffer, mlir::Value result);
  mlir::LogicalResult emitAllToAll(mlir::mesh::AllToAllOp a);
  mlir::LogicalResult emitAllSlice(mlir::mesh::AllSliceOp s);
  /// Runs printed so far; the call being printed (null: none).
  int64_t runs = 0;
  mlir::func::CallOp boundCall;
  /// Where the step reads `v` from: the call's operand for an argument of
  /// the block function being printed, else `v`.
  mlir::Value asStepReads(mlir::Value v);
  /// Whether two values' storage is disjoint (a kernel may write one while
  /// reading the other).
  bool disjoint(mlir::Value a, mlir::Value b);
  /// Extra fields of the module info (check sites).
  std::vector<std::string> checkSites;
  /// The target's locals a block's function takes too (", type name..."),
  /// and the step function passes (", name...").
  virtual std::string blockParameters() const { return ""; }
  virtual std::string blockArguments() const { return ""; }

  mlir::func::FuncOp step;
  /// The step's plan; while a call is printed, its callee's values too.
  MemoryPlan plan;
  std::string target;
  std::string preText, bodyText;
  llvm::raw_string_ostream pre{preText}, body{bodyText};
  int constants = 0;
  /// Whether this is the forward-only entry (runEval).
  bool evalEntry = false;
  /// Whether the training step times its kernels by kind (stepc --profile).
  bool profile = false;

public:
  void setProfile(bool on) { profile = on; }

protected:
  ModuleSummary summary;

private:
  /// Lowers every op of the body into `body` (and `pre`), each call of a
  /// block function as a call of its C function.
  mlir::LogicalResult emitBody();
  /// Lowers one op, the next in the order the step runs them.
  mlir::LogicalResult emitOpInOrder(mlir::Operation &op);
  /// Lowers a call of block function `callee`: its ops with the call's
  /// plan, printed into the callee's C function the first time, and a call
  /// of it with this call's pointer table.
  mlir::LogicalResult emitCall(mlir::func::CallOp call, mlir::func::FuncOp callee);
  /// Declares the argument and arena buffers the step function names.
  void bufferNames(llvm::raw_ostream &os);
  void waitFor(mlir::Operation *op);
  /// Starts request `number` of the step's collectives; its C expression.
  int64_t startRequest(mlir::Value result);
  std::string request(int64_t number);
  std::string metadata();
  /// The argument table (as text step.so decodes once) and its shapes.
  std::string argumentTable();
  std::string splitFields(mlir::DictionaryAttr tpShard, int segmentTable);
  /// A block run being printed (a call of a block function): its code goes
  /// into that function's C function, the step gets a call. Pointers
  /// are slots of the run's table (one per address, in order of use), error
  /// sites entries of its site table.
  struct RunScope {
    // (No member initializers: clang cannot default-construct a nested
    // struct that has them inside std::optional before the class is done.)
    int64_t run, function;
    size_t begin;  // where its code starts in bodyText
    std::string block, firstLocation, lastLocation;
    int kernels;
    std::map<std::string, unsigned> slotOf;
    /// Per slot: where it points (-argument - 1, an arena offset, or a
    /// request number), or a value of the call's (a transfer's tag: runs
    /// of one block for different micro-batches share the function), and
    /// which of these it is.
    llvm::SmallVector<int64_t> at;
    enum class Slot { Pointer, Request, Value };
    llvm::SmallVector<Slot> kind;
    llvm::SmallVector<std::string> sites;
  };
  std::optional<RunScope> runScope;
  unsigned slot(const std::string &address, int64_t at, RunScope::Slot kind);
  /// Starts printing run `run` (of `block`), or ends the one being printed:
  /// its code becomes its function's (checked equal to what earlier runs of
  /// that function printed: a run that differs is an internal error) and
  /// the step calls it.
  void beginRun(int64_t function, const std::string &block);
  mlir::LogicalResult endRun();
  /// Requests a run started and nothing waited for (at the step's end).
  llvm::SmallVector<int64_t> unreadInRuns;
  /// The op being printed, and the next, in the order the step runs them
  /// (a block function's ops once per call): the plan's op indices.
  int64_t flatIndex = 0, nextFlatIndex = 0;
  /// The functions printed so far, as text, and per IR block function the
  /// code its runs print.
  std::string functionsText;
  std::map<int64_t, std::string> functionCode;
  /// Arguments and buffers the step function names (aN, bN).
  llvm::DenseSet<int64_t> usedArgs, usedBuffers;
  /// A location for an op's comment (none inside a run: it is at the call).
  std::string location(mlir::Operation *op);
  /// Collective requests started so far; error-site tables of runs so far.
  int64_t requests = 0;
  int siteTables = 0;
  /// The failure message of each request's start and of its wait.
  std::vector<std::string> startSites, waitSites;
  /// Constant tables by contents (equal tables share one name, so equal
  /// blocks' code is equal text).
  std::map<std::string, std::string> tableNames;
  /// The kernel kinds the profile times, with what a step does of each.
  struct ProfileKind {
    std::string name;
    int64_t calls = 0, bytes = 0, flops = 0;
  };
  std::vector<ProfileKind> profileKinds;
  std::map<std::string, int> profileKindOf;
  /// Each timed kernel in execution order (stepc_trace_site): its kind,
  /// op, location, FLOPs and bytes.
  struct ProfileSite {
    int kind;
    std::string op, location;
    int64_t flops, bytes, liveBytes;
    std::string block;
  };
  std::vector<ProfileSite> profileSites;
  /// The plan's live arena bytes at each op of the step (filled on first use).
  std::vector<int64_t> liveByOp;
  /// The kind `op` is timed as, counting its call, bytes and FLOPs (and
  /// adding its site).
  int profileKind(mlir::Operation *op);
  /// The timers and the table the profile writes at unload.
  std::string profileSupport();

  std::string table(const std::string &type, const std::string &contents);
  /// Collective results not yet waited for, and their request numbers.
  llvm::DenseMap<mlir::Value, int64_t> pending;
  std::string evalText, sampleText;
  int64_t sampleArenaBytes = 0;
  int64_t evalArenaBytes = 0;
  std::vector<int64_t> evalLogitsShape;
  std::vector<std::pair<std::string, std::vector<int64_t>>> evalOutputs;
  /// The training step's metrics (name, shape), in result order.
  std::vector<std::pair<std::string, std::vector<int64_t>>> trainMetrics;
  /// (kind, axes mask, floats per rank) of each collective, in order.
  llvm::SmallVector<std::tuple<std::string, int, int64_t>> collectives;
};

} // namespace stepc

#endif // STEPC_COMPILER_LIB_SOURCEEMITTER_H
