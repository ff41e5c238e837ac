# packaging.subproject: syncblob inside other projects' builds.
#  1. add_subdirectory in a parent that installs a library of its own linking syncblob, with its own
#     install(EXPORT) and package config, with syncblob's defaults; the parent's
#     program runs; the parent is installed, the tree moved, and a downstream project of the parent's
#     package builds and runs there (syncblob comes along through find_dependency).
#  2. FetchContent from a source archive on the local disk, made of the files a package recipe
#     exports (the Conan recipe's exports_sources): the consumer builds and runs.
# Usage: cmake -DSOURCE=... -DCXX=... -DGENERATOR=... -DWORK=... -P subproject.cmake
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
set(here ${CMAKE_CURRENT_LIST_DIR})

# -- 1. add_subdirectory with the parent's own install(EXPORT) ----------------------------------------
sb_run(${WORK} ${CMAKE_COMMAND} -S ${here}/parent -B ${WORK}/parent ${SB_COMMON}
  -DSYNCBLOB_DIR=${SOURCE} -DCMAKE_INSTALL_PREFIX=${WORK}/parent-prefix)
if(EXISTS ${WORK}/parent/syncblob/tests OR EXISTS ${WORK}/parent/syncblob/examples)
  message(FATAL_ERROR "syncblob as a subproject configured its own tests or examples")
endif()
sb_run(${WORK} ${CMAKE_COMMAND} --build ${WORK}/parent)
sb_run(${WORK} ${WORK}/parent/parent_app)
sb_run(${WORK} ${CMAKE_COMMAND} --install ${WORK}/parent)
file(MAKE_DIRECTORY ${WORK}/elsewhere)
file(RENAME ${WORK}/parent-prefix ${WORK}/elsewhere/prefix)
sb_assert_relocatable(${WORK}/elsewhere/prefix ${WORK}/parent-prefix)
sb_consumer(downstream ${here}/parent/downstream downstream -DCMAKE_PREFIX_PATH=${WORK}/elsewhere/prefix)

# -- 2. FetchContent from a local archive -----------------------------------------------------------------
sb_exported_files(files)
sb_copy_files(${SOURCE} ${WORK}/syncblob-src ${files})
sb_run(${WORK} ${CMAKE_COMMAND} -E tar czf ${WORK}/syncblob-src.tar.gz syncblob-src)
sb_consumer(fetchcontent ${here}/fetchcontent consumer -DSYNCBLOB_URL=${WORK}/syncblob-src.tar.gz)
