# Conan 2 recipe: `conan create . -o "syncblob/*:with_mpi=True"`. Header-only: the package is
# syncblob's own CMake install (headers and licence); its CMake targets come from CMakeDeps, built
# from package_info() below, with the same names as syncblob's own package config.
# Options: one per optional component (syncblob::eigen, ::json, ::cuda, ::mpi, ::nccl), each passed to
# CMake as SYNCBLOB_ENABLE_<COMPONENT>=ON (required) or OFF (not looked up). Eigen and nlohmann_json
# come from Conan; the CUDA toolkit (with NCCL) and MPI from the system, found by find_package on the
# consumer's side (cmake/conan/syncblob-system-deps.cmake).
# tests/consumer/recipes.cmake runs this recipe without Conan: its exported files configured and
# installed, and each combination of options configured.
import os

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.build import check_min_cppstd
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout
from conan.tools.files import copy, rmdir

# component -> (CMake variable, Conan requirement or None: found on the system)
_COMPONENTS = {
    "eigen": ("SYNCBLOB_ENABLE_EIGEN", "eigen/3.4.0"),
    "json": ("SYNCBLOB_ENABLE_JSON", "nlohmann_json/3.11.2"),
    "cuda": ("SYNCBLOB_ENABLE_CUDA", None),
    "mpi": ("SYNCBLOB_ENABLE_MPI", None),
    "nccl": ("SYNCBLOB_ENABLE_NCCL", None),
}
# The requirements' components as their Conan Center recipes declare them: Eigen's recipe has one
# component, "eigen3" (its CMake target Eigen3::Eigen); nlohmann_json's has none (the package itself).
_REQUIRED_TARGETS = {"eigen": "eigen::eigen3", "json": "nlohmann_json::nlohmann_json"}


class SyncblobConan(ConanFile):
    name = "syncblob"
    version = "0.2.0"
    license = "BSD-2-Clause"
    description = "Header-only C++20 tensor storage mirrored between host and GPU memory"
    topics = ("tensor", "cuda", "caffe", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    options = {f"with_{c}": [True, False] for c in _COMPONENTS}
    default_options = {"with_eigen": True, "with_json": True, "with_cuda": False, "with_mpi": False,
                       "with_nccl": False}
    # Everything syncblob's CMake configuration and install read with tests, examples, docs and
    # benchmarks off (tests/consumer/recipes.cmake configures and installs exactly these files).
    exports_sources = "CMakeLists.txt", "cmake/*", "include/*", "LICENSE"
    no_copy_source = True

    def layout(self):
        cmake_layout(self)

    def requirements(self):
        for component, (_, requirement) in _COMPONENTS.items():
            if requirement and self.options.get_safe(f"with_{component}"):
                self.requires(requirement)

    # The compilers syncblob's CI builds with, warning-free: older ones lack parts of C++20 it uses.
    _compilers_minimum_version = {"gcc": 12, "clang": 14}

    def validate(self):
        # A header-only library compiles with its consumer's standard: the profile's must be C++20.
        # `conan profile detect` writes gcc 12's default, gnu17; say how to ask for C++20.
        try:
            check_min_cppstd(self, 20)
        except ConanInvalidConfiguration as e:
            raise ConanInvalidConfiguration(
                f"syncblob needs C++20: {e}. Set compiler.cppstd=20 (or gnu20) in the profile, or pass "
                "-s compiler.cppstd=20") from e
        compiler = str(self.settings.compiler)
        minimum = self._compilers_minimum_version.get(compiler)
        version = str(self.settings.get_safe("compiler.version") or "")
        if minimum and version and int(version.split(".")[0]) < minimum:
            raise ConanInvalidConfiguration(f"syncblob needs {compiler} {minimum} or newer (C++20), not {version}")
        if self.options.with_nccl and not self.options.with_cuda:
            raise ConanInvalidConfiguration("syncblob: with_nccl needs with_cuda (NCCL runs on CUDA devices)")

    def package_id(self):
        self.info.clear()

    def generate(self):
        tc = CMakeToolchain(self)
        for variable in ("SYNCBLOB_BUILD_TESTS", "SYNCBLOB_BUILD_EXAMPLES", "SYNCBLOB_BUILD_DOCS",
                         "SYNCBLOB_BUILD_BENCHMARKS", "SYNCBLOB_BUILD_FUZZERS"):
            tc.cache_variables[variable] = "OFF"
        tc.cache_variables["SYNCBLOB_INSTALL"] = "ON"
        for component, (variable, _) in _COMPONENTS.items():
            tc.cache_variables[variable] = "ON" if self.options.get_safe(f"with_{component}") else "OFF"
        tc.generate()
        CMakeDeps(self).generate()

    def package(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.install()
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        # Conan makes the CMake and pkg-config files from package_info(); the licence is in licenses/.
        rmdir(self, os.path.join(self.package_folder, "share"))
        copy(self, "syncblob-system-deps.cmake", os.path.join(self.source_folder, "cmake", "conan"),
             os.path.join(self.package_folder, "lib", "cmake", "syncblob"))

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "syncblob")
        # The package-wide target links every component. It must not be syncblob::syncblob, the core's
        # name (and syncblob's own package config has no such target: link components by name).
        self.cpp_info.set_property("cmake_target_name", "syncblob::all_components")
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "syncblob::syncblob")
        core.set_property("pkg_config_name", "syncblob")
        core.bindirs = []
        core.libdirs = []
        if self.settings.os in ("Linux", "FreeBSD"):
            core.system_libs = ["pthread"]
        system = False
        for component in _COMPONENTS:
            if not self.options.get_safe(f"with_{component}"):
                continue
            info = self.cpp_info.components[component]
            info.set_property("cmake_target_name", f"syncblob::{component}")
            info.bindirs = []
            info.libdirs = []
            info.includedirs = []
            info.requires = ["cuda"] if component == "nccl" else ["core"]
            if component in _REQUIRED_TARGETS:
                info.requires.append(_REQUIRED_TARGETS[component])
            else:
                system = True
        if system:
            # The CUDA toolkit, NCCL and MPI are the system's: a CMake module, run when the package
            # is found, looks them up and links them to syncblob::cuda, ::nccl and ::mpi.
            self.cpp_info.set_property("cmake_build_modules",
                                       [os.path.join("lib", "cmake", "syncblob", "syncblob-system-deps.cmake")])
