# vcpkg port of syncblob, used as an overlay: `vcpkg install "syncblob[eigen,json]" --overlay-ports=<syncblob>/ports`.
# It builds from the checkout it sits in, and refuses a checkout whose version is not this port's.
# (A port for a registry needs a published source to name, with vcpkg_from_git or vcpkg_from_github
# and its SHA512; syncblob has no public home yet.) Header-only: one release configuration.
# tests/consumer/recipes.cmake runs this file without vcpkg, once per combination of features.
set(VCPKG_BUILD_TYPE release)
set(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../..")
file(STRINGS "${SOURCE_PATH}/CMakeLists.txt" syncblob_project_version REGEX "^  VERSION [0-9.]+$")
string(STRIP "${syncblob_project_version}" syncblob_project_version)
if(NOT syncblob_project_version STREQUAL "VERSION ${VERSION}")
  message(FATAL_ERROR "the checkout at ${SOURCE_PATH} is syncblob '${syncblob_project_version}', this port is ${VERSION}")
endif()

# Each feature is a component, required when chosen and not even looked up when not.
vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
  FEATURES
    eigen SYNCBLOB_ENABLE_EIGEN
    json  SYNCBLOB_ENABLE_JSON
    cuda  SYNCBLOB_ENABLE_CUDA
    mpi   SYNCBLOB_ENABLE_MPI
    nccl  SYNCBLOB_ENABLE_NCCL)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    ${FEATURE_OPTIONS}
    -DSYNCBLOB_BUILD_TESTS=OFF
    -DSYNCBLOB_BUILD_EXAMPLES=OFF
    -DSYNCBLOB_BUILD_DOCS=OFF
    -DSYNCBLOB_BUILD_BENCHMARKS=OFF
    -DSYNCBLOB_BUILD_FUZZERS=OFF
    -DSYNCBLOB_INSTALL=ON)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME syncblob CONFIG_PATH share/cmake/syncblob)
vcpkg_fixup_pkgconfig()

vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
# syncblob's own install puts its licence under share/licenses; vcpkg keeps it as the copyright.
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/share/licenses")
