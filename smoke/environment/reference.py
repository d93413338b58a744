"""Eager's answers, computed beside the child in a process where the wheel's code does not run (issue 48).

``start`` runs ``smoke.child.reference`` with the environment's interpreter as ``python -I -S -c ...``: isolated (no
``PYTHON*`` variable, no user site, no current folder on ``sys.path``) and without ``site`` (no ``.pth`` file and no
``sitecustomize``: CPython's ``site.py`` runs both only from ``site.main()``), with torch's entry-point autoload off
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, torch's ``_import_device_backends``) and no GPU in sight. It is started as the
child is, and niced, so it takes the core the exports leave. ``Reference.answers`` waits for it and holds what it
says against the wheel: a process that imported executorch, or any file the wheel installs, was not apart from the
wheel's code, and its answers are refused, naming the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from smoke import proc, tensors
from smoke.environment.unchanged import Noted
from smoke.readers.wheel import Wheel

CODE = "import sys; sys.path.insert(0, sys.argv[1]); from smoke.child.reference import main; sys.exit(main(sys.argv[2]))"
LIMIT_BYTES = 8 * 1024 * 1024  # what is read of its standard output at most (its answer is a few kB)
LABELS = ("weightless", "weighted", "portable")
# A model a torch without its ops cannot build, or whose quantizer torchao lacks: that one is not judged, and says why.
OPTIONAL = ("quantized", "xnnpack-quantized")


@dataclass(frozen=True)
class Answers:
    """Eager's outputs by model (``smoke.tensors``), or why there are none (``error``)."""
    outputs: dict[str, list[tensors.Output]]
    error: str = ""
    inputs: dict[str, list[tensors.Output]] | None = None  # each model's inputs (the C++ consumer is given them)
    unbuilt: dict[str, str] = field(default_factory=dict)  # an optional model eager could not build, with why
    steps: dict[str, float] = field(default_factory=dict)  # a quantized output's int8 step, by model


def installed_files(wheel: Wheel) -> tuple[frozenset[str], frozenset[str]]:
    """Where the wheel's files land, relative to site-packages and relative to the environment's prefix (the
    ``.data`` folder's ``purelib``/``platlib`` schemes and its ``data`` scheme, as the wheel format installs them)."""
    data = next((name.split("/", 1)[0] for name in wheel.files if name.split("/", 1)[0].endswith(".data")), None)
    in_site, in_prefix = set(), set()
    for name in wheel.files:
        parts = PurePosixPath(name).parts
        if data is not None and parts and parts[0] == data and len(parts) > 2:
            if parts[1] in ("purelib", "platlib"):
                in_site.add("/".join(parts[2:]))
            elif parts[1] == "data":
                in_prefix.add("/".join(parts[2:]))
        else:
            in_site.add(name)
    return frozenset(in_site), frozenset(in_prefix)


def _relative(path: str, folder: str) -> str | None:
    try:
        relative = os.path.relpath(path, folder)
    except ValueError:
        return None
    return None if relative.startswith("..") else relative.replace(os.sep, "/")


def wheels_files_among(said: dict[str, Any], wheel: Wheel) -> list[str]:
    """The files of the wheel among those the reference process imported or mapped."""
    in_site, in_prefix = installed_files(wheel)
    sites = [os.path.realpath(str(site)) for site in said.get("sites") or []]
    prefix = os.path.realpath(str(said.get("prefix") or "/nonexistent"))
    found = []
    for path in said.get("files") or []:
        path = str(path)
        if any((relative := _relative(path, site)) is not None and relative in in_site for site in sites) or \
                ((relative := _relative(path, prefix)) is not None and relative in in_prefix):
            found.append(path)
    return found


