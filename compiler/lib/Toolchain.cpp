//===- Toolchain.cpp - invoking the host C++ and CUDA compilers ----------===//

#include "stepc/Compiler/Toolchain.h"
#include "stepc/Compiler/CompileCache.h"
#include "runtime/stepc_abi.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

using namespace stepc;

// Where the runtime headers and the kernel libraries are: compiled in by
// CMake, overridable for an installed tree.
/// The prefix stepc is installed under (`cmake --install`: PREFIX/bin/stepc
/// beside PREFIX/include/stepc/runtime and PREFIX/lib), or "" when it runs
/// from its build tree.
static std::string installPrefix() {
  static const std::string prefix = [] {
    static int anchor;
    std::string exe = llvm::sys::fs::getMainExecutable(nullptr, &anchor);
    llvm::SmallString<256> root(llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
    llvm::SmallString<256> abi(root);
    llvm::sys::path::append(abi, "include", "stepc", "runtime", "stepc_abi.h");
    return llvm::sys::fs::exists(abi) ? std::string(root) : std::string();
  }();
  return prefix;
}

/// A directory step.so is built against: $VAR if set, else the installed
/// layout's `installed` under the prefix, else the build tree's `fallback`.
static std::string dirFromEnv(const char *var, const char *fallback, const char *installed) {
  const char *value = std::getenv(var);
  if (value && *value)
    return value;
  if (!installPrefix().empty())
    return installPrefix() + "/" + installed;
  return fallback;
}

static std::string runtimeIncludeDir() {
  return dirFromEnv("STEPC_RUNTIME_INCLUDE_DIR", STEPC_RUNTIME_INCLUDE_DIR,
                    "include/stepc/runtime");
}

static std::string libraryDir() {
  return dirFromEnv("STEPC_LIBRARY_DIR", STEPC_LIBRARY_DIR, "lib");
}

/// Where a compiler writes step.so before it is renamed into place: a failed
/// build never touches a previous step.so at `output`.
static std::string partialPath(const std::string &output) { return output + ".partial"; }

/// The error of a compiler command that failed: its exit code, the command,
/// what it printed (the file `log`, removed), where the source is kept.
static llvm::Error compilerFailed(const char *what, int rc, const std::string &error,
                                  const std::vector<std::string> &args, llvm::StringRef log,
                                  const std::string &sourcePath) {
  auto diagnostics = llvm::MemoryBuffer::getFile(log);
  std::string text = diagnostics ? (*diagnostics)->getBuffer().str() : "";
  llvm::sys::fs::remove(log);
  std::string command;
  for (const std::string &a : args)
    command += a + " ";
  return llvm::createStringError(std::errc::io_error,
                                 "the %s failed (exit %d%s%s): %s\n%s"
                                 "the generated source is kept at %s",
                                 what, rc, error.empty() ? "" : ", ", error.c_str(),
                                 command.c_str(), text.c_str(), sourcePath.c_str());
}

/// Runs `args` (args[0] the program, which writes partialPath(output) from
/// the sources already written, stage 0's at `sourcePath`), and on success
/// renames its output to `output`; on failure removes the partial output
/// and reports the command and the compiler's output, the source kept.
static llvm::Error runCompiler(const std::string &sourcePath, const std::string &output,
                               const std::vector<std::string> &args, const char *what) {
  llvm::SmallString<128> log;
  llvm::sys::fs::createTemporaryFile("stepc-cc", "log", log);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(args[0], argv, std::nullopt, redirects, 0, 0, &error);
  if (rc != 0) {
    llvm::sys::fs::remove(partialPath(output));
    return compilerFailed(what, rc, error, args, log, sourcePath);
  }
  llvm::sys::fs::remove(log);
  if (std::error_code ec = llvm::sys::fs::rename(partialPath(output), output))
    return llvm::createStringError(ec, "cannot move the built step into '%s': %s",
                                   output.c_str(), ec.message().c_str());
  return llvm::Error::success();
}

/// Runs each command of `commands` (each compiling `sources[i]`), as many
/// at once as the machine has cores; the first failure's error, after
/// every started command has ended.
static llvm::Error runInParallel(const std::vector<std::vector<std::string>> &commands,
                                 const std::vector<std::string> &sources, const char *what) {
  size_t width = std::max(1u, std::thread::hardware_concurrency());
  llvm::Error first = llvm::Error::success();
  for (size_t begin = 0; begin < commands.size(); begin += width) {
    struct Started {
      size_t index;
      llvm::sys::ProcessInfo process;
      llvm::SmallString<128> log;
    };
    std::vector<Started> started;
    for (size_t i = begin; i < std::min(commands.size(), begin + width); ++i) {
      Started s{i, {}, {}};
      llvm::sys::fs::createTemporaryFile("stepc-cc", "log", s.log);
      std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(s.log),
                                                    llvm::StringRef(s.log)};
      std::vector<llvm::StringRef> argv(commands[i].begin(), commands[i].end());
      std::string error;
      bool failed = false;
      s.process = llvm::sys::ExecuteNoWait(commands[i][0], argv, std::nullopt, redirects, 0,
                                           &error, &failed);
      if (failed) {
        if (!first)
          first = compilerFailed(what, -1, error, commands[i], s.log, sources[i]);
        else
          llvm::sys::fs::remove(s.log);
        continue;
      }
      started.push_back(std::move(s));
    }
    for (Started &s : started) {
      std::string error;
      llvm::sys::ProcessInfo done = llvm::sys::Wait(s.process, std::nullopt, &error);
      if (done.ReturnCode != 0 && !first)
        first = compilerFailed(what, done.ReturnCode, error, commands[s.index], s.log,
                               sources[s.index]);
      else
        llvm::sys::fs::remove(s.log);
    }
    if (first)
      return first;
  }
  return first;
}

