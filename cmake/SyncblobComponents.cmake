# Optional components: each is an INTERFACE target that adds one dependency, so users pay only for
# what they include. SYNCBLOB_ENABLE_<COMPONENT> chooses, for each:
#   AUTO  (default) defined when its dependency is found, left out quietly otherwise;
#   ON    required: configuring fails, naming the dependency, when it is not found;
#   OFF   left out, and its dependency is not even looked up.
# Only the components defined here are installed (cmake/SyncblobInstall.cmake).
#
#   component  target           dependency                          headers
#   eigen      syncblob::eigen  Eigen 3.4                           syncblob/eigen.hpp, syncblob/math.hpp
#   json       syncblob::json   nlohmann_json 3.11                  syncblob/io/json.hpp, syncblob/io/safetensors.hpp,
#                                                                   syncblob/checkpoint.hpp, syncblob/checkpoint/...
#   cuda       syncblob::cuda   CUDA toolkit (cudart, cuBLAS)       syncblob/cuda/...
#   mpi        syncblob::mpi    MPI (C API)                         syncblob/comm/mpi.hpp
#   nccl       syncblob::nccl   NCCL (+ syncblob::cuda)             syncblob/comm/nccl.hpp

set(SYNCBLOB_COMPONENTS eigen json cuda mpi nccl)
set(SYNCBLOB_ENABLED_COMPONENTS "")
foreach(_component IN LISTS SYNCBLOB_COMPONENTS)
  string(TOUPPER ${_component} _upper)
  set(SYNCBLOB_ENABLE_${_upper} AUTO CACHE STRING
    "syncblob::${_component}: AUTO (when its dependency is found), ON (required) or OFF (not looked up)")
  set_property(CACHE SYNCBLOB_ENABLE_${_upper} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${SYNCBLOB_ENABLE_${_upper}}" _mode)
  if(_mode MATCHES "^(ON|YES|TRUE|Y|1)$")
    set(_syncblob_mode_${_component} ON)
  elseif(_mode MATCHES "^(OFF|NO|FALSE|N|0|IGNORE|NOTFOUND|)$" OR _mode MATCHES "-NOTFOUND$")
    set(_syncblob_mode_${_component} OFF)
  elseif(_mode STREQUAL "AUTO")
    set(_syncblob_mode_${_component} AUTO)
  else()
    message(FATAL_ERROR "SYNCBLOB_ENABLE_${_upper} is '${SYNCBLOB_ENABLE_${_upper}}': use AUTO, ON or OFF")
  endif()
endforeach()

# _syncblob_component_missing(<component> <what is missing>): an error when the component was required.
function(_syncblob_component_missing component what)
  string(TOUPPER ${component} upper)
  if(_syncblob_mode_${component} STREQUAL "ON")
    message(FATAL_ERROR "syncblob: SYNCBLOB_ENABLE_${upper}=ON but ${what} was not found "
      "(install it, point CMAKE_PREFIX_PATH at it, or set SYNCBLOB_ENABLE_${upper} to AUTO or OFF)")
  endif()
  message(STATUS "syncblob: component ${component} left out (${what} not found)")
endfunction()

macro(_syncblob_define_component component)
  add_library(syncblob_${component} INTERFACE)
  add_library(syncblob::${component} ALIAS syncblob_${component})
  set_target_properties(syncblob_${component} PROPERTIES EXPORT_NAME ${component})
  list(APPEND SYNCBLOB_ENABLED_COMPONENTS ${component})
endmacro()

if(_syncblob_mode_eigen)
  find_package(Eigen3 3.4 NO_MODULE QUIET)
  if(TARGET Eigen3::Eigen)
    _syncblob_define_component(eigen)
    target_link_libraries(syncblob_eigen INTERFACE syncblob Eigen3::Eigen)
    # Eigen inside a CUDA translation unit needs relaxed constexpr under nvcc.
    target_compile_options(syncblob_eigen INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  else()
    _syncblob_component_missing(eigen "Eigen 3.4 (Eigen3Config.cmake)")
  endif()
endif()

if(_syncblob_mode_json)
  find_package(nlohmann_json 3.11 QUIET)
  if(TARGET nlohmann_json::nlohmann_json)
    _syncblob_define_component(json)
    target_link_libraries(syncblob_json INTERFACE syncblob nlohmann_json::nlohmann_json)
  else()
    _syncblob_component_missing(json "nlohmann_json 3.11")
  endif()
endif()

# syncblob::cuda needs the CUDA toolkit's headers and libraries; its host headers compile with any
# C++ compiler. SYNCBLOB_BUILD_CUDA_TESTS additionally enables nvcc for syncblob's own CUDA tests.
set(SYNCBLOB_HAS_NVCC OFF)
if(_syncblob_mode_cuda)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    _syncblob_define_component(cuda)
    target_link_libraries(syncblob_cuda INTERFACE syncblob CUDA::cudart CUDA::cublas)
    # CMake 3.25 does not know nvcc 13 speaks C++20 and would silently compile C++17.
    target_compile_options(syncblob_cuda INTERFACE
      $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr>)
    if(SYNCBLOB_BUILD_CUDA_TESTS)
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
  else()
    _syncblob_component_missing(cuda "the CUDA toolkit")
  endif()
endif()

# syncblob::mpi: all-reduce and broadcast of a ParameterArena through MPI's C API
# (syncblob/comm/mpi.hpp). MPI's C++ bindings are not used.
if(_syncblob_mode_mpi)
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI QUIET COMPONENTS CXX)
  if(TARGET MPI::MPI_CXX)
    _syncblob_define_component(mpi)
    target_link_libraries(syncblob_mpi INTERFACE syncblob MPI::MPI_CXX)
  else()
    _syncblob_component_missing(mpi "MPI (a C++ compiler wrapper or MPI_HOME)")
  endif()
endif()

# syncblob::nccl: the same over NCCL (syncblob/comm/nccl.hpp), which comes with the CUDA toolkit.
if(_syncblob_mode_nccl)
  if(NOT TARGET syncblob_cuda)
    _syncblob_component_missing(nccl "syncblob::cuda (SYNCBLOB_ENABLE_CUDA, the CUDA toolkit)")
  else()
    find_library(SYNCBLOB_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(SYNCBLOB_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    mark_as_advanced(SYNCBLOB_NCCL_LIBRARY SYNCBLOB_NCCL_INCLUDE_DIR)
    if(SYNCBLOB_NCCL_LIBRARY AND SYNCBLOB_NCCL_INCLUDE_DIR)
      _syncblob_define_component(nccl)
      # The installed package config finds the library again (syncblob::nccl_library) on the user's machine.
      target_link_libraries(syncblob_nccl INTERFACE syncblob_cuda
        $<BUILD_INTERFACE:${SYNCBLOB_NCCL_LIBRARY}> $<INSTALL_INTERFACE:syncblob::nccl_library>)
      target_include_directories(syncblob_nccl SYSTEM INTERFACE $<BUILD_INTERFACE:${SYNCBLOB_NCCL_INCLUDE_DIR}>)
    else()
      _syncblob_component_missing(nccl "NCCL (libnccl and nccl.h)")
    endif()
  endif()
endif()

message(STATUS "syncblob ${PROJECT_VERSION}: components ${SYNCBLOB_ENABLED_COMPONENTS}")
