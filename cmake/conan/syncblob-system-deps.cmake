# Conan package only (conanfile.py): links the system dependencies of syncblob's components to the
# targets Conan's CMakeDeps made from package_info(), as syncblob's own package config does.
#   syncblob::cuda  the CUDA toolkit (CUDA::cudart, CUDA::cublas), -std=c++20 for nvcc
#   syncblob::nccl  NCCL from the CUDA toolkit
#   syncblob::mpi   MPI's C API (MPI::MPI_CXX)
if(TARGET syncblob::cuda)
  find_package(CUDAToolkit REQUIRED)
  set_property(TARGET syncblob::cuda APPEND PROPERTY INTERFACE_LINK_LIBRARIES CUDA::cudart CUDA::cublas)
  set_property(TARGET syncblob::cuda APPEND PROPERTY INTERFACE_COMPILE_OPTIONS
    $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr>)
endif()
if(TARGET syncblob::nccl)
  find_library(syncblob_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  find_path(syncblob_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
  set_property(TARGET syncblob::nccl APPEND PROPERTY INTERFACE_LINK_LIBRARIES ${syncblob_NCCL_LIBRARY})
  set_property(TARGET syncblob::nccl APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${syncblob_NCCL_INCLUDE_DIR})
endif()
if(TARGET syncblob::mpi)
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI REQUIRED COMPONENTS CXX)
  set_property(TARGET syncblob::mpi APPEND PROPERTY INTERFACE_LINK_LIBRARIES MPI::MPI_CXX)
endif()
