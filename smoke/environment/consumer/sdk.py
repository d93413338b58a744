"""What the wheel's C++ SDK offers a consumer (its package config, its components, the delegate's), what the machine has
to build one with (CMake, a C++ compiler), and the build's own environment."""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from smoke import proc
from smoke.errors import GateError
from smoke.readers.wheel import Wheel

CONFIG = "executorch/share/cmake/executorch-config.cmake"
RUNTIME = "executorch/lib/libexecutorch.so"
CMAKE_AT_LEAST = (3, 28)  # the wheel's config defines its imported targets from 3.28 on (above)
CMAKE_FIX = "pip install 'cmake>=3.28,<4' into the interpreter that runs the gate"
# The component each delegate's programs need (the wheel's config names them executorch::<component>).
DELEGATE_COMPONENT = {"xnnpack": "backend_xnnpack", "cuda": "backend_cuda"}
KERNELS = "kernels_optimized"  # the CPU kernels' component, linked where the wheel ships its library
QUANTIZED_KERNELS = "kernels_quantized"  # the quantized kernels' component, linked where the wheel ships its library


def nothing_to_judge(wheel: Wheel) -> str | None:
    """Why the wheel has no C++ SDK to judge (None where it ships one): no package config, or a config and headers
    with no C++ runtime library. 1.4.1's setup.py ships ``share/cmake/executorch-config.cmake`` and the headers a
    custom operator needs, no ``executorch/lib`` (v1.4.1); 1.5's adds ``lib/libexecutorch.so`` and the components."""
    files = set(wheel.files)
    if RUNTIME in files:
        return None  # a C++ runtime: judged, its package config too (missing_config)
    if CONFIG not in files:
        return f"the wheel ships no C++ SDK (no {CONFIG})"
    return (f"the wheel ships a CMake config and headers but no C++ runtime ({RUNTIME}), as releases before 1.5 do: "
            f"headers for custom operators built against the Python extension, no program a C++ consumer can run")


@dataclass(frozen=True)
class NoConfig:
    """A C++ runtime shipped without the package config a consumer finds it by (``missing_config``): the wheel's FAIL."""
    why: str


def missing_config(wheel: Wheel) -> str | None:
    """Why no consumer can build against the wheel's C++ runtime (None where it can): it ships the runtime library
    but not the CMake package config. Upstream ships both together from 1.5 (setup.py installs the config as
    ``share/cmake/executorch-config.cmake`` beside ``lib/``), and its own consumer test finds the runtime only through
    it (``.ci/scripts/wheel/test_cpp_sdk.py``: ``find_package(executorch REQUIRED ...)``). Issue 58: such a wheel
    SKIPped every C++ check as "the wheel ships no C++ SDK" and PASSed."""
    files = set(wheel.files)
    if RUNTIME in files and CONFIG not in files:
        return (f"the wheel ships a C++ runtime ({RUNTIME}) but no CMake package config ({CONFIG}), so no C++ consumer "
                f"can find_package(executorch) it, as upstream's test_cpp_sdk.py does: ship the config beside the runtime")
    return None


def library_of(component: str) -> str:
    """The library the wheel's config defines ``executorch::<component>`` from (its ``_executorch_find_library``)."""
    return f"executorch/lib/libexecutorch_{component}.so"


def components(wheel: Wheel, backend: str) -> list[str]:
    """The components the row's consumer links: the runtime, the CPU kernels and the quantized kernels where the wheel
    ships them, the row's delegate."""
    found = ["runtime"]
    found += [kernels for kernels in (KERNELS, QUANTIZED_KERNELS) if library_of(kernels) in wheel.files]
    if backend in DELEGATE_COMPONENT:
        found.append(DELEGATE_COMPONENT[backend])
    return found


def missing_delegate(wheel: Wheel, backend: str) -> str | None:
    """Why the row's programs cannot run in C++ with this wheel (its delegate's component is not shipped), or None."""
    component = DELEGATE_COMPONENT.get(backend)
    if component is None:
        return f"the gate has no C++ component for the {backend} delegate"
    if library_of(component) not in wheel.files:
        return (f"the wheel's C++ SDK has no executorch::{component} ({library_of(component)} is not shipped): a C++ "
                f"consumer cannot run the row's {backend} programs")
    return None


def _version(cmake: str) -> tuple[int, ...] | None:
    try:
        out = proc.run([cmake, "--version"], what="asking CMake its version", timeout=30, check=False).stdout
    except GateError:
        return None
    found = re.search(r"cmake version (\d+)\.(\d+)", out)
    return (int(found[1]), int(found[2])) if found else None


def find_cmake() -> tuple[str | None, str]:
    """A CMake the wheel's config defines targets for: the one beside the interpreter running the gate (the gate's
    own requirement), else the first on PATH; and what was found, in words."""
    seen = []
    for candidate in (Path(sys.executable).parent / "cmake", shutil.which("cmake")):
        if candidate is None or not Path(candidate).is_file():
            continue
        version = _version(str(candidate))
        if version is not None and version >= CMAKE_AT_LEAST:
            return str(candidate), f"CMake {'.'.join(map(str, version))} ({candidate})"
        seen.append(f"{candidate} ({'.'.join(map(str, version)) if version else 'no version'})")
    return None, f"no CMake 3.28 or newer ({', '.join(seen) or 'none found'}): {CMAKE_FIX}"


