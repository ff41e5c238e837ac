# packaging.install: syncblob installed, the installed tree moved, and consumers built and run there.
#  1. Configure syncblob as a package recipe would (tests, examples, docs off), showing that none of
#     the tools of syncblob's own builds is even looked up (--debug-find-pkg prints nothing for them);
#     install to one prefix; move the tree to another path; check no installed file names the first.
#  2. From the moved tree: find_package without components, find_package(COMPONENTS eigen json),
#     pkg-config (with nothing but its flags), and a misspelt component, which must fail naming it.
#  3. The build-tree export: a consumer given -Dsyncblob_DIR=<syncblob's build folder>.
#  4. A machine with only CMake, a compiler and Eigen: every other package hidden
#     (CMAKE_DISABLE_FIND_PACKAGE_<name>), the defaults otherwise; it installs core + eigen only, and
#     asking it for json fails naming json as not installed.
# (The core with nothing but -I include: packaging.readme runs the README's command for it.)
# Usage: cmake -DSOURCE=... -DCXX=... -DGENERATOR=... -DWORK=... -P install.cmake
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
set(here ${CMAKE_CURRENT_LIST_DIR})

# -- 1. configure (no tool of syncblob's own builds looked up), install, move --------------------------
set(own_tools Catch2 Torch pybind11 Python Python3 Doxygen benchmark GTest)
list(JOIN own_tools "," own_tools_csv)
sb_run(${WORK} ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/build ${SB_COMMON}
  -DSYNCBLOB_BUILD_TESTS=OFF -DSYNCBLOB_BUILD_EXAMPLES=OFF -DSYNCBLOB_BUILD_DOCS=OFF
  -DSYNCBLOB_ENABLE_EIGEN=ON -DSYNCBLOB_ENABLE_JSON=ON
  -DCMAKE_INSTALL_PREFIX=${WORK}/first-prefix --debug-find-pkg=${own_tools_csv})
foreach(tool IN LISTS own_tools)
  if(SB_OUTPUT MATCHES "Find${tool}\\.cmake|${tool}Config\\.cmake|${tool}-config\\.cmake")
    message(FATAL_ERROR "configuring for an install looked for ${tool}:\n${SB_OUTPUT}")
  endif()
endforeach()
sb_run(${WORK} ${CMAKE_COMMAND} --install ${WORK}/build)
file(MAKE_DIRECTORY ${WORK}/elsewhere)
file(RENAME ${WORK}/first-prefix ${WORK}/elsewhere/prefix)
set(prefix ${WORK}/elsewhere/prefix)
sb_assert_relocatable(${prefix} ${WORK}/first-prefix)
foreach(file include/syncblob/syncblob.hpp share/licenses/syncblob/LICENSE share/pkgconfig/syncblob.pc
             share/cmake/syncblob/syncblobConfig.cmake share/cmake/syncblob/syncblob-eigen-targets.cmake
             share/cmake/syncblob/syncblob-json-targets.cmake)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "the install put no ${file}")
  endif()
endforeach()

# -- 2. consumers of the moved tree --------------------------------------------------------------------
sb_consumer(find-package ${here}/project consumer -DCMAKE_PREFIX_PATH=${prefix})
sb_consumer(find-components ${here}/components consumer_components -DCMAKE_PREFIX_PATH=${prefix})

find_program(PKG_CONFIG pkg-config REQUIRED)
sb_run(${WORK} ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/share/pkgconfig ${PKG_CONFIG} --cflags --libs syncblob)
string(STRIP "${SB_OUTPUT}" pc_flags)
if(pc_flags MATCHES "-std=")  # the user's build chooses the standard (C++20 or newer)
  message(FATAL_ERROR "the pkg-config flags choose a language standard for their user: ${pc_flags}")
endif()
if(NOT pc_flags MATCHES "-I${prefix}/share/pkgconfig/\\.\\./\\.\\./include( |$)")
  message(FATAL_ERROR "the pkg-config flags do not point into the moved tree ${prefix}: ${pc_flags}")
endif()
separate_arguments(pc_list UNIX_COMMAND "${pc_flags}")
sb_run(${WORK} ${CXX} -std=c++20 ${here}/project/main.cpp ${pc_list} -o ${WORK}/consumer_pkg_config)
sb_run(${WORK} ${WORK}/consumer_pkg_config)
message(STATUS "pkg-config: built and ran the consumer with ${pc_flags}: ${SB_OUTPUT}")

file(WRITE ${WORK}/misspelt/CMakeLists.txt "cmake_minimum_required(VERSION 3.25)\nproject(misspelt LANGUAGES CXX)\n"
  "find_package(syncblob CONFIG REQUIRED COMPONENTS eigen jsn)\n")
sb_run_fails("unknown component 'jsn'" ${WORK}
  ${CMAKE_COMMAND} -S ${WORK}/misspelt -B ${WORK}/misspelt/build ${SB_COMMON} -DCMAKE_PREFIX_PATH=${prefix})
message(STATUS "a misspelt component fails, naming it")

# -- 3. the build-tree export ----------------------------------------------------------------------------
sb_consumer(build-tree ${here}/project consumer -Dsyncblob_DIR=${WORK}/build)

# -- 4. only CMake, a compiler and Eigen -------------------------------------------------------------------
set(hidden "")
foreach(package Catch2 Torch pybind11 Python Python3 Doxygen benchmark MPI nlohmann_json CUDAToolkit)
  list(APPEND hidden -DCMAKE_DISABLE_FIND_PACKAGE_${package}=ON)
endforeach()
sb_run(${WORK} ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/minimal-build ${SB_COMMON} ${hidden}
  -DSYNCBLOB_BUILD_TESTS=OFF -DSYNCBLOB_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_PREFIX=${WORK}/minimal)
sb_run(${WORK} ${CMAKE_COMMAND} --install ${WORK}/minimal-build)
file(GLOB installed RELATIVE ${WORK}/minimal/share/cmake/syncblob ${WORK}/minimal/share/cmake/syncblob/syncblob-*-targets.cmake)
if(NOT installed STREQUAL "syncblob-eigen-targets.cmake")
  message(FATAL_ERROR "with only Eigen found, the install has these component files: ${installed}")
endif()
file(WRITE ${WORK}/not-installed/CMakeLists.txt "cmake_minimum_required(VERSION 3.25)\nproject(ni LANGUAGES CXX)\n"
  "find_package(syncblob CONFIG REQUIRED COMPONENTS json)\n")
sb_run_fails("component 'json' was not installed" ${WORK}
  ${CMAKE_COMMAND} -S ${WORK}/not-installed -B ${WORK}/not-installed/build ${SB_COMMON} -DCMAKE_PREFIX_PATH=${WORK}/minimal)
message(STATUS "only CMake, a compiler and Eigen: core and eigen installed; asking for json fails, naming it")
