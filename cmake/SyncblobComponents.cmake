# Optional components: each is an INTERFACE target that adds one dependency, so users pay only
# for what they include. A component whose dependency is missing is simply not defined.

find_package(Eigen3 3.4 NO_MODULE QUIET)
if(TARGET Eigen3::Eigen)
  add_library(syncblob_eigen INTERFACE)
  add_library(syncblob::eigen ALIAS syncblob_eigen)
  set_target_properties(syncblob_eigen PROPERTIES EXPORT_NAME eigen)
  target_link_libraries(syncblob_eigen INTERFACE syncblob Eigen3::Eigen)
endif()

find_package(nlohmann_json 3.11 QUIET)
if(TARGET nlohmann_json::nlohmann_json)
  add_library(syncblob_json INTERFACE)
  add_library(syncblob::json ALIAS syncblob_json)
  set_target_properties(syncblob_json PROPERTIES EXPORT_NAME json)
  target_link_libraries(syncblob_json INTERFACE syncblob nlohmann_json::nlohmann_json)
endif()

# syncblob::cuda needs the CUDA toolkit's headers and libraries; its host headers compile with
# any C++ compiler. SYNCBLOB_ENABLE_CUDA additionally enables nvcc for CUDA translation units.
set(SYNCBLOB_HAS_NVCC OFF)
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND AND TARGET syncblob_eigen)
  add_library(syncblob_cuda INTERFACE)
  add_library(syncblob::cuda ALIAS syncblob_cuda)
  set_target_properties(syncblob_cuda PROPERTIES EXPORT_NAME cuda)
  target_link_libraries(syncblob_cuda INTERFACE syncblob_eigen CUDA::cudart CUDA::cublas)
  # CMake 3.25 does not know nvcc 13 speaks C++20 and would silently compile C++17;
  # Eigen needs relaxed constexpr under nvcc.
  target_compile_options(syncblob_cuda INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr>)
  if(SYNCBLOB_ENABLE_CUDA AND PROJECT_IS_TOP_LEVEL)
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES 75 90)
      endif()
      enable_language(CUDA)
      set(SYNCBLOB_HAS_NVCC ON)
    endif()
  endif()
endif()

# syncblob::mpi: all-reduce and broadcast of a ParameterArena through MPI's C API
# (syncblob/comm/mpi.hpp). MPI's C++ bindings are not used.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI QUIET COMPONENTS CXX)
if(TARGET MPI::MPI_CXX)
  add_library(syncblob_mpi INTERFACE)
  add_library(syncblob::mpi ALIAS syncblob_mpi)
  set_target_properties(syncblob_mpi PROPERTIES EXPORT_NAME mpi)
  target_link_libraries(syncblob_mpi INTERFACE syncblob MPI::MPI_CXX)
endif()

# syncblob::nccl: the same over NCCL (syncblob/comm/nccl.hpp), which comes with the CUDA toolkit.
if(TARGET syncblob_cuda)
  find_library(SYNCBLOB_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(SYNCBLOB_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  mark_as_advanced(SYNCBLOB_NCCL_LIBRARY SYNCBLOB_NCCL_INCLUDE_DIR)
  if(SYNCBLOB_NCCL_LIBRARY AND SYNCBLOB_NCCL_INCLUDE_DIR)
    add_library(syncblob_nccl INTERFACE)
    add_library(syncblob::nccl ALIAS syncblob_nccl)
    set_target_properties(syncblob_nccl PROPERTIES EXPORT_NAME nccl)
    # The installed package config finds the library again (syncblob::nccl_library) on the user's machine.
    target_link_libraries(syncblob_nccl INTERFACE syncblob_cuda
      $<BUILD_INTERFACE:${SYNCBLOB_NCCL_LIBRARY}> $<INSTALL_INTERFACE:syncblob::nccl_library>)
    target_include_directories(syncblob_nccl SYSTEM INTERFACE $<BUILD_INTERFACE:${SYNCBLOB_NCCL_INCLUDE_DIR}>)
  endif()
endif()