/// A step.so replaces a previous regular file, never a device (as root,
/// `-o /dev/null` would replace the system's), FIFO or directory.
static llvm::Error checkOutput(const std::string &output) {
  llvm::sys::fs::file_status existing;
  if (!llvm::sys::fs::status(output, existing) && llvm::sys::fs::exists(existing) &&
      existing.type() != llvm::sys::fs::file_type::regular_file)
    return llvm::createStringError(std::errc::invalid_argument,
                                   "cannot write the step to '%s': it exists and is not a "
                                   "regular file",
                                   output.c_str());
  return llvm::Error::success();
}

static llvm::Expected<std::string> findProgram(const char *envVar, const std::string &fallback) {
  const char *env = std::getenv(envVar);
  std::string name = env && *env ? env : fallback;
  llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName(name);
  if (!path)
    return llvm::createStringError(path.getError(), "'%s' is not on PATH (set $%s)",
                                   name.c_str(), envVar);
  return *path;
}

// The x86-64-v3 level (the psABI's list) in /proc/cpuinfo's names: lzcnt
// is "abm" there.
static constexpr const char *kX86_64V3Features = "avx,avx2,bmi1,bmi2,f16c,fma,abm,movbe,xsave";
// Features -march=native may use, checked by the runtime when present here.
static constexpr const char *kNativeFeatures[] = {
    "sse4_1",    "sse4_2",   "ssse3",       "avx",         "avx2",       "fma",
    "bmi1",      "bmi2",     "f16c",        "abm",         "movbe",      "xsave",
    "avx512f",   "avx512dq", "avx512cd",    "avx512bw",    "avx512vl",   "avx512ifma",
    "avx512vbmi", "avx512_vbmi2", "avx512_vnni", "avx512_bf16", "avx512_bitalg",
    "avx512_vpopcntdq", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"};

llvm::Expected<stepc::CpuTarget> stepc::cpuTarget(const std::string &name) {
  if (name == "x86-64-v3") {
#if defined(__x86_64__)
    return CpuTarget{name, kX86_64V3Features};
#else
    return llvm::createStringError(std::errc::invalid_argument,
                                   "--cpu=x86-64-v3 needs an x86-64 host (use --cpu=native)");
#endif
  }
  if (name != "native")
    return llvm::createStringError(std::errc::invalid_argument,
                                   "unknown --cpu '%s' (expected x86-64-v3 or native)",
                                   name.c_str());
  // What this machine has of what -march=native may use, and its model.
  std::set<std::string> have;
  std::string model;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line) && (have.empty() || model.empty());) {
    if (line.rfind("model name", 0) == 0 && model.empty())
      model = line.substr(line.find(':') + 1);
    if (line.rfind("flags", 0) == 0 && have.empty()) {
      std::istringstream words(line.substr(line.find(':') + 1));
      for (std::string w; words >> w;)
        have.insert(w);
    }
  }
  std::string features;
  for (const char *f : kNativeFeatures)
    if (have.count(f))
      features += (features.empty() ? "" : ",") + std::string(f);
  return CpuTarget{name, features, model};
}

