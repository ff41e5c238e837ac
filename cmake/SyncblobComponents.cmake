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
