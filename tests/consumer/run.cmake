cmake_minimum_required(VERSION 3.25)  # policies of the CMake syncblob requires (IN_LIST, ...)
# Builds tests/consumer/project against syncblob, as a user would.
#   MODE=find_package: install syncblob from SOURCE into a temporary prefix (checking its LICENSE and
#   pkg-config file, and building the consumer with pkg-config's flags), then find_package it.
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
  if(NOT EXISTS ${work}/prefix/share/licenses/syncblob/LICENSE)
    message(FATAL_ERROR "the install put no LICENSE in share/licenses/syncblob")
  endif()
  # pkg-config, as a build without CMake uses it: the flags it gives must build the consumer and
  # must not choose the user's language standard or repeat a flag.
  find_program(PKG_CONFIG pkg-config REQUIRED)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${work}/prefix/share/pkgconfig
                          ${PKG_CONFIG} --cflags --libs syncblob
                  RESULT_VARIABLE rc OUTPUT_VARIABLE pc_flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs syncblob failed: ${err}")
  endif()
  if(pc_flags MATCHES "-std=")
    message(FATAL_ERROR "the pkg-config flags choose a language standard for their user: ${pc_flags}")
  endif()
  separate_arguments(pc_list UNIX_COMMAND "${pc_flags}")
  set(seen "")
  foreach(flag IN LISTS pc_list)
    if(flag IN_LIST seen)
      message(FATAL_ERROR "the pkg-config flags repeat ${flag}: ${pc_flags}")
    endif()
    list(APPEND seen ${flag})
  endforeach()
  run(${CXX} -std=c++20 ${pc_list} ${SOURCE}/tests/consumer/project/main.cpp -o ${work}/consumer_pkg_config)
  run(${work}/consumer_pkg_config)
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