/// Stage r > 0's entry points carry its number; stage 0's are the plain
/// ones (what a tool reading the module's info finds), and it tells how
/// many stages there are.
static std::string stageSource(const std::string &source, size_t stage, size_t stages) {
  if (stages == 1)
    return source;
  if (stage == 0)
    return source + "\nextern \"C\" int stepc_pipeline_stages_v" +
           std::to_string(STEPC_ABI_VERSION) + "(void) { return " + std::to_string(stages) +
           "; }\n";
  std::string prefix;
  for (const char *name : {"stepc_module_info", "stepc_train_step", "stepc_eval_step",
                           "stepc_sample_step"}) {
    std::string symbol = std::string(name) + "_v" + std::to_string(STEPC_ABI_VERSION);
    prefix += "#define " + symbol + " " + symbol + "_stage" + std::to_string(stage) + "\n";
  }
  for (const char *symbol :
       {"stepc_profile_trace_v2", "stepc_profile_write_v1", "stepc_prepare_v1"})
    prefix += std::string("#define ") + symbol + " " + symbol + "_stage" +
              std::to_string(stage) + "\n";
  return prefix + source;
}

/// How a compiler builds a step.so: `program compile SOURCES... link -o OUT`.
struct CompileCommand {
  std::string program;
  /// What decides the object code (language, optimisation, target, include
  /// paths and macros), before the sources.
  std::vector<std::string> compile;
  /// After the sources: -shared and what is linked.
  std::vector<std::string> link;
  /// The generated source's extension (".cpp", ".cu").
  std::string extension;
  /// For messages: "C++ compiler".
  const char *what;
  /// Whether `program compile -E -P FILE` prints FILE preprocessed, as the
  /// compile cache needs (GCC and Clang; not nvcc).
  bool preprocesses;
  /// What else the object code depends on, for the cache's key: the CPU
  /// itself under -march=native (a cache directory may be shared by hosts).
  std::string machine = "";
};

/// The libraries `link` names (paths, and -l names found in its -L
/// directories): the files a cached build depends on beyond its sources.
static std::vector<std::string> linkedFiles(const std::vector<std::string> &link) {
  std::vector<std::string> dirs, files;
  for (const std::string &arg : link) {
    llvm::StringRef a(arg);
    if (a.consume_front("-L")) {
      dirs.push_back(a.str());
    } else if (a.consume_front("-l")) {
      for (const std::string &dir : dirs)
        for (const char *kind : {".so", ".a"})
          if (std::string path = dir + "/lib" + a.str() + kind; llvm::sys::fs::exists(path))
            files.push_back(path);
    } else if (a.ends_with(".a") || a.ends_with(".so")) {
      files.push_back(arg);
    }
  }
  return files;
}

/// The compile cache's key for building `paths` (the stage sources, written)
/// with `command`: empty when a source cannot be preprocessed (the compile
/// then runs, and reports what is wrong).
static std::string cacheKey(const CompileCommand &command, const std::vector<std::string> &paths) {
  std::vector<std::string> preprocessed;
  for (const std::string &path : paths) {
    std::string out = path + ".i";
    std::vector<std::string> args{command.program};
    args.insert(args.end(), command.compile.begin(), command.compile.end());
    args.insert(args.end(), {"-E", "-P", path, "-o", out});
    std::vector<llvm::StringRef> argv(args.begin(), args.end());
    std::optional<llvm::StringRef> quiet[] = {std::nullopt, llvm::StringRef(""),
                                              llvm::StringRef("")};
    int rc = llvm::sys::ExecuteAndWait(args[0], argv, std::nullopt, quiet);
    auto text = llvm::MemoryBuffer::getFile(out);
    llvm::sys::fs::remove(out);
    if (rc != 0 || !text)
      return "";
    preprocessed.push_back((*text)->getBuffer().str());
  }
  std::vector<std::string> identity{command.program, command.what, command.machine};
  identity.insert(identity.end(), command.compile.begin(), command.compile.end());
  identity.insert(identity.end(), command.link.begin(), command.link.end());
  return CompileCache::key(identity, preprocessed, linkedFiles(command.link));
}