class Reference:
    """The reference process, started by ``start``; ended by ``end`` (the row's exit stack), whatever happened."""

    def __init__(self, process: subprocess.Popen, wheel: Wheel, stderr: Any, noted: Noted | None = None) -> None:
        self.process, self.wheel, self.stderr, self.noted = process, wheel, stderr, noted
        self._out = b""
        self._reader = threading.Thread(target=self._read, name="eager-reference", daemon=True)
        self._reader.start()
        self._answers: Answers | None = None
        self._lock = threading.Lock()

    def _read(self) -> None:
        assert self.process.stdout is not None
        self._out = self.process.stdout.read(LIMIT_BYTES + 1)
        while self.process.stdout.read(1 << 16):  # the rest, unread: the process never blocks on a full pipe
            pass

    def answers(self, timeout: float) -> Answers:
        """Eager's outputs, once: waited for (at most ``timeout`` seconds), read and held against the wheel."""
        with self._lock:
            if self._answers is None:
                self._answers = self._judge(timeout)
            return self._answers

    def _judge(self, timeout: float) -> Answers:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.end_group(self.process)
            return Answers({}, f"eager's answer was not computed within {timeout:g} s")
        self._reader.join(timeout=10)
        if code != 0:
            return Answers({}, f"the process computing eager's answer apart from the wheel's code exited {code}: "
                               f"{self._stderr_tail()}")
        if len(self._out) > LIMIT_BYTES:
            return Answers({}, f"the process computing eager's answer wrote over {LIMIT_BYTES} bytes")
        try:
            said = json.loads(self._out.decode("utf-8", errors="replace"))
            if not isinstance(said, dict) or not isinstance(said.get("outputs"), dict):
                raise ValueError("not an object with outputs")
            outputs = {label: tensors.decode(said["outputs"].get(label)) for label in LABELS}
            outputs |= {label: tensors.decode(said["outputs"][label]) for label in OPTIONAL if label in said["outputs"]}
            given: dict[str, Any] = said["inputs"] if isinstance(said.get("inputs"), dict) else {}
            inputs = {label: tensors.decode(value) for label, value in given.items() if label in (*LABELS, *OPTIONAL)}
            told: dict[str, Any] = said["unbuilt"] if isinstance(said.get("unbuilt"), dict) else {}
            unbuilt = {label: str(told.get(label) or "eager gave no answer for it") for label in OPTIONAL
                       if label not in outputs}
            stepped: dict[str, Any] = said["steps"] if isinstance(said.get("steps"), dict) else {}
            steps = {label: float(step) for label, step in stepped.items() if label in OPTIONAL and label in outputs
                     and isinstance(step, (int, float)) and 0 < step < float("inf")}
        except (ValueError, RecursionError) as exc:
            return Answers({}, f"the process computing eager's answer said no answer the gate reads ({exc})")
        if said.get("executorch_imported") is not False:
            return Answers({}, "the process computing eager's answer imported executorch, which it never asks for")
        if own := wheels_files_among(said, self.wheel):
            return Answers({}, f"importing torch alone loaded {len(own)} of the wheel's own files ({', '.join(own[:3])}): "
                               f"eager's answer cannot be computed apart from the wheel's code")
        # The files it was computed from, as they were before any of the wheel's code ran (issue 58): code of the wheel
        # that rewrote or removed one of torch's changed the answer, or withdrew it.
        sites = [str(site) for site in said.get("sites") or []]
        if self.noted is not None and (why := self.noted.differs(sites)):
            return Answers({}, f"eager's answer is not torch's as installed: {why}")
        return Answers(outputs, inputs=inputs, unbuilt=unbuilt, steps=steps)

    def _stderr_tail(self) -> str:
        try:
            self.stderr.seek(0)
            return proc.tail(self.stderr.read().decode("utf-8", errors="replace")[-proc.TAIL_BYTES:]) or "(no output)"
        except (OSError, ValueError):
            return "(its output could not be read)"

    def end(self) -> None:
        proc.end_group(self.process)
        self.stderr.close()


class Later:
    """The reference process, started when ``begin`` is called (the child has imported torch and the runtime: its
    exports, single-threaded, leave a core free, where the imports take every core) or when its answers are first
    asked for; ended by ``end`` if it was started."""

    def __init__(self, python: Path, code: Path, env: dict[str, str], wheel: Wheel, noted: Noted | None = None) -> None:
        self.args = (python, code, env, wheel, noted)
        self.started: Reference | None = None
        self._lock = threading.Lock()

    def begin(self) -> Reference:
        with self._lock:
            if self.started is None:
                self.started = start(*self.args)
            return self.started

    def answers(self, timeout: float) -> Answers:
        return self.begin().answers(timeout)

    def end(self) -> None:
        with self._lock:
            if self.started is not None:
                self.started.end()


def start(python: Path, code: Path, env: dict[str, str], wheel: Wheel, noted: Noted | None = None) -> Reference:
    """The reference process, started now (``python``: the environment's; ``code``: the folder holding the gate's
    ``smoke``, ``loaderenv.gate_code``; ``env``: the child's environment, to which the module's settings are added;
    ``noted``: the environment's files before the wheel's code ran, which its answers are refused without)."""
    settings = {**env, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    stderr = tempfile.TemporaryFile()
    prefix = Path(python).parent.parent  # the environment's folder (bin/python in it)
    process = proc.start([python, "-I", "-S", "-B", "-c", CODE, str(code), str(prefix)], env=settings, cwd=code, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=stderr, own_group=True, background=True)
    return Reference(process, wheel, stderr, noted)
