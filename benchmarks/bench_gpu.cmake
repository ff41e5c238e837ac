# The GPU benchmark (bench_gpu.cu, nvcc, its own harness: no Google Benchmark): syncblob against the
# same CUDA written by hand, each figure a ratio to a baseline measured in the same run. Built where
# nvcc is enabled and NCCL and nlohmann/json are found, by the benchmarks (-DSYNCBLOB_BUILD_BENCHMARKS=ON)
# and, where those are off, with the CUDA tests (the top-level CMakeLists.txt: the "cuda" preset, so
# that CI compiles it); scripts/gpu-check packs it and runs it on a GPU. Either way it lands in
# <build>/benchmarks.
if(SYNCBLOB_HAS_NVCC AND TARGET syncblob::nccl AND TARGET syncblob::json AND TARGET syncblob::eigen)
  add_executable(bench_gpu ${CMAKE_CURRENT_LIST_DIR}/bench_gpu.cu)
  target_link_libraries(bench_gpu PRIVATE syncblob::nccl syncblob::json syncblob::eigen syncblob_dev_flags)
  target_compile_options(bench_gpu PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wshadow,-Wconversion,-Wsign-conversion>)
  set_target_properties(bench_gpu PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/benchmarks)
endif()
