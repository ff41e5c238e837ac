# The `docs` target (SYNCBLOB_BUILD_DOCS): Doxygen's API reference in <build>/docs/html, with
# warnings in <build>/docs/warnings.log. A test (docs.no_warnings) fails when that log is not empty.
if(NOT EXISTS ${PROJECT_SOURCE_DIR}/docs/Doxyfile.in)
  message(STATUS "syncblob: SYNCBLOB_BUILD_DOCS is ON but this source tree has no docs/: skipped")
  return()
endif()
find_package(Doxygen QUIET)
if(NOT DOXYGEN_FOUND)
  message(STATUS "syncblob: no docs target (Doxygen not found)")
  return()
endif()
set(SYNCBLOB_DOCS_OUTPUT ${PROJECT_BINARY_DIR}/docs)
set(SYNCBLOB_HAVE_DOT NO)
if(DOXYGEN_DOT_FOUND)
  set(SYNCBLOB_HAVE_DOT YES)
endif()
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${SYNCBLOB_DOCS_OUTPUT}/Doxyfile @ONLY)
add_custom_target(docs
  COMMAND ${CMAKE_COMMAND} -E make_directory ${SYNCBLOB_DOCS_OUTPUT}
  COMMAND Doxygen::doxygen ${SYNCBLOB_DOCS_OUTPUT}/Doxyfile
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  COMMENT "syncblob: API reference in ${SYNCBLOB_DOCS_OUTPUT}/html"
  VERBATIM)
if(SYNCBLOB_BUILD_TESTS AND SYNCBLOB_TESTS STREQUAL "all")
  add_test(NAME docs.no_warnings
    COMMAND ${CMAKE_COMMAND} -DDOXYGEN=$<TARGET_FILE:Doxygen::doxygen> -DDOXYFILE=${SYNCBLOB_DOCS_OUTPUT}/Doxyfile
            -DLOG=${SYNCBLOB_DOCS_OUTPUT}/warnings.log -DSOURCE=${PROJECT_SOURCE_DIR}
            -P ${PROJECT_SOURCE_DIR}/cmake/CheckDocs.cmake)
  set_tests_properties(docs.no_warnings PROPERTIES LABELS docs)
endif()

# The state-machine picture of the guide, rendered from its source in docs/.
if(DOXYGEN_DOT_FOUND)
  add_custom_target(diagrams
    COMMAND ${DOXYGEN_DOT_EXECUTABLE} -Tpng -Gdpi=110 ${PROJECT_SOURCE_DIR}/docs/state-machine.dot
            -o ${PROJECT_SOURCE_DIR}/docs/state-machine.png
    COMMENT "syncblob: rendering docs/state-machine.png"
    VERBATIM)
endif()
