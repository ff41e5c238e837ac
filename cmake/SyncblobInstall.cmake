# Install rules and the build-tree package config.
#
# Installed (all paths relative, so an installed tree can be moved anywhere):
#   include/syncblob/...                      the headers
#   share/cmake/syncblob/                     syncblobConfig.cmake, its version file, syncblobTargets.cmake
#                                             and one syncblob-<component>-targets.cmake per enabled component
#   share/pkgconfig/syncblob.pc               the core, for builds without CMake (prefix from ${pcfiledir})
#   share/licenses/syncblob/LICENSE
# In the build folder: the same package config over the build tree (export()), so that
# -Dsyncblob_DIR=<build folder> works without installing.
include(CMakePackageConfigHelpers)

set(SYNCBLOB_CMAKE_DIR ${CMAKE_INSTALL_DATADIR}/cmake/syncblob)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/syncblob DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(TARGETS syncblob EXPORT syncblobTargets)
install(EXPORT syncblobTargets NAMESPACE syncblob:: DESTINATION ${SYNCBLOB_CMAKE_DIR})
export(EXPORT syncblobTargets NAMESPACE syncblob:: FILE ${PROJECT_BINARY_DIR}/syncblobTargets.cmake)
foreach(component IN LISTS SYNCBLOB_ENABLED_COMPONENTS)
  install(TARGETS syncblob_${component} EXPORT syncblob-${component}-targets)
  install(EXPORT syncblob-${component}-targets NAMESPACE syncblob:: DESTINATION ${SYNCBLOB_CMAKE_DIR})
  export(EXPORT syncblob-${component}-targets NAMESPACE syncblob::
    FILE ${PROJECT_BINARY_DIR}/syncblob-${component}-targets.cmake)
endforeach()
# A component file left in the build folder by an earlier configuration with more components
# would be loaded by the build-tree config: remove those no longer enabled.
foreach(component IN LISTS SYNCBLOB_COMPONENTS)
  if(NOT component IN_LIST SYNCBLOB_ENABLED_COMPONENTS)
    file(REMOVE ${PROJECT_BINARY_DIR}/syncblob-${component}-targets.cmake)
  endif()
endforeach()

# The same template twice: for the install tree and for the build tree.
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/syncblobConfig.cmake.in
  ${PROJECT_BINARY_DIR}/syncblob-install/syncblobConfig.cmake
  INSTALL_DESTINATION ${SYNCBLOB_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/syncblobConfig.cmake.in
  ${PROJECT_BINARY_DIR}/syncblobConfig.cmake
  INSTALL_DESTINATION ${PROJECT_BINARY_DIR}
  INSTALL_PREFIX ${PROJECT_BINARY_DIR})
# 0.x: a minor version may break what the one before offered; patch versions do not (CHANGELOG.md).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/syncblobConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/syncblob-install/syncblobConfig.cmake
              ${PROJECT_BINARY_DIR}/syncblobConfigVersion.cmake
  DESTINATION ${SYNCBLOB_CMAKE_DIR})

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/licenses/syncblob)

# pkg-config, for builds without CMake (core only; add Eigen / nlohmann_json / CUDA flags yourself).
# It names no language standard (syncblob needs C++20 or newer: the user's build chooses which).
# Its prefix is computed from its own folder (${pcfiledir}), so the installed tree can be moved.
set(SYNCBLOB_PC_DIR ${CMAKE_INSTALL_DATADIR}/pkgconfig)
cmake_path(IS_ABSOLUTE SYNCBLOB_PC_DIR _pc_dir_absolute)
cmake_path(IS_ABSOLUTE CMAKE_INSTALL_INCLUDEDIR _include_absolute)
if(_pc_dir_absolute)
  set(SYNCBLOB_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")  # an absolute data folder: not relocatable
else()
  # One ".." per component of the pkgconfig folder's path below the prefix.
  string(REGEX REPLACE "[^/]+" ".." _up "${SYNCBLOB_PC_DIR}")
  set(SYNCBLOB_PC_PREFIX "\${pcfiledir}/${_up}")
endif()
if(_include_absolute)
  set(SYNCBLOB_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(SYNCBLOB_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/syncblob.pc.in ${PROJECT_BINARY_DIR}/syncblob.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/syncblob.pc DESTINATION ${SYNCBLOB_PC_DIR})