/// Builds `output` from every stage's source, written beside it
/// (`<output><extension>`, stage r > 0's `<output>.stage<r><extension>`)
/// and compiled in one command (their statics apart). A build of the same
/// preprocessed sources with the same command and libraries is copied from
/// the compile cache (CompileCache.h) instead.
static llvm::Error compileStages(const std::vector<std::string> &sources,
                                 const std::string &output, const CompileCommand &command,
                                 bool *fromCache) {
  if (fromCache)
    *fromCache = false;
  if (llvm::Error error = checkOutput(output))
    return error;
  std::vector<std::string> paths;
  for (size_t stage = 0; stage < sources.size(); ++stage) {
    paths.push_back(output + (stage ? ".stage" + std::to_string(stage) : "") +
                    command.extension);
    std::error_code ec;
    llvm::raw_fd_ostream os(paths.back(), ec);
    if (ec)
      return llvm::createStringError(ec, "cannot write '%s': %s", paths.back().c_str(),
                                     ec.message().c_str());
    os << stageSource(sources[stage], stage, sources.size());
  }
  auto removeSources = [&] {
    for (const std::string &path : paths)
      llvm::sys::fs::remove(path);
  };
  std::optional<CompileCache> cache =
      command.preprocesses ? CompileCache::fromEnvironment() : std::nullopt;
  std::string key = cache ? cacheKey(command, paths) : "";
  if (!key.empty() && cache->fetch(key, output)) {
    removeSources();
    if (fromCache)
      *fromCache = true;
    return llvm::Error::success();
  }
  // One stage: one command. A pipeline's stages are independent
  // translation units: each is compiled to an object at once, then they
  // are linked (P stages take about one stage's time where there are P
  // cores).
  std::vector<std::string> inputs = paths, objects;
  if (paths.size() > 1) {
    std::vector<std::vector<std::string>> compiles;
    for (const std::string &path : paths) {
      objects.push_back(path + ".o");
      compiles.push_back({command.program});
      compiles.back().insert(compiles.back().end(), command.compile.begin(),
                             command.compile.end());
      compiles.back().insert(compiles.back().end(), {"-c", path, "-o", objects.back()});
    }
    if (llvm::Error error = runInParallel(compiles, paths, command.what)) {
      for (const std::string &object : objects)
        llvm::sys::fs::remove(object);
      return error;
    }
    inputs = objects;
  }
  std::vector<std::string> args{command.program};
  for (size_t i = 0; i < command.compile.size(); ++i) {
    // Objects are not in the sources' language (-x c++).
    if (!objects.empty() && command.compile[i] == "-x") {
      ++i;
      continue;
    }
    args.push_back(command.compile[i]);
  }
  args.insert(args.end(), inputs.begin(), inputs.end());
  args.insert(args.end(), command.link.begin(), command.link.end());
  args.insert(args.end(), {"-o", partialPath(output)});
  llvm::Error linked = runCompiler(paths.front(), output, args, command.what);
  for (const std::string &object : objects)
    llvm::sys::fs::remove(object);
  if (linked)
    return linked;
  if (!key.empty())
    cache->store(key, output);
  removeSources();
  return llvm::Error::success();
}

llvm::Error stepc::compileCpuSharedObject(const std::vector<std::string> &sources,
                                          const std::string &output, const CpuTarget &cpu,
                                          bool *fromCache) {
  llvm::Expected<std::string> cxx = findProgram("CXX", "c++");
  if (!cxx)
    return llvm::createStringError(std::errc::no_such_file_or_directory,
                                   "no C++ compiler: %s",
                                   llvm::toString(cxx.takeError()).c_str());
  std::string include = runtimeIncludeDir();
  std::string kernels = include + "/kernels/cpu";
  std::string libDir = libraryDir();
  // -fno-trapping-math: no step reads the floating-point exception flags,
  // and without it GCC cannot vectorize a loop whose arithmetic sits under
  // a select (the exact GELU's) on a CPU without masked vector operations
  // (AVX2: those loops ran scalar, 10x slower). Values are unchanged.
  CompileCommand command{*cxx,
                         {"-std=c++17", "-O3", "-march=" + cpu.isa, "-fno-trapping-math",
                          "-fopenmp", "-fPIC", "-w", "-I" + include, "-I" + kernels},
                         {"-shared", "-L" + libDir,
                          cpu.isa == "native" ? "-lstepc_kernels_cpu_native"
                                              : "-lstepc_kernels_cpu",
                          "-lmvec", "-Wl,-rpath," + libDir},
                         ".cpp",
                         "C++ compiler",
                         /*preprocesses=*/true};
  // GCC keeps to 256-bit vectors on AVX-512 CPUs unless told; the loops'
  // compute-bound math (the GELU pair, exp, log) runs ~2x on 512.
  llvm::SmallVector<llvm::StringRef> features;
  llvm::StringRef(cpu.features).split(features, ',');
  if (llvm::is_contained(features, "avx512f"))
    command.compile.push_back("-mprefer-vector-width=512");
  if (cpu.isa == "native")
    command.machine = cpu.features + " " + cpu.model;
  return compileStages(sources, output, command, fromCache);
}

