#!/usr/bin/env python3
"""Runs syncblob's Conan recipe (conanfile.py) without Conan, which cannot be installed on syncblob's
machines: a stand-in for the few `conan` modules the recipe imports records what the recipe asks for.

    conan_recipe.py exports <source>     the files of exports_sources, as Conan collects them, one a line
    conan_recipe.py options <source>     one JSON line per combination of the recipe's options: whether
                                         validate() accepts it, the CMake cache variables generate() sets,
                                         the requirements, and package_info()'s components
    conan_recipe.py checks <source>      validate() refuses C++17 (gnu17 saying what to set) and gcc 10,
                                         accepts C++20, gnu20, 23; package() installs through CMake,
                                         copies the licence and removes share/
"""
import fnmatch
import importlib.util
import itertools
import json
import os
import pathlib
import sys
import types


class ConanInvalidConfiguration(Exception):
    pass


class _Recorder:
    calls = []


def _record(*args):
    _Recorder.calls.append(args)


class _Value:
    """An option or setting value as a recipe sees it (compares with str, is truthy as Conan's are)."""

    def __init__(self, value):
        self.value = value

    def __bool__(self):
        return str(self.value) not in ("False", "None", "")

    def __eq__(self, other):
        return str(self.value) == str(other)

    def __hash__(self):
        return hash(str(self.value))

    def __str__(self):
        return str(self.value)


class _Bag:
    def __init__(self, values):
        object.__setattr__(self, "_values", {k: _Value(v) for k, v in values.items()})

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        if name.startswith("get_safe"):
            raise AttributeError(name)
        raise AttributeError(f"the recipe reads {name}, which the test does not provide")

    def get_safe(self, name, default=None):
        return object.__getattribute__(self, "_values").get(name, default)

    def rm_safe(self, name):
        object.__getattribute__(self, "_values").pop(name, None)


class _CppInfo:
    def __init__(self):
        self.properties = {}
        self.components = _Components()
        self.requires = []
        self.system_libs = []
        self.bindirs = ["bin"]
        self.libdirs = ["lib"]
        self.includedirs = ["include"]
        self.builddirs = []
        self.defines = []

    def set_property(self, name, value):
        self.properties[name] = value


class _Components(dict):
    def __missing__(self, key):
        self[key] = _CppInfo()
        return self[key]


class _Info:
    def clear(self):
        _record("info.clear")


def _install_stubs():
    conan = types.ModuleType("conan")

    class ConanFile:
        def __init__(self, options, settings):
            self.options = _Bag(options)
            self.settings = _Bag(settings)
            self.cpp_info = _CppInfo()
            self.info = _Info()
            self.source_folder = "<source>"
            self.package_folder = "<package>"
            self.requires_seen = []

        def requires(self, ref, **kwargs):
            self.requires_seen.append(ref)

    conan.ConanFile = ConanFile
    errors = types.ModuleType("conan.errors")
    errors.ConanInvalidConfiguration = ConanInvalidConfiguration
    tools = types.ModuleType("conan.tools")
    cmake = types.ModuleType("conan.tools.cmake")

    class CMakeToolchain:
        def __init__(self, conanfile):
            self.cache_variables = {}
            self.variables = {}

        def generate(self):
            _record("toolchain", dict(self.cache_variables), dict(self.variables))

    class CMakeDeps:
        def __init__(self, conanfile):
            pass

        def generate(self):
            _record("cmakedeps")

    class CMake:
        def __init__(self, conanfile):
            pass

        def configure(self, *args, **kwargs):
            _record("cmake.configure")

        def build(self, *args, **kwargs):
            _record("cmake.build")

        def install(self, *args, **kwargs):
            _record("cmake.install")

    cmake.CMakeToolchain, cmake.CMakeDeps, cmake.CMake = CMakeToolchain, CMakeDeps, CMake
    cmake.cmake_layout = lambda conanfile, **kwargs: _record("cmake_layout")
    files = types.ModuleType("conan.tools.files")
    files.copy = lambda conanfile, pattern, src, dst, **kw: _record("copy", pattern, src, dst)
    files.rmdir = lambda conanfile, path: _record("rmdir", path)
    build = types.ModuleType("conan.tools.build")

    def check_min_cppstd(conanfile, cppstd, gnu_extensions=False):
        value = conanfile.settings.get_safe("compiler.cppstd")
        if value is not None and int(str(value).replace("gnu", "")) < int(cppstd):
            raise ConanInvalidConfiguration(f"needs C++{cppstd}, compiler.cppstd is {value}")

    build.check_min_cppstd = check_min_cppstd
    build.can_run = lambda conanfile: True
    for name, module in {"conan": conan, "conan.errors": errors, "conan.tools": tools, "conan.tools.cmake": cmake,
                         "conan.tools.files": files, "conan.tools.build": build}.items():
        sys.modules[name] = module


