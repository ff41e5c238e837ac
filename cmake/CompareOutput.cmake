# Runs PROGRAM in WORKDIR (through LAUNCHER, words separated by "|" such as mpirun|-np|4, when
# given) and fails unless its standard output equals the file EXPECTED.
string(REPLACE "|" ";" LAUNCHER "${LAUNCHER}")
execute_process(COMMAND ${LAUNCHER} ${PROGRAM} WORKING_DIRECTORY ${WORKDIR}
  OUTPUT_VARIABLE actual ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}\n${actual}\n${errors}")
endif()
if(NOT EXISTS ${EXPECTED})
  message(FATAL_ERROR "no expected output ${EXPECTED}; the program printed:\n${actual}")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  file(WRITE ${WORKDIR}/actual-output.txt "${actual}")
  message(FATAL_ERROR "output of ${PROGRAM} differs from ${EXPECTED}\n--- expected\n${expected}\n--- actual\n${actual}")
endif()
message(STATUS "output matches ${EXPECTED}")
