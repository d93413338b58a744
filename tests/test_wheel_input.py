"""A hostile user's wheel names and metadata (issue 23, classes 1 and 3), each a mutant of PyPI's 1.5.1 wheel,
through the command line as a user runs it: `python -m smoke inspect W` and `python -m smoke cpu_x86_64 W`.
Each is one ERROR line and exit 2 before any environment is built, or a FAIL naming what is wrong; never a
traceback, and the wheel given is left as it was."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from smoke.errors import WrongPlatform
from smoke.readers.wheel import Interpreter, check_interpreter, read_wheel
from tests.helpers import REPO, rewrite_wheel

NAME = "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"
DIST_INFO = "executorch-1.5.1.dist-info"


def smoke(*args):
    return subprocess.run([sys.executable, "-m", "smoke", *map(str, args)], capture_output=True, text=True, cwd=REPO, timeout=300)


def one_error_line(proc, text):
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and text in errors[0], out
    assert "Traceback" not in out


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def renamed(slim, tmp, name):
    (tmp / "in").mkdir(exist_ok=True)
    return shutil.copy(slim, tmp / "in" / name)  # the same bytes under another name: WHEEL still says cp311-cp311-manylinux


def member(slim, name):
    with zipfile.ZipFile(slim) as archive:
        return archive.read(f"{DIST_INFO}/{name}").decode()


def replaced(slim, tmp, name, text):
    return rewrite_wheel(slim, tmp / "in", add={f"{DIST_INFO}/{name}": text.encode() if isinstance(text, str) else text},
                         update_record=name != "RECORD")


# Class 1: names and tags. (file name, the ERROR line's words)
NAMES = [
    ("executorch-1.5.1-cp311-cp311-macosx_14_0_x86_64.whl", "is built for macosx_14_0_x86_64; the gate has rows for aarch64, x86_64 (Linux), macOS arm64, Windows amd64 only"),
    ("executorch-1.5.1-cp311-cp311-win32.whl", "is built for win32; the gate has rows for"),
    ("executorch-1.5.1-cp3-cp3-manylinux_2_28_x86_64.whl", "has Python tags cp3-cp3, which no Python 3 installs"),
    ("executorch-1.5.1-cp99-cp99-manylinux_2_28_x86_64.whl", "has Python tags cp99-cp99, which no Python 3 installs"),
    ("executorch-1.5.1-cp311d-cp311d-manylinux_2_28_x86_64.whl", "has Python tags cp311d-cp311d, which no Python 3 installs"),
    ("executorch-1.5.1-cpXY-abi3-manylinux_2_28_x86_64.whl", "has Python tags cpxy-abi3, which no Python 3 installs"),
    ("executorch-1.5.1-cp3x-abi3-manylinux_2_28_x86_64.whl", "has Python tags cp3x-abi3, which no Python 3 installs"),
    ("executorch-cp311-cp311-manylinux_2_28_x86_64.whl", "is not a wheel file name"),
    ("executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.zip", "is not a wheel file name"),
    ("executorch-one-cp311-cp311-manylinux_2_28_x86_64.whl", "is not a wheel file name"),
    ("torch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl", "is of project 'torch', not 'executorch'"),
    ("executorch-1.5.1.post1-cp311-cp311-manylinux_2_28_x86_64.whl", "says version 1.5.1 in METADATA, 1.5.1.post1 in its name"),
]


@pytest.mark.parametrize(("name", "text"), NAMES, ids=[n for n, _ in NAMES])
@pytest.mark.parametrize("command", ["inspect", "cpu_x86_64"])
def test_a_name_the_gate_cannot_judge_is_one_error_line(slim_x86_64, tmp_path, name, text, command):
    wheel = renamed(slim_x86_64, tmp_path, name)
    before = digest(wheel)
    extra = ("--env-dir", tmp_path / "env", "--fail-fast") if command != "inspect" else ()
    one_error_line(smoke(command, wheel, *extra), text)
    assert not (tmp_path / "env").exists() and digest(wheel) == before


# Installable tags its WHEEL file does not name: the wheel is defective, a FAIL of `wheel tags` (on inspect, any interpreter).
RETAGGED = [
    ("executorch-1.5.1-cp311.cp312-cp311.cp312-manylinux_2_28_x86_64.whl", "the file name says cp311-cp311-manylinux_2_28_x86_64, "
     "cp311-cp312-manylinux_2_28_x86_64, cp312-cp311-manylinux_2_28_x86_64, cp312-cp312-manylinux_2_28_x86_64, its WHEEL file "
     "cp311-cp311-manylinux_2_28_x86_64: pip installs it by its name"),
    ("executorch-1.5.1-cp311-abi3-manylinux_2_28_x86_64.whl", "the file name says cp311-abi3-manylinux_2_28_x86_64, its WHEEL file cp311-cp311"),
    ("executorch-1.5.1-py3-none-any.whl", "the file name says py3-none-any, its WHEEL file cp311-cp311-manylinux_2_28_x86_64"),
    ("executorch-1.5.1-cp311-cp311-musllinux_1_2_x86_64.whl", "the file name says cp311-cp311-musllinux_1_2_x86_64"),
    ("executorch-1.5.1-pp310-pypy310_pp73-manylinux_2_28_x86_64.whl", "the file name says pp310-pypy310_pp73-manylinux_2_28_x86_64"),
    ("executorch-1.5.1-7-cp311-cp311-manylinux_2_28_x86_64.whl", "the file name's build tag is '7', its WHEEL file's Build 'none'"),
]


@pytest.mark.parametrize(("name", "text"), RETAGGED, ids=[n for n, _ in RETAGGED])
def test_a_name_its_wheel_file_does_not_say_fails_wheel_tags(slim_x86_64, tmp_path, name, text):
    wheel = renamed(slim_x86_64, tmp_path, name)
    proc = smoke("inspect", wheel, "--row", "cpu_x86_64")
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("FAIL wheel tags: "))
    assert text in line


def test_a_wheel_file_that_names_no_tag_or_another_fails_wheel_tags(slim_x86_64, tmp_path):
    text = member(slim_x86_64, "WHEEL")
    none = replaced(slim_x86_64, tmp_path / "none", "WHEEL", text.replace("Tag: cp311-cp311-manylinux_2_28_x86_64\n", ""))
    other = replaced(slim_x86_64, tmp_path / "other", "WHEEL", text.replace("Tag: cp311", "Tag: cp312"))
    assert "FAIL wheel tags: its WHEEL file names no Tag" in smoke("inspect", none, "--row", "cpu_x86_64").stdout
    assert "its WHEEL file cp312-cp311-manylinux_2_28_x86_64" in smoke("inspect", other, "--row", "cpu_x86_64").stdout


def test_the_public_wheel_passes_wheel_tags(slim_x86_64):
    proc = smoke("inspect", slim_x86_64, "--row", "cpu_x86_64")
    assert "PASS wheel tags: the file name's tags are its WHEEL file's (cp311-cp311-manylinux_2_28_x86_64)" in proc.stdout


@pytest.mark.parametrize(
    ("tag", "interpreter", "fix"),
    [
        ("cp312-cp312", "cpython", "run the gate with --python python3.12 (or the path of a Python 3.12)"),
        ("pp310-pypy310_pp73", "cpython", "--python pypy3.10 (or the path of a PyPy 3.10)"),
        ("cp311-cp311d", "cpython", "--python python3.11d (or the path of a debug build of Python 3.11)"),
        ("cp313-cp313t", "cpython", "--python python3.13t (or the path of a free-threaded Python 3.13)"),
        ("cp312-abi3", "cpython", "--python python3.12"),  # abi3 of 3.12 is for 3.12 and newer, not 3.11
        ("cp311-cp311", "pypy", "--python python3.11"),
    ],
)
def test_the_python_named_is_one_that_installs_the_tag(slim_x86_64, tmp_path, tag, interpreter, fix):
    wheel = read_wheel(renamed(slim_x86_64, tmp_path, f"executorch-1.5.1-{tag}-manylinux_2_28_x86_64.whl"))
    with pytest.raises(WrongPlatform, match="this session's interpreter is") as caught:
        check_interpreter(wheel, Interpreter("/usr/bin/python3", interpreter, (3, 11), "x86_64"))
    assert fix in str(caught.value)


@pytest.mark.parametrize("tag", ["cp311-abi3", "cp36-abi3", "py3-none", "cp311-none", "py311-none", "py2.py3-none"])
def test_tags_a_python_311_installs_are_accepted(slim_x86_64, tmp_path, tag):
    wheel = read_wheel(renamed(slim_x86_64, tmp_path, f"executorch-1.5.1-{tag}-manylinux_2_28_x86_64.whl"))
    check_interpreter(wheel, Interpreter("/usr/bin/python3", "cpython", (3, 11), "x86_64"))


# Class 3: the metadata's shape. (how the wheel is made from the slim 1.5.1, the ERROR line's words)
def _drop(name):
    return lambda slim, tmp: rewrite_wheel(slim, tmp / "in", drop=(f"{DIST_INFO}/{name}",))


def _edit(name, old, new):
    return lambda slim, tmp: replaced(slim, tmp, name, member(slim, name).replace(old, new, 1))


def _bytes(name, data):
    return lambda slim, tmp: replaced(slim, tmp, name, data)


def _second_dist_info(project):
    def make(slim, tmp):
        return rewrite_wheel(slim, tmp / "in", add={f"{project}.dist-info/METADATA": member(slim, "METADATA").encode(),
                                                   f"{project}.dist-info/WHEEL": member(slim, "WHEEL").encode()})
    return make


def _long_record_field(slim, tmp):
    field = "executorch/" + "a" * (1 << 18)  # 256 KiB: twice csv.field_size_limit() (128 KiB)
    return replaced(slim, tmp, "RECORD", member(slim, "RECORD") + f'"{field}",sha256=x,1\n')


def _huge_record(slim, tmp):
    return replaced(slim, tmp, "RECORD", member(slim, "RECORD") + "x,," * (6 << 20))  # 18 MiB, deflated to kB


METADATA_SHAPES = [
    ("no WHEEL", _drop("WHEEL"), f"has no {DIST_INFO}/WHEEL (every wheel has one; pip refuses it without)"),
    ("no METADATA", _drop("METADATA"), f"has no {DIST_INFO}/METADATA"),
    ("no RECORD", _drop("RECORD"), f"has no {DIST_INFO}/RECORD"),
    ("two dist-info", _second_dist_info("executorch-1.5.0"), "has 2 .dist-info folders (executorch-1.5.0.dist-info, executorch-1.5.1.dist-info)"),
    ("another's dist-info", _second_dist_info("torch-2.13.0"), "has 2 .dist-info folders"),
    ("METADATA of torch", _edit("METADATA", "Name: executorch", "Name: torch"), "says Name 'torch' in METADATA, not 'executorch'"),
    ("METADATA with no Name", _edit("METADATA", "Name: executorch\n", ""), "has no Name in METADATA"),
    ("METADATA of 1.5.0", _edit("METADATA", "Version: 1.5.1", "Version: 1.5.0"), "says version 1.5.0 in METADATA, 1.5.1 in its name"),
    ("METADATA with no Version", _edit("METADATA", "Version: 1.5.1\n", ""), "has no Version in METADATA"),
    ("METADATA not UTF-8", _bytes("METADATA", b"Name: executorch\n\xff\xfe"), "has a METADATA that is not UTF-8 text"),
    ("METADATA not headers", _bytes("METADATA", b"{\"name\": \"executorch\"}\n"), "has no Name in METADATA"),
    ("RECORD field over csv's limit", _long_record_field, "field larger than field limit (131072)); no file list of a wheel needs it"),
    ("RECORD unterminated quote", _bytes("RECORD", b'"executorch/a.py,sha256=x,1\n'), "has a RECORD that is not CSV (line 1: unexpected end of data)"),
    ("RECORD not UTF-8", _bytes("RECORD", b"\xff\xfe,,\n"), "has a RECORD that is not UTF-8 text"),
    ("RECORD over its cap", _huge_record, f"{DIST_INFO}/RECORD is over the gate's 16777216 B limit for it"),
    ("Wheel-Version 2.0", _edit("WHEEL", "Wheel-Version: 1.0", "Wheel-Version: 2.0"), "is in wheel format 2.0 (WHEEL); pip and this gate read format 1.x only"),
    ("Wheel-Version missing", _edit("WHEEL", "Wheel-Version: 1.0\n", ""), "has Wheel-Version 'missing' in WHEEL, not a version such as '1.0'"),
    ("Wheel-Version junk", _edit("WHEEL", "Wheel-Version: 1.0", "Wheel-Version: one"), "has Wheel-Version 'one' in WHEEL"),
    ("Root-Is-Purelib junk", _edit("WHEEL", "Root-Is-Purelib: false", "Root-Is-Purelib: maybe"), "has Root-Is-Purelib 'maybe' in WHEEL, not true or false"),
    ("WHEEL not UTF-8", _bytes("WHEEL", b"Wheel-Version: 1.0\n\xff"), "has a WHEEL that is not UTF-8 text"),
]


@pytest.mark.parametrize(("case", "make", "text"), METADATA_SHAPES, ids=[c for c, _, _ in METADATA_SHAPES])
@pytest.mark.parametrize("command", ["inspect", "cpu_x86_64"])
def test_a_wheel_of_the_wrong_shape_is_refused_before_anything_is_built(slim_x86_64, tmp_path, case, make, text, command):
    wheel = make(slim_x86_64, tmp_path)
    before = digest(wheel)
    extra = ("--env-dir", tmp_path / "env", "--fail-fast") if command != "inspect" else ()
    one_error_line(smoke(command, wheel, *extra, "--report-dir", tmp_path / "reports"), text)
    assert not (tmp_path / "env").exists() and digest(wheel) == before
    assert not any((tmp_path / "reports").glob("*.json"))  # no verdict on a wheel the gate could not read


def test_every_public_cp311_wheel_still_reads(tmp_path):
    """1.0.0 to 1.5.1, both machines: the new refusals refuse none of them, and their tags agree with WHEEL."""
    from smoke.checks.tagged import check_wheel_tags
    from smoke.rows import ROWS
    from tests.helpers import PUBLIC_RELEASES, release_wheel

    wheels = [release_wheel(release, machine) for release in PUBLIC_RELEASES for machine in ("x86_64", "aarch64")]
    for path in wheels:
        wheel = read_wheel(path)
        assert check_wheel_tags(wheel, ROWS["cpu_x86_64"], None).status.value == "pass", path.name