def _recipe_class(source):
    _install_stubs()
    spec = importlib.util.spec_from_file_location("syncblob_conanfile", pathlib.Path(source) / "conanfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    classes = [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__]
    if len(classes) != 1:
        raise SystemExit(f"conanfile.py defines {len(classes)} classes, expected the one recipe")
    return classes[0]


def _settings(cppstd="20", version="12"):
    return {"os": "Linux", "arch": "x86_64", "compiler": "gcc", "compiler.version": version, "compiler.cppstd": cppstd,
            "build_type": "Release"}


def exports(source):
    """Conan 2 copies each exports_sources pattern with tools.files.copy: fnmatch on the path relative to
    the recipe's folder (a '*' crosses '/'); a pattern starting with '!' excludes."""
    patterns = _recipe_class(source).exports_sources
    if isinstance(patterns, str):
        patterns = (patterns,)
    include = [p for p in patterns if not p.startswith("!")]
    exclude = [p[1:] for p in patterns if p.startswith("!")]
    root = pathlib.Path(source)
    prefixes = {p.split("/")[0] for p in include}
    found = []
    for top in sorted(root.iterdir()):
        if not any(fnmatch.fnmatch(top.name, prefix) for prefix in prefixes):
            continue  # no pattern can match below it (build folders, .git)
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in paths:
            rel = path.relative_to(root).as_posix()
            if any(fnmatch.fnmatch(rel, p) for p in include) and not any(fnmatch.fnmatch(rel, p) for p in exclude):
                found.append(rel)
    print("\n".join(found))


def options(source):
    recipe = _recipe_class(source)
    names = sorted(recipe.options)
    for values in itertools.product(*(recipe.options[n] for n in names)):
        chosen = dict(zip(names, values))
        conanfile = recipe(chosen, _settings())
        label = ",".join(n.removeprefix("with_") for n in names if str(chosen[n]) == "True")
        result = {"options": {k: str(v) for k, v in chosen.items()}, "label": f"[{label}]"}
        try:
            if hasattr(conanfile, "validate"):
                conanfile.validate()
        except ConanInvalidConfiguration as e:
            result.update(valid=False, reason=str(e))
            print(json.dumps(result))
            continue
        _Recorder.calls.clear()
        conanfile.requirements()
        conanfile.generate()
        toolchain = [c for c in _Recorder.calls if c[0] == "toolchain"]
        conanfile.package_info()
        cache = {k: ("ON" if v is True else "OFF" if v is False else str(v)) for k, v in toolchain[0][1].items()}
        components = {name: {"target": c.properties.get("cmake_target_name"), "requires": list(c.requires)}
                      for name, c in conanfile.cpp_info.components.items()}
        result.update(valid=True, cache_variables=cache, cmakedeps=("cmakedeps",) in _Recorder.calls,
                      requires=conanfile.requires_seen, components=components,
                      file_name=conanfile.cpp_info.properties.get("cmake_file_name"),
                      root_target=conanfile.cpp_info.properties.get("cmake_target_name"))
        print(json.dumps(result))


def checks(source):
    recipe = _recipe_class(source)
    defaults = dict(getattr(recipe, "default_options", {}))
    conanfile = recipe(defaults, _settings("17"))
    if not hasattr(conanfile, "validate"):
        raise SystemExit("conanfile.py has no validate(): nothing refuses a compiler without C++20")
    try:
        conanfile.validate()
        raise SystemExit("validate() accepted compiler.cppstd=17")
    except ConanInvalidConfiguration as e:
        print(f"validate() refuses C++17: {e}")
    # gcc 12's default profile (conan profile detect) says gnu17: refused, with the setting that fixes it.
    try:
        recipe(defaults, _settings("gnu17")).validate()
        raise SystemExit("validate() accepted compiler.cppstd=gnu17")
    except ConanInvalidConfiguration as e:
        if "compiler.cppstd=20" not in str(e):
            raise SystemExit(f"validate() refuses gnu17 without saying how to ask for C++20: {e}")
        print(f"validate() refuses gnu17, saying what to set: {e}")
    for accepted in ("20", "gnu20", "23"):
        recipe(defaults, _settings(accepted)).validate()
    try:
        recipe(defaults, _settings("20", version="10")).validate()
        raise SystemExit("validate() accepted gcc 10")
    except ConanInvalidConfiguration as e:
        print(f"validate() refuses gcc 10: {e}")
    conanfile = recipe(defaults, _settings("20"))
    _Recorder.calls.clear()
    conanfile.package()
    calls = _Recorder.calls
    for needed in [("cmake.configure",), ("cmake.install",)]:
        if needed not in calls:
            raise SystemExit(f"package() does not call {needed[0]}: {calls}")
    removed = [c[1] for c in calls if c[0] == "rmdir"]
    if os.path.join("<package>", "share") not in removed:
        raise SystemExit(f"package() does not remove share/ (removed: {removed})")
    if not any(c[0] == "copy" and c[1] == "LICENSE" for c in calls):
        raise SystemExit("package() does not copy the LICENSE into the package")
    print(f"package() installs through CMake, copies the licence and removes {removed}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("exports", "options", "checks"):
        raise SystemExit(__doc__)
    globals()[sys.argv[1]](sys.argv[2])
