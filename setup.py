"""The CMake build behind `pip install .` (pyproject.toml has the package's metadata).

The extension pinpool._pinpool and the library it links (libpinpool.so.<major>, installed beside
it: its RPATH is $ORIGIN) are built by this tree's CMake (python/CMakeLists.txt with
PINPOOL_PYTHON_WHEEL) for the interpreter that runs pip; the pure-Python modules are setuptools'
own. Needs CMake, a C++20 compiler, pybind11 and the library's dependencies (Debian:
scripts/setup-deps.sh --python); nothing is downloaded.

Environment: CMAKE_ARGS adds configure arguments (say -DCMAKE_CXX_COMPILER_LAUNCHER=ccache);
PINPOOL_PIP_BUILD_DIR is where setuptools and CMake build (default: build-pip/ in the checkout).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("PINPOOL_PIP_BUILD_DIR", os.path.join(SOURCE, "build-pip")))


def version():
    # The release's major version is the ABI version (CMakeLists.txt; docs/abi.md).
    with open(os.path.join(SOURCE, "include", "pinpool", "abi.h")) as f:
        abi = re.search(r"^#define PINPOOL_ABI_VERSION ([0-9]+)$", f.read(), re.M).group(1)
    return f"{abi}.0.0"


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        cmake_build = os.path.join(BUILD, "cmake")
        stage = os.path.join(BUILD, "stage")
        configure = [
            "cmake", "-S", SOURCE, "-B", cmake_build, "-DCMAKE_BUILD_TYPE=Release",
            f"-DPINPOOL_PYTHON={sys.executable}", "-DPINPOOL_BUILD_PYTHON=ON",
            "-DPINPOOL_PYTHON_WHEEL=ON", "-DPINPOOL_BUILD_TESTS=OFF",
            "-DPINPOOL_BUILD_BENCHMARKS=OFF", "-DPINPOOL_BUILD_EXAMPLES=OFF",
            "-DPINPOOL_BUILD_TOOLS=OFF", "-DPINPOOL_INSTALL=OFF",
        ]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", cmake_build, "--target", "pinpool_python",
                               "--parallel", str(os.cpu_count() or 1)])
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.check_call(["cmake", "--install", cmake_build, "--component", "pinpool_Python",
                               "--prefix", stage])
        # The stage holds pinpool/ (the extension, libpinpool, the .py files setuptools copies
        # itself) and pinpool_descriptor.py.
        target = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(os.path.join(stage, "pinpool")):
            if ".so" in name:
                shutil.copy2(os.path.join(stage, "pinpool", name), os.path.join(target, name))


os.makedirs(BUILD, exist_ok=True)
setup(
    version=version(),
    ext_modules=[Extension("pinpool._pinpool", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": BUILD}, "egg_info": {"egg_base": BUILD}},
)
