//===- EmitterProfile.cpp - per-kind kernel timers (stepc --profile) -----===//
//
// Each op's text ends with a mark charging the time since the previous one
// to its kind; the calls, bytes and FLOPs of each kind per step are known
// here, the seconds at run time, and the table is written at unload. The
// marks also number the step's kernels in execution order (its sites), so
// a runtime that asks (stepc_profile_trace_v2) gets each kernel's interval:
// the trace of stepc-run --trace. The mark's text names only the kind, so
// blocks outlined into functions stay equal.
//
//===----------------------------------------------------------------------===//

#include "SourceEmitter.h"
#include "StepInOrder.h"

#include "stepc/Analysis/FlopCount.h"
#include "stepc/Compiler/Report.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/CollectiveSchedule.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

/// A fused loop's kind names what it computes: "fused add+convert" (its
/// members' ops in order, reshapes aside, a repeat once), so the table
/// tells a GELU loop from a residual add.
static std::string fusedKind(stepk::FusedOp fused) {
  std::string kind = "fused ";
  StringRef last;
  for (Operation &member : fused.getBody().front().without_terminator()) {
    StringRef op = member.getName().stripDialect();
    if (isa<ReshapeOp>(member) || op == last)
      continue;
    kind += (last.empty() ? "" : "+") + op.str();
    last = op;
  }
  return kind;
}

std::string stepc::kernelKind(Operation *op) {
  Operation *named = isa<stepk::CallOp>(op) ? cast<stepk::CallOp>(op).getKernelOp() : op;
  // fp8's rounding pass is named by its rounding, also where it applies the
  // MLP's GELU to what it reads first (its body's first op).
  // Its packing pass (the fp8 GEMMs' operands written by the rounding
  // pass itself) is the GEMMs' packing.
  if (auto call = dyn_cast<stepk::CallOp>(op);
      call && call.getCallee().starts_with("quantize_fp8_rows_columns"))
    return "step.quantize_fp8";
  if (auto call = dyn_cast<stepk::CallOp>(op);
      call && call.getCallee().starts_with("pack_fp8_"))
    return "fp8 packing";
  std::string name = isa<stepk::FusedOp>(op) ? fusedKind(cast<stepk::FusedOp>(op))
                                              : named->getName().getStringRef().str();
  // Every GEMM is a stepk.gemm by now (step-lower-library-calls).
  if (auto m = dyn_cast<stepk::GemmOp>(named))
    name += std::string(" ") + (m.getTransposeA() ? "T" : "N") + (m.getTransposeB() ? "T" : "N");
  return name;
}

int SourceEmitter::profileKind(Operation *op) {
  Operation *named = isa<stepk::CallOp>(op) ? cast<stepk::CallOp>(op).getKernelOp() : op;
  std::string name = kernelKind(op);
  int64_t flops = 0;
  if (isa<stepk::GemmOp, AttentionOp, AttentionGradOp, stepk::AttentionOp,
          stepk::AttentionGradOp>(named))
    if (FailureOr<int64_t> executed = getExecutedFlops(named); succeeded(executed))
      flops = *executed;
  // Bytes: every operand read and every result written once (the least
  // traffic the kernel can have).
  int64_t bytes = 0;
  for (Value v : op->getOperands())
    bytes += tensorBytes(typeOf(v));
  for (Value v : op->getResults())
    bytes += tensorBytes(typeOf(v));
  auto [it, inserted] = profileKindOf.try_emplace(name, profileKinds.size());
  if (inserted)
    profileKinds.push_back(ProfileKind{name});
  ProfileKind &kind = profileKinds[it->second];
  kind.calls += 1;
  kind.bytes += bytes;
  kind.flops += flops;
  // (A step whose calls do not fit their plans has no view: emitCall says
  // why, and the sites get no live bytes.)
  if (liveByOp.empty())
    if (FailureOr<StepInOrder> view = StepInOrder::of(step); succeeded(view))
      liveByOp = liveBytesByOp(plan, view->ops().size());
  const int64_t live = flatIndex < int64_t(liveByOp.size()) ? liveByOp[flatIndex] : 0;
  // The block its result is computed for (step-outline-blocks marked it on
  // the flat step): a collective computes for none, issued and waited for
  // inside other blocks' kernels (a prefetch, a gradient's reduction).
  auto computedFor = op->getAttrOfType<StringAttr>(StepDialect::kComputedForAttrName);
  std::string block = computedFor && !communicates(op) ? computedFor.str() : "";
  profileSites.push_back(ProfileSite{it->second, named->getName().getStringRef().str(),
                                     where(named), flops, bytes, live, block});
  return it->second;
}

