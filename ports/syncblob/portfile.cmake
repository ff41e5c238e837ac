# vcpkg overlay port: `vcpkg install syncblob[eigen,json] --overlay-ports=<syncblob>/ports`.
# It builds from the checkout it sits in and installs through syncblob's own CMake install.
set(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../..")

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    -DSYNCBLOB_BUILD_TESTS=OFF
    -DSYNCBLOB_BUILD_EXAMPLES=OFF
    -DSYNCBLOB_BUILD_BENCHMARKS=OFF
    -DSYNCBLOB_ENABLE_CUDA=OFF
    -DSYNCBLOB_INSTALL=ON)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME syncblob CONFIG_PATH share/cmake/syncblob)
vcpkg_fixup_pkgconfig()

# Header-only: nothing is built for debug.
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
# syncblob's own install puts its licence under share/licenses; vcpkg keeps it as the copyright.
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/share/licenses")