def find_compiler() -> str | None:
    """The C++ compiler, as an absolute path where it can be found: ``CXX`` (the caller's choice), else the first of
    c++, g++, clang++ on the gate's own PATH."""
    given = os.environ.get("CXX")
    if given:
        return shutil.which(given) or given
    return shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


# What the caller's shell can hand a C++ compile or CMake build besides its command line (GCC's "Environment
# Variables" chapter; CMake's cmake-env-variables(7)): module systems, conda and Spack set them. The consumer's build
# and the headers' compiles run without them, as upstream's test_cpp_sdk.py builds in a clean environment, so that a
# header or library the wheel lacks is not found in the caller's folders (issue 58).
BUILD_VARIABLES = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "LIBRARY_PATH", "LD_RUN_PATH",
                   "GCC_EXEC_PREFIX", "COMPILER_PATH", "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES", "CC", "CXX", "CFLAGS",
                   "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "CMAKE_PREFIX_PATH", "CMAKE_INCLUDE_PATH", "CMAKE_LIBRARY_PATH",
                   "CMAKE_PROGRAM_PATH", "CMAKE_FRAMEWORK_PATH", "CMAKE_APPBUNDLE_PATH", "CMAKE_TOOLCHAIN_FILE",
                   "CMAKE_GENERATOR", "CMAKE_GENERATOR_PLATFORM", "CMAKE_GENERATOR_TOOLSET", "CMAKE_GENERATOR_INSTANCE",
                   "CMAKE_BUILD_TYPE", "CMAKE_CONFIGURATION_TYPES", "CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_CXX_LINKER_LAUNCHER",
                   "CMAKE_EXPORT_COMPILE_COMMANDS", "CMAKE_APPLE_SILICON_PROCESSOR", "CMAKE_OSX_ARCHITECTURES",
                   "CMAKE_INSTALL_PREFIX", "CMAKE_SYSROOT")


def build_environment(env: dict[str, str], site: Path) -> tuple[dict[str, str], tuple[str, ...]]:
    """The environment of the consumer's build and the headers' compiles: ``env`` without ``BUILD_VARIABLES``, and a
    PATH without the folders of the environment the wheel is installed in (its ``bin`` holds the wheel's own scripts:
    GCC finds ``as`` and ``ld``, and CMake ``make``, by name on PATH, so a wheel's ``ld`` would link the consumer).
    The tools themselves are named by absolute path (``find_cmake``, ``find_compiler``). Returns it and the caller's
    variables left out (the PATH's folders the gate itself put first are left out without a word)."""
    venv = next((folder for folder in site.parents if (folder / "pyvenv.cfg").is_file()), None)
    removed = [name for name in BUILD_VARIABLES if name in env]
    clean = {name: value for name, value in env.items() if name not in BUILD_VARIABLES}
    if venv is not None:
        root = os.path.realpath(venv)
        entries = clean.get("PATH", "").split(os.pathsep)
        kept = [entry for entry in entries if entry and os.path.isabs(entry)
                and os.path.commonpath([os.path.realpath(entry), root]) != root]
        if kept != entries:
            clean["PATH"] = os.pathsep.join(kept) or os.defpath
    return clean, tuple(removed)


COMPILER_FIX = "install one (Debian and Ubuntu: apt install g++), or set CXX to one"


def machine_lacks(wheel: Wheel, backend: str) -> str | None:
    """Why this machine cannot run the C++ checks of a wheel that ships a C++ runtime (None where it can, or where the
    wheel has none to judge): the checks must execute there, so a missing or broken tool is the machine's ERROR, named
    with its fix, never a SKIP that lets the row pass (issue 56) nor a FAIL of the wheel."""
    if nothing_to_judge(wheel) is not None or missing_delegate(wheel, backend) is not None or missing_config(wheel):
        return None
    shipped = f"the wheel ships a C++ runtime ({RUNTIME}), whose checks must run here"
    cmake, found = find_cmake()
    if cmake is None:
        return f"{shipped}, and this machine has {found}"
    compiler = find_compiler()
    if compiler is None:
        return f"{shipped}, and this machine has no C++ compiler (c++, g++ or clang++ on PATH, or CXX): {COMPILER_FIX}"
    source = "CXX" if os.environ.get("CXX") else "PATH"
    try:
        done = proc.run([compiler, "--version"], what=f"the C++ compiler {compiler!r}", timeout=60, check=False)
    except GateError as exc:
        return f"{shipped}, and the C++ compiler {compiler!r} (from {source}) cannot run: {exc}; {COMPILER_FIX}"
    if done.returncode != 0:
        return (f"{shipped}, and the C++ compiler {compiler!r} (from {source}) exited {done.returncode} when asked its "
                f"version: {proc.tail(done.stderr or done.stdout, 1)}; {COMPILER_FIX}")
    return None