std::string SourceEmitter::profileSupport() {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "// stepc --profile: the wall time of each kernel kind, written when the\n"
     << "// library is unloaded to $STEPC_PROFILE (or stderr); a rank of a sharded\n"
     << "// step writes $STEPC_PROFILE.rank<N>.\n"
     << "#include <stdlib.h>\n#include <time.h>\n\nnamespace {\n\n"
     << "struct stepc_prof_kind {\n  const char *name;\n"
     << "  long long calls, bytes, flops;\n};\n"
     << "const stepc_prof_kind kProfKinds[] = {\n";
  for (const ProfileKind &k : profileKinds)
    os << "  {" << cString(k.name) << ", " << k.calls << ", " << k.bytes << ", " << k.flops
       << "},\n";
  size_t n = std::max<size_t>(profileKinds.size(), 1);
  os << "};\n"
     << "const stepc_trace_site kProfSites[] = {\n";
  for (const ProfileSite &site : profileSites)
    os << "  {" << cString(profileKinds[site.kind].name) << ", " << cString(site.op) << ", "
       << cString(site.location) << ", " << site.flops << ", " << site.bytes << ", "
       << site.liveBytes << ", " << cString(site.block) << "},\n";
  if (profileSites.empty())
    os << "  {\"\", \"\", \"\", 0, 0, 0, \"\"},\n";
  os << "};\n"
     << "const int kProfSiteKind[] = {";
  for (const ProfileSite &site : profileSites)
    os << site.kind << ", ";
  os << (profileSites.empty() ? "0" : "") << "};\n"
     << "const size_t kProfSiteCount = " << profileSites.size() << ";\n"
     << "double stepc_prof_seconds[" << n << "];\n"
     << "long long stepc_prof_steps;\ndouble stepc_prof_last;\nint stepc_prof_rank = -1;\n"
     << "// The trace: the site about to end, and the intervals recorded.\n"
     << "int stepc_prof_site, stepc_prof_recording, stepc_prof_lost;\n"
     << "stepc_trace_event *stepc_prof_events;\n"
     << "size_t stepc_prof_event_count, stepc_prof_event_capacity;\n\n"
     << "double stepc_prof_now() {\n  struct timespec t;\n"
     << "  clock_gettime(CLOCK_MONOTONIC, &t);\n  return t.tv_sec + 1e-9 * t.tv_nsec;\n}\n"
     << "void stepc_prof_record(double end) {\n"
     << "  if (stepc_prof_event_count == stepc_prof_event_capacity) {\n"
     << "    size_t capacity = stepc_prof_event_capacity ? 2 * stepc_prof_event_capacity : 4096;\n"
     << "    void *grown = realloc(stepc_prof_events, capacity * sizeof(stepc_trace_event));\n"
     << "    if (!grown) {\n      stepc_prof_lost = 1;\n      return;\n    }\n"
     << "    stepc_prof_events = (stepc_trace_event *)grown;\n"
     << "    stepc_prof_event_capacity = capacity;\n  }\n"
     << "  stepc_prof_events[stepc_prof_event_count++] =\n"
     << "      stepc_trace_event{stepc_prof_site, stepc_prof_last, end};\n}\n";
  os << profileTimers();
  os
     << "// Written once: when the runtime asks (stepc_profile_write_v1, at the end\n"
     << "// of its run), else when the library is unloaded.\n"
     << "int stepc_prof_written;\n"
     << "__attribute__((destructor)) void stepc_prof_write() {\n"
     << "  // No step ran (a run that failed early): an existing profile stays.\n"
     << "  if (stepc_prof_steps == 0 || stepc_prof_written)\n    return;\n"
     << "  stepc_prof_written = 1;\n"
     << "  const char *path = getenv(\"STEPC_PROFILE\");\n"
     << "  char ranked[4096];\n"
     << "  if (path && stepc_prof_rank >= 0) {\n"
     << "    snprintf(ranked, sizeof ranked, \"%s.rank%d\", path, stepc_prof_rank);\n"
     << "    path = ranked;\n  }\n"
     << "  FILE *out = path ? fopen(path, \"w\") : stderr;\n  if (!out) {\n"
     << "    fprintf(stderr, \"stepc --profile: cannot write '%s'\\n\", path);\n"
     << "    return;\n  }\n"
     << "  // The CPU table leaves out step 1 when later steps ran (above).\n"
     << "  const long long steps = "
     << profileSteps() << ";\n"
     << "  fprintf(out, \"{\\\"steps\\\": %lld, \\\"kernels\\\": [\", steps);\n"
     << "  for (size_t k = 0; k < sizeof(kProfKinds) / sizeof(kProfKinds[0]); ++k)\n"
     << "    fprintf(out, \"%s\\n {\\\"kind\\\": \\\"%s\\\", \\\"calls_per_step\\\": %lld, "
        "\\\"bytes_per_step\\\": %lld, \\\"flops_per_step\\\": %lld, \\\"seconds\\\": %.9f}\",\n"
     << "            k ? \",\" : \"\", kProfKinds[k].name, kProfKinds[k].calls, kProfKinds[k].bytes,\n"
     << "            kProfKinds[k].flops, stepc_prof_seconds[k]);\n"
     << "  fprintf(out, \"\\n]}\\n\");\n"
     << "  if (path && (ferror(out) | fclose(out)))\n"
     << "    fprintf(stderr, \"stepc --profile: cannot write '%s'\\n\", path);\n}\n\n"
     << "}  // namespace\n\n"
     << "extern \"C\" void stepc_profile_write_v1(void) { stepc_prof_write(); }\n\n"
     << "extern \"C\" int stepc_profile_trace_v2(int record, const stepc_trace_event **events,\n"
     << "                                      size_t *count, const stepc_trace_site **sites,\n"
     << "                                      size_t *site_count) {\n"
     << profileTraceCollect()
     << "  const int lost = stepc_prof_lost;\n"
     << "  if (record) {\n    stepc_prof_event_count = 0;\n    stepc_prof_lost = 0;\n"
     << profileTraceOrigin() << "  }\n"
     << "  stepc_prof_recording = record;\n"
     << "  *events = stepc_prof_events;\n  *count = stepc_prof_event_count;\n"
     << "  *sites = kProfSites;\n  *site_count = kProfSiteCount;\n  return lost;\n}\n\n";
  return text;
}


