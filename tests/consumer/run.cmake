# Builds tests/consumer/project against syncblob, as a user would.
#   MODE=find_package: install syncblob from SOURCE into a temporary prefix, then find_package it.
#   MODE=add_subdirectory: add SOURCE as a subdirectory.
# Then runs the consumer programs.
set(work ${BINARY}/consumer-${MODE})
file(REMOVE_RECURSE ${work})
file(MAKE_DIRECTORY ${work})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

set(common -G Ninja -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release)
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${SOURCE} -B ${work}/syncblob-build ${common} -DSYNCBLOB_ENABLE_CUDA=OFF
      -DSYNCBLOB_BUILD_TESTS=OFF -DSYNCBLOB_BUILD_EXAMPLES=OFF
      -DCMAKE_INSTALL_PREFIX=${work}/prefix)
  run(${CMAKE_COMMAND} --install ${work}/syncblob-build)
  if(NOT EXISTS ${work}/prefix/share/pkgconfig/syncblob.pc)
    message(FATAL_ERROR "the install put no pkg-config file in share/pkgconfig")
  endif()
  run(${CMAKE_COMMAND} -S ${SOURCE}/tests/consumer/project -B ${work}/consumer ${common}
      -DCMAKE_PREFIX_PATH=${work}/prefix)
else()
  run(${CMAKE_COMMAND} -S ${SOURCE}/tests/consumer/project -B ${work}/consumer ${common}
      -DSYNCBLOB_SOURCE_DIR=${SOURCE} -DSYNCBLOB_ENABLE_CUDA=OFF)
endif()
run(${CMAKE_COMMAND} --build ${work}/consumer -j2)
run(${work}/consumer/consumer)
if(EXISTS ${work}/consumer/consumer_eigen)
  run(${work}/consumer/consumer_eigen)
endif()
message(STATUS "consumer via ${MODE}: built and ran")
