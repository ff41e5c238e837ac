# Conan 2 recipe: `conan create . -o "syncblob/*:with_json=True"`.
# Installs through syncblob's own CMake install; the package is header-only.
from conan import ConanFile
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout
from conan.tools.files import copy


class SyncblobConan(ConanFile):
    name = "syncblob"
    version = "0.1.0"
    license = "BSD-2-Clause"
    description = "Header-only C++20 tensor storage mirrored between host and GPU memory"
    topics = ("tensor", "cuda", "caffe", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    options = {"with_eigen": [True, False], "with_json": [True, False]}
    default_options = {"with_eigen": True, "with_json": True}
    exports_sources = "CMakeLists.txt", "cmake/*", "include/*", "LICENSE"
    no_copy_source = True

    def requirements(self):
        if self.options.with_eigen:
            self.requires("eigen/3.4.0")
        if self.options.with_json:
            self.requires("nlohmann_json/3.11.2")

    def layout(self):
        cmake_layout(self)

    def generate(self):
        tc = CMakeToolchain(self)
        tc.cache_variables["SYNCBLOB_BUILD_TESTS"] = False
        tc.cache_variables["SYNCBLOB_BUILD_EXAMPLES"] = False
        tc.cache_variables["SYNCBLOB_ENABLE_CUDA"] = False
        tc.cache_variables["SYNCBLOB_INSTALL"] = True
        tc.generate()

    def package(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.install()
        copy(self, "LICENSE", self.source_folder, self.package_folder + "/licenses")

    def package_id(self):
        self.info.clear()

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "syncblob")
        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "syncblob::syncblob")
        core.bindirs = []
        core.libdirs = []
        if self.settings.os in ("Linux", "FreeBSD"):
            core.system_libs = ["pthread"]
        if self.options.with_eigen:
            eigen = self.cpp_info.components["eigen"]
            eigen.set_property("cmake_target_name", "syncblob::eigen")
            eigen.requires = ["core", "eigen::eigen"]
            eigen.bindirs = []
            eigen.libdirs = []
        if self.options.with_json:
            json = self.cpp_info.components["json"]
            json.set_property("cmake_target_name", "syncblob::json")
            json.requires = ["core", "nlohmann_json::nlohmann_json"]
            json.bindirs = []
            json.libdirs = []