llvm::Error stepc::compileCudaSharedObject(const std::vector<std::string> &sources,
                                           const std::string &output, const std::string &arch,
                                           bool *fromCache) {
  llvm::Expected<std::string> nvcc = findProgram("NVCC", *STEPC_NVCC ? STEPC_NVCC : "nvcc");
  if (!nvcc)
    return llvm::createStringError(std::errc::no_such_file_or_directory,
                                   "no CUDA compiler for --target=cuda (the default): %s; "
                                   "--target=cpu builds for this machine's CPU",
                                   llvm::toString(nvcc.takeError()).c_str());
  std::string include = runtimeIncludeDir();
  std::string kernels = include + "/kernels/cuda";
  std::string libDir = libraryDir();
  std::string library = libDir + "/libstepc_kernels_cuda.a";
  if (!llvm::sys::fs::exists(library))
    return llvm::createStringError(std::errc::no_such_file_or_directory,
                                   "the CUDA kernel library '%s' is missing: this stepc was "
                                   "built without nvcc (--target=cpu builds for the CPU)",
                                   library.c_str());
  // The toolkit's libraries sit beside its bin/ (lib64 or lib).
  llvm::SmallString<128> root(llvm::sys::path::parent_path(llvm::sys::path::parent_path(*nvcc)));
  std::string cudaLib = (root + "/lib64").str();
  if (!llvm::sys::fs::exists(cudaLib))
    cudaLib = (root + "/lib").str();
  // Machine code for `arch` alone, no PTX (an sm_90a step runs on no other
  // GPU), its fatbin compressed: the kernel library's device code was most
  // of a step.so (gpt2-124m's: 9.2 MB with PTX, uncompressed; 3.7 MB so).
  std::vector<std::string> machine = {"-arch=" + arch};
  if (llvm::StringRef(arch).starts_with("sm_"))
    machine = {"-gencode=arch=compute_" + arch.substr(3) + ",code=" + arch,
               "-Xfatbin=-compress-all"};
  std::vector<std::string> compile = {"-std=c++17", "-O3"};
  llvm::append_range(compile, machine);
  llvm::append_range(compile, std::vector<std::string>{"-Xcompiler", "-fPIC", "-w",
                                                       "-I" + include, "-I" + kernels});
  return compileStages(sources, output,
                       {*nvcc,
                        compile,
                        {"-shared", library, "-L" + cudaLib, "-lcublasLt", "-lcudart",
                         "-Xlinker", "-rpath," + cudaLib},
                        ".cu",
                        "CUDA compiler",
                        /*preprocesses=*/false},
                       fromCache);
}

llvm::Error stepc::compileCudaEmulatedSharedObject(const std::vector<std::string> &sources,
                                                   const std::string &output,
                                                   bool *fromCache) {
  llvm::Expected<std::string> cxx = findProgram("CXX", "c++");
  if (!cxx)
    return llvm::createStringError(std::errc::no_such_file_or_directory, "no C++ compiler: %s",
                                   llvm::toString(cxx.takeError()).c_str());
  std::string include = runtimeIncludeDir();
  std::string root = llvm::sys::path::parent_path(include).str();
  std::string libDir = libraryDir();
  std::string library = libDir + "/libstepc_kernels_cuda_emulated.a";
  if (!llvm::sys::fs::exists(library))
    return llvm::createStringError(std::errc::no_such_file_or_directory,
                                   "the emulated CUDA kernel library '%s' is missing",
                                   library.c_str());
  return compileStages(sources, output,
                       {*cxx,
                        {"-std=c++17", "-O1", "-fPIC", "-w", "-DSTEPC_CUDA_EMULATION",
                         "-I" + root, "-I" + include, "-I" + include + "/kernels/cuda", "-x",
                         "c++"},
                        {"-x", "none", "-shared", library, "-lboost_context", "-lpthread"},
                        ".cu",
                        "C++ compiler (CUDA emulation)",
                        /*preprocesses=*/true},
                       fromCache);
}
