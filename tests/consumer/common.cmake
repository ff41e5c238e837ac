# Helpers of the packaging tests (cmake -P scripts). Each test is given:
#   SOURCE     the syncblob checkout        CXX        the C++ compiler
#   GENERATOR  the CMake generator          WORK       a folder of its own (emptied first)
cmake_minimum_required(VERSION 3.25)
foreach(var SOURCE CXX GENERATOR WORK)
  if(NOT ${var})
    message(FATAL_ERROR "${CMAKE_CURRENT_LIST_FILE}: pass -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
# The user's own environment must not find anything for the consumers: only what the test names.
unset(ENV{CMAKE_PREFIX_PATH})
unset(ENV{PKG_CONFIG_PATH})
unset(ENV{syncblob_DIR})
unset(ENV{CMAKE_INSTALL_PREFIX})

# The options a configuration of a consumer or of syncblob gets in every case.
set(SB_COMMON -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX})

# sb_run(<dir> <command...>): runs the command in <dir>; fails the test with its output when it fails.
function(sb_run dir)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${dir} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "failed (${rc}) in ${dir}: ${command}\n${out}\n${err}")
  endif()
  set(SB_OUTPUT "${out}${err}" PARENT_SCOPE)
endfunction()

# sb_run_fails(<regex> <dir> <command...>): the command must fail and print something matching <regex>.
function(sb_run_fails regex dir)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${dir} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(JOIN ARGN " " command)
  if(rc EQUAL 0)
    message(FATAL_ERROR "expected to fail, but succeeded: ${command}\n${out}\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "failed as expected, but without '${regex}' in its output: ${command}\n${out}\n${err}")
  endif()
  set(SB_OUTPUT "${out}${err}" PARENT_SCOPE)
endfunction()

# sb_consumer(<name> <source dir> <program> [cmake options...]): configures, builds and runs a consumer.
function(sb_consumer name source program)
  set(build ${WORK}/${name})
  sb_run(${WORK} ${CMAKE_COMMAND} -S ${source} -B ${build} ${SB_COMMON} ${ARGN})
  sb_run(${WORK} ${CMAKE_COMMAND} --build ${build})
  sb_run(${build} ${build}/${program})
  string(STRIP "${SB_OUTPUT}" printed)
  message(STATUS "${name}: built and ran ${program}: ${printed}")
  set(SB_OUTPUT "${SB_OUTPUT}" PARENT_SCOPE)
endfunction()

# sb_assert_relocatable(<tree> <old path>): no file of an installed tree names the folder it was
# installed to.
function(sb_assert_relocatable tree old_path)
  file(GLOB_RECURSE files ${tree}/*)
  foreach(file IN LISTS files)
    file(READ ${file} text)
    string(FIND "${text}" "${old_path}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${file} names the folder it was installed to (${old_path}): it would break once moved")
    endif()
  endforeach()
endfunction()

# sb_exported_files(<out var>): the files of the Conan recipe's exports_sources, relative to SOURCE,
# as Conan collects them (its patterns, through fnmatch on paths relative to the recipe's folder).
function(sb_exported_files out)
  find_program(SB_PYTHON NAMES python3 REQUIRED)
  sb_run(${SOURCE} ${SB_PYTHON} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/conan_recipe.py exports ${SOURCE})
  string(STRIP "${SB_OUTPUT}" files)
  string(REPLACE "\n" ";" files "${files}")
  set(${out} ${files} PARENT_SCOPE)
endfunction()

# sb_copy_files(<from> <to> <relative paths...>)
function(sb_copy_files from to)
  foreach(file IN LISTS ARGN)
    get_filename_component(dir ${to}/${file} DIRECTORY)
    file(MAKE_DIRECTORY ${dir})
    file(COPY_FILE ${from}/${file} ${to}/${file})
  endforeach()
endfunction()
