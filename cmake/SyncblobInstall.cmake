# Install rules: headers, one export set per target, and a relocatable package config whose
# optional components (eigen, json, cuda, mpi, nccl) are defined when their dependency is found.
include(CMakePackageConfigHelpers)

set(SYNCBLOB_CMAKE_DIR ${CMAKE_INSTALL_DATADIR}/cmake/syncblob)
install(DIRECTORY include/syncblob DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(TARGETS syncblob EXPORT syncblobTargets)
install(EXPORT syncblobTargets NAMESPACE syncblob:: DESTINATION ${SYNCBLOB_CMAKE_DIR})
foreach(component eigen json cuda mpi nccl)
  if(TARGET syncblob_${component})
    install(TARGETS syncblob_${component} EXPORT syncblob-${component}-targets)
    install(EXPORT syncblob-${component}-targets NAMESPACE syncblob:: DESTINATION ${SYNCBLOB_CMAKE_DIR})
  endif()
endforeach()

configure_package_config_file(cmake/syncblobConfig.cmake.in
  ${PROJECT_BINARY_DIR}/syncblobConfig.cmake
  INSTALL_DESTINATION ${SYNCBLOB_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/syncblobConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/syncblobConfig.cmake ${PROJECT_BINARY_DIR}/syncblobConfigVersion.cmake
  DESTINATION ${SYNCBLOB_CMAKE_DIR})

install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/licenses/syncblob)

# pkg-config, for builds without CMake (core only; add Eigen / nlohmann_json / CUDA flags yourself).
# It names no language standard (syncblob needs C++20 or newer: the user's build chooses which).
configure_file(cmake/syncblob.pc.in ${PROJECT_BINARY_DIR}/syncblob.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/syncblob.pc DESTINATION ${CMAKE_INSTALL_DATADIR}/pkgconfig)
