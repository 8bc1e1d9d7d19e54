# Precompiled upstream headers for the MLIR-heavy libraries: each of their
# translation units spends 3-5 s of its 6-15 s parsing the same LLVM/MLIR
# headers, so a library's one precompiled copy saves about a third of its
# build (the CI builds from scratch on 2 cores). Only upstream headers are
# listed: editing our own dialects or passes never rebuilds the PCH.
# STEPC_PCH=OFF builds without it (e.g. to find a missing #include, which
# the PCH hides).
option(STEPC_PCH "Precompile the LLVM/MLIR headers of the MLIR-heavy libraries" ON)

set(STEPC_MLIR_PCH_HEADERS
  <algorithm> <map> <optional> <string> <vector>
  "<llvm/ADT/STLExtras.h>" "<llvm/ADT/SetVector.h>" "<llvm/ADT/SmallVector.h>"
  "<llvm/ADT/StringMap.h>" "<llvm/ADT/TypeSwitch.h>"
  "<llvm/Support/FormatVariadic.h>" "<llvm/Support/raw_ostream.h>"
  "<mlir/IR/Builders.h>" "<mlir/IR/BuiltinAttributes.h>" "<mlir/IR/BuiltinOps.h>"
  "<mlir/IR/BuiltinTypes.h>" "<mlir/IR/IRMapping.h>" "<mlir/IR/OpImplementation.h>"
  "<mlir/IR/PatternMatch.h>" "<mlir/IR/SymbolTable.h>"
  "<mlir/Dialect/Func/IR/FuncOps.h>" "<mlir/Dialect/Mesh/IR/MeshOps.h>"
  "<mlir/Pass/Pass.h>")

function(stepc_mlir_pch target)
  if(STEPC_PCH)
    target_precompile_headers(${target} PRIVATE ${STEPC_MLIR_PCH_HEADERS})
  endif()
endfunction()
