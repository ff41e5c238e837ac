# Settings for syncblob's own tests, examples, benchmarks and fuzzers (never for consumers):
# syncblob_dev_flags = syncblob_warnings (as errors with SYNCBLOB_WERROR) + sanitizers. Code loaded
# into a program syncblob does not build (a Python extension) takes the warnings only.

set(CMAKE_CXX_EXTENSIONS OFF)

add_library(syncblob_warnings INTERFACE)
target_compile_options(syncblob_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SYNCBLOB_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SYNCBLOB_WERROR}>>:--Werror=all-warnings -Xcompiler=-Werror>)

# Sanitizers apply to everything syncblob builds for itself, third-party code compiled in included.
add_library(syncblob_sanitize INTERFACE)
if(SYNCBLOB_SANITIZE)
  target_compile_options(syncblob_sanitize INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${SYNCBLOB_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all>)
  target_link_options(syncblob_sanitize INTERFACE -fsanitize=${SYNCBLOB_SANITIZE})
endif()
add_library(syncblob_dev_flags INTERFACE)
target_link_libraries(syncblob_dev_flags INTERFACE syncblob_warnings syncblob_sanitize)

# Finds a Python interpreter that can import numpy (Debian's own, not the first python3 on PATH).
function(syncblob_find_numpy_python out)
  set(candidates /usr/bin/python3 python3)
  foreach(candidate IN LISTS candidates)
    find_program(_py NAMES ${candidate} NO_CACHE)
    if(_py)
      execute_process(COMMAND ${_py} -c "import numpy" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(${out} ${_py} PARENT_SCOPE)
        return()
      endif()
    endif()
    unset(_py)
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# The environment of tests run through mpirun. Open MPI leaks some of its own memory at exit and
# unloads its plugins (Open MPI's and PMIx's) first, so LeakSanitizer could not name them: keep them
# loaded, unwind fully, and let tests/support/openmpi.lsan.supp suppress Open MPI's libraries.
set(SYNCBLOB_OPENMPI_TEST_ENVIRONMENT
  "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/support/openmpi.lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
  "OMPI_MCA_mca_base_component_disable_dlclose=1"
  "PMIX_MCA_mca_base_component_disable_dlclose=1")
