# packaging.readme: README.md says what is true.
#  1. Its install and use commands (each ```sh block after a "<!-- packaging.readme: run -->" line)
#     run as written, in order, in one shell, in a copy of this checkout, with HOME a fresh folder.
#  2. Its component table agrees with include/ (readme_check.py table): the headers exist, the core
#     row's need nothing but -I include, and every name it gives is declared.
# Usage: cmake -DSOURCE=... -DCXX=... -DGENERATOR=... -DWORK=... -P readme.cmake
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
find_program(SB_PYTHON NAMES python3 REQUIRED)
find_program(BASH bash REQUIRED)

# -- 1. the commands ------------------------------------------------------------------------------------
sb_run(${WORK} ${SB_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/readme_check.py commands ${SOURCE})
file(WRITE ${WORK}/readme-commands.sh "${SB_OUTPUT}")
set(checkout ${WORK}/checkout)
file(COPY ${SOURCE}/ DESTINATION ${checkout} PATTERN .git EXCLUDE PATTERN build EXCLUDE PATTERN "build-*" EXCLUDE)
file(MAKE_DIRECTORY ${WORK}/home)
sb_run(${checkout} ${CMAKE_COMMAND} -E env HOME=${WORK}/home ${BASH} ${WORK}/readme-commands.sh)
foreach(expected include/syncblob/syncblob.hpp share/cmake/syncblob/syncblobConfig.cmake share/pkgconfig/syncblob.pc)
  if(NOT EXISTS ${WORK}/home/.local/${expected})
    message(FATAL_ERROR "the README's install put no ${expected} under \$HOME/.local")
  endif()
endforeach()
file(READ ${WORK}/readme-commands.sh script)
message(STATUS "README: its commands ran as written:\n${script}")

# -- 2. the component table ------------------------------------------------------------------------------
sb_run(${WORK} ${SB_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/readme_check.py table ${SOURCE} ${CXX})
message(STATUS "${SB_OUTPUT}")
