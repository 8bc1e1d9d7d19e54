# `cmake --install build --prefix P`: the tools, the runtime and kernel
# libraries, the headers step.so is built against, a CMake package
# (find_package(stepc) -> stepc::runtime) and a pkg-config file (stepc.pc).
#
#   P/bin/{stepc,stepc-opt,stepc-run,stepc-interp}
#   P/lib/libstepc_runtime.so, libstepc_kernels_cpu{,_native}.so, the CUDA layers
#   P/include/stepc/runtime/...     (#include "runtime/stepc_runtime.h")
#   P/lib/cmake/stepc/, P/lib/pkgconfig/stepc.pc
#
# An installed stepc finds its headers and kernel libraries relative to its
# own executable (compiler/lib/Toolchain.cpp), so the prefix can move.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(STEPC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/stepc)

# Installed binaries find the installed libraries beside them; the CPU
# kernels also find OpenBLAS's OpenMP build, which is not on the default
# library path.
set_target_properties(stepc-run stepc_runtime PROPERTIES
                      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR};$ORIGIN")
set_target_properties(stepc_kernels_cpu stepc_kernels_cpu_native
                      PROPERTIES INSTALL_RPATH "$ORIGIN;${STEPC_OPENBLAS_DIR}")

install(TARGETS stepc stepc-opt stepc-run stepc-interp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_target_properties(stepc_runtime PROPERTIES EXPORT_NAME runtime)
install(TARGETS stepc_runtime EXPORT stepcTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
set(STEPC_INSTALLED_LIBS stepc_kernels_cpu stepc_kernels_cpu_native stepc_runtime_cuda_emulated
    stepc_kernels_cuda_emulated)
foreach(lib stepc_runtime_cuda stepc_runtime_nccl stepc_kernels_cuda)
  if(TARGET ${lib})
    list(APPEND STEPC_INSTALLED_LIBS ${lib})
  endif()
endforeach()
# The CUDA layers keep the toolkit directories their build found.
foreach(lib ${STEPC_INSTALLED_LIBS})
  get_target_property(rpath ${lib} BUILD_RPATH)
  if(lib MATCHES "^stepc_kernels_cpu")
    continue()
  elseif(rpath)
    set_target_properties(${lib} PROPERTIES INSTALL_RPATH "$ORIGIN;${rpath}")
  else()
    set_target_properties(${lib} PROPERTIES INSTALL_RPATH "$ORIGIN")
  endif()
endforeach()
install(TARGETS ${STEPC_INSTALLED_LIBS}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

# The runtime's headers (the C API, the C++ Session) and the library
# kernels' headers the emitted step includes.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/stepc/runtime
        FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh" PATTERN "*.def")
# With the line ops' kernel declarations generated from the ops.
foreach(target cpu cuda)
  install(FILES ${PROJECT_BINARY_DIR}/runtime/kernels/${target}/line_kernels.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/stepc/runtime/kernels/${target})
endforeach()

install(EXPORT stepcTargets NAMESPACE stepc:: DESTINATION ${STEPC_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/stepcConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/stepcConfig.cmake
                              INSTALL_DESTINATION ${STEPC_INSTALL_CMAKEDIR}
                              PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/stepcConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/stepcConfig.cmake ${PROJECT_BINARY_DIR}/stepcConfigVersion.cmake
        DESTINATION ${STEPC_INSTALL_CMAKEDIR})
configure_file(${CMAKE_CURRENT_LIST_DIR}/stepc.pc.in ${PROJECT_BINARY_DIR}/stepc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/stepc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