// Step 1 first touches the arena's pages and makes the libraries'
// primitives, charged to whichever kernel gets there first: its times are
// dropped once a second step starts.
std::string SourceEmitter::hostProfileTimers() {
  return "void stepc_prof_begin(int rank) {\n"
         "  if (++stepc_prof_steps == 2)\n"
         "    for (size_t k = 0; k < sizeof(stepc_prof_seconds) / sizeof(double); ++k)\n"
         "      stepc_prof_seconds[k] = 0;\n"
         "  stepc_prof_rank = rank;\n"
         "  stepc_prof_site = 0;\n  stepc_prof_last = stepc_prof_now();\n}\n"
         "void stepc_prof_mark(int kind) {\n  double now = stepc_prof_now();\n"
         "  stepc_prof_seconds[kind] += now - stepc_prof_last;\n"
         "  if (stepc_prof_recording)\n    stepc_prof_record(now);\n"
         "  ++stepc_prof_site;\n  stepc_prof_last = now;\n}\n\n";
}

std::string SourceEmitter::cudaProfileTimers() {
  // Each mark records an event on the step's stream after its kernel (in a
  // captured graph an event node, recorded again at every replay, where no
  // host code of the step runs: a plain cudaEventRecord under capture only
  // orders streams, hence cudaEventRecordExternal, which CUDA refuses
  // outside a capture): kernel k spans events k and k + 1, event 0
  // the step's start. The events are read once the runtime asks for a
  // recorded step's intervals, after it: the host never waits otherwise.
  // Their times are placed from the host time the runtime asked to record
  // (just before the step), so the launch latency is not shown.
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "cudaEvent_t stepc_prof_ev[" << profileSites.size() + 1 << "];\n"
     << "int stepc_prof_ev_made;\ncudaStream_t stepc_prof_stream;\ndouble stepc_prof_t0;\n"
     << "unsigned stepc_prof_record_flags;\n"
     << "void stepc_prof_begin(int rank, cudaStream_t stream) {\n"
     << "  stepc_prof_rank = rank;\n  stepc_prof_stream = stream;\n  stepc_prof_site = 0;\n"
     << "  if (!stepc_prof_ev_made) {\n"
     << "    for (size_t i = 0; i <= kProfSiteCount; ++i)\n"
     << "      if (cudaEventCreate(&stepc_prof_ev[i]) != cudaSuccess)\n"
     << "        stepc_prof_lost = 2;\n"
     << "    stepc_prof_ev_made = 1;\n  }\n"
     << "  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;\n"
     << "  cudaStreamIsCapturing(stream, &capture);\n"
     << "  stepc_prof_record_flags = capture == cudaStreamCaptureStatusActive\n"
     << "                                ? cudaEventRecordExternal : cudaEventRecordDefault;\n"
     << "  cudaEventRecordWithFlags(stepc_prof_ev[0], stream, stepc_prof_record_flags);\n}\n"
     << "void stepc_prof_mark(int) {\n"
     << "  if ((size_t)stepc_prof_site < kProfSiteCount)\n"
     << "    cudaEventRecordWithFlags(stepc_prof_ev[stepc_prof_site + 1], stepc_prof_stream,\n"
     << "                             stepc_prof_record_flags);\n"
     << "  ++stepc_prof_site;\n}\n"
     << "// The recorded step's kernels, once its last event has happened.\n"
     << "void stepc_prof_collect() {\n"
     << "  if (!stepc_prof_ev_made || kProfSiteCount == 0 ||\n"
     << "      cudaEventSynchronize(stepc_prof_ev[kProfSiteCount]) != cudaSuccess) {\n"
     << "    stepc_prof_lost = 2;\n    return;\n  }\n"
     << "  ++stepc_prof_steps;\n"
     << "  float begin_ms = 0;\n"
     << "  for (size_t k = 0; k < kProfSiteCount; ++k) {\n"
     << "    float end_ms = 0;\n"
     << "    if (cudaEventElapsedTime(&end_ms, stepc_prof_ev[0], stepc_prof_ev[k + 1]) !=\n"
     << "        cudaSuccess) {\n      stepc_prof_lost = 2;\n      return;\n    }\n"
     << "    stepc_prof_seconds[kProfSiteKind[k]] += 1e-3 * (end_ms - begin_ms);\n"
     << "    stepc_prof_site = (int)k;\n"
     << "    stepc_prof_last = stepc_prof_t0 + 1e-3 * begin_ms;\n"
     << "    stepc_prof_record(stepc_prof_t0 + 1e-3 * end_ms);\n"
     << "    begin_ms = end_ms;\n  }\n}\n\n";
  return text;
}
