"""The consumer's build, started beside the child and waited for: configure and build against the installed package
config, the headers compiled alone, the deployment; kept in the environment's folder for later runs."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from smoke import proc
from smoke.environment.consumer.deploy import Deployed, deploy, shipped_libraries
from smoke.environment.consumer.headers import KEPT, Compiles, Headers, headers_alone, headers_key, keep_headers, kept_headers
from smoke.environment.consumer.sdk import COMPILER_FIX, build_environment, components, find_cmake, find_compiler
from smoke.environment.consumer.sources import CMAKELISTS, CONSUMER
from smoke.readers.wheel import Wheel

BUILD_SECONDS = 300


def package_digest() -> str:
    """The text of this package's modules (how the consumer is built, its headers compiled, it is deployed and run)."""
    digest = hashlib.sha256()
    for module in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(module.name.encode() + b"\0" + module.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Built:
    binary: Path | None
    said: str  # how it was built (or found built), or why it was not
    failed: bool = False  # the build ran and failed: the SDK's finding; else (binary None) nothing could build it
    headers: Headers | None = None  # the headers compiled alone, where a compiler was found
    deployed: Deployed | None = None  # the consumer deployed, where it was built


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
        """What a kept build is of: the wheel, the components it links, the tools, and this package's own text (how the
        build, the headers' compile and the deployment are made), so that a gate that builds otherwise builds anew."""
        text = json.dumps([self.wheel.sha256, self.backend, components(self.wheel, self.backend), cmake, compiler,
                           str(self.site), package_digest()])
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
