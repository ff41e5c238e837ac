# Runs Doxygen and fails when it warned about anything in syncblob's own sources.
get_filename_component(dir ${LOG} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
file(REMOVE ${LOG})
execute_process(COMMAND ${DOXYGEN} ${DOXYFILE} WORKING_DIRECTORY ${SOURCE} RESULT_VARIABLE rc
  OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "doxygen failed (${rc}):\n${out}\n${err}")
endif()
file(READ ${LOG} warnings)
if(NOT warnings STREQUAL "")
  message(FATAL_ERROR "doxygen warnings:\n${warnings}")
endif()
message(STATUS "API reference built without warnings")
