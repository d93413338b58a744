"""smoke.readers.wheel: reading a wheel before anything is built: real PyPI wheels, and copies changed in one thing.

A hostile user's wheel names and metadata (issue 23, classes 1 and 3), each a mutant of PyPI's 1.5.1 wheel,
through the command line as a user runs it: `python -m smoke inspect W` and `python -m smoke cpu_x86_64 W`.
Each is one ERROR line and exit 2 before any environment is built; never a traceback, and the wheel given is
left as it was. Then the readers fed hostile input (hypothesis): file names and tags, generated and mutated
from the real one, and the WHEEL, METADATA and RECORD bytes of PyPI's 1.5.1 wheel, mutated and wrapped into a
small zip. Whatever comes in, ``read_wheel`` and the tag checks raise nothing but the gate's own errors, in
bounded memory and time. The fast profile runs with the tests; the slow one (thousands of examples) in CI.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
import tracemalloc
import zipfile

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from smoke.checks.tagged import check_wheel_tags
from smoke.commands.inspect import rows_for
from smoke.errors import GateError, InvalidWheel, WrongPlatform
from smoke.readers.wheel import Interpreter, check_interpreter, platform_machine, read_wheel
from smoke.rows import ROWS, check_machine
from tests.helpers import REPO, examples, pypi_wheel, rewrite_wheel
from tests.helpers import dist_info_text as member
from tests.helpers import renamed_copy as renamed
from tests.helpers import with_dist_info as replaced


@pytest.mark.parametrize(
    ("platform", "machine"),
    [("manylinux_2_28_x86_64", "x86_64"), ("manylinux_2_28_aarch64", "aarch64"), ("macosx_14_0_arm64", "arm64"), ("any", "any")],
)
def test_platform_machine(platform, machine):
    assert platform_machine(platform) == machine


def test_reads_pypi_wheel(wheel_x86_64):
    wheel = read_wheel(wheel_x86_64)
    assert str(wheel.version) == "1.5.1" and wheel.release == "1.5"
    assert wheel.machines == {"x86_64"}
    assert any(req.name == "torchao" for req in wheel.requires_dist)
    assert len(wheel.sha256) == 64


@pytest.mark.parametrize(
    ("version", "accepted"),
    [((3, 11), True), ((3, 12), False), ((3, 10), False)],
)
def test_python_tag_against_interpreter(wheel_x86_64, version, accepted):
    interpreter = Interpreter("/usr/bin/python", "cpython", version)
    if accepted:
        check_interpreter(read_wheel(wheel_x86_64), interpreter)
    else:
        with pytest.raises(WrongPlatform, match=r"is for cp311; .* run the gate with --python python3\.11"):
            check_interpreter(read_wheel(wheel_x86_64), interpreter)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.whl", "does not exist"),
        (lambda d: d, "is not a file"),
        (lambda d: _write(d / "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl", b"not a zip"), "cannot be read as a wheel archive"),
        (lambda d: _zip(d / "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"), "has no .dist-info folder"),
        (lambda d: _write(d / "notes.txt", b""), "is not a wheel file name"),
        (lambda d: _zip(d / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"), "of project 'torch', not 'executorch'"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, make, message):
    with pytest.raises(InvalidWheel, match=message):
        read_wheel(make(tmp_path))


def _write(path, data):
    path.write_bytes(data)
    return path


def _zip(path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("README", "a zip, not a wheel")
    return path


# --- an untrusted wheel is refused by name ----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(
    ("entry", "message"),
    [("../escape.txt", "climbs out of the tree with '..'"), ("/etc/passwd-copy", "is an absolute path")],
)
def test_unsafe_entries_are_refused(slim_x86_64, tmp_path, entry, message):
    bad = rewrite_wheel(slim_x86_64, tmp_path, add={entry: b"x"})
    with pytest.raises(InvalidWheel, match=message):
        read_wheel(bad)


@pytest.mark.slow
def test_a_link_out_of_the_tree_is_refused(slim_x86_64, tmp_path):
    bad = tmp_path / slim_x86_64.name
    rewrite_wheel(slim_x86_64, tmp_path)
    with zipfile.ZipFile(bad, "a") as archive:
        link = zipfile.ZipInfo("executorch/lib/evil.so")
        link.external_attr = (0o120777 << 16)
        archive.writestr(link, "../../../../usr/lib/libc.so.6")
    with pytest.raises(InvalidWheel, match=r"'executorch/lib/evil.so' is a link to '../../../../usr/lib/libc.so.6'; a wheel holds no links"):
        read_wheel(bad)

# --- a hostile user's wheel names and metadata (issue 23, classes 1 and 3), as a user runs the gate ---

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


@pytest.mark.slow
@pytest.mark.parametrize(("case", "make", "text"), METADATA_SHAPES, ids=[c for c, _, _ in METADATA_SHAPES])
@pytest.mark.parametrize("command", ["inspect", "cpu_x86_64"])
def test_a_wheel_of_the_wrong_shape_is_refused_before_anything_is_built(slim_x86_64, tmp_path, case, make, text, command):
    wheel = make(slim_x86_64, tmp_path)
    before = digest(wheel)
    extra = ("--env-dir", tmp_path / "env", "--fail-fast") if command != "inspect" else ()
    one_error_line(smoke(command, wheel, *extra, "--report-dir", tmp_path / "reports"), text)
    assert not (tmp_path / "env").exists() and digest(wheel) == before
    assert not any((tmp_path / "reports").glob("*.json"))  # no verdict on a wheel the gate could not read


@pytest.mark.slow
def test_every_public_cp311_wheel_still_reads(tmp_path):
    """1.0.0 to 1.5.1, both machines: the new refusals refuse none of them, and their tags agree with WHEEL."""
    from smoke.checks.tagged import check_wheel_tags
    from smoke.rows import ROWS
    from tests.helpers import PUBLIC_RELEASES, release_wheel

    wheels = [release_wheel(release, machine) for release in PUBLIC_RELEASES for machine in ("x86_64", "aarch64")]
    for path in wheels:
        wheel = read_wheel(path)
        assert check_wheel_tags(wheel, ROWS["cpu_x86_64"], None).status.value == "pass", path.name

# --- the wheel readers fed hostile input (hypothesis) ---------------------------------------------

MEMBERS = ("WHEEL", "METADATA", "RECORD")
with zipfile.ZipFile(pypi_wheel("x86_64")) as _archive:
    REAL = {m: _archive.read(f"{DIST_INFO}/{m}") for m in MEMBERS}
REAL["RECORD"] = b"\n".join(REAL["RECORD"].splitlines()[:40]) + b"\n"  # its first lines: the form, not the bulk
INTERPRETERS = [Interpreter("/p", "cpython", (3, minor), "x86_64") for minor in (10, 11, 12, 13)] + [
    Interpreter("/p", "pypy", (3, 10), "aarch64")]
MEMORY_BOUND = 32 << 20  # one example's peak; a 16 MiB RECORD cap read whole is the most read_wheel holds
SECONDS_BOUND = 5.0

TAG_PART = st.sampled_from(["cp311", "cp3", "cp99", "cp311d", "cp313t", "abi3", "none", "py3", "py2.py3", "pp310",
                            "pypy310_pp73", "cp311.cp312", "manylinux_2_28_x86_64", "manylinux2014_aarch64", "any",
                            "macosx_14_0_arm64", "win_amd64", "musllinux_1_2_x86_64", "linux_x86_64", "x", ""])
NAME_CHARS = st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",))


def _mutated(data: bytes, draw) -> bytes:
    edits = draw(st.lists(st.tuples(st.sampled_from(["flip", "cut", "insert", "dup"]), st.integers(0, max(len(data) - 1, 0)),
                                    st.binary(max_size=40)), max_size=4))
    for kind, at, blob in edits:
        at = min(at, max(len(data) - 1, 0))
        if kind == "flip" and data:
            data = data[:at] + bytes([data[at] ^ (blob[0] if blob else 0xFF)]) + data[at + 1:]
        elif kind == "cut":
            data = data[:at] + data[at + len(blob):]
        elif kind == "insert":
            data = data[:at] + blob + data[at:]
        else:
            data = data[:at] + data[at:at + 64] * 3 + data[at:]
    return data


@st.composite
def names(draw):
    how = draw(st.sampled_from(["parts", "mutated", "text"]))
    if how == "parts":
        parts = ["executorch", draw(st.sampled_from(["1.5.1", "1.5.1.post1", "v1.5.1", "1.5.1+cu130", "one", ""]))]
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from(["1", "1abc", "x"])))
        parts += [draw(TAG_PART) for _ in range(3)]
        return "-".join(parts) + draw(st.sampled_from([".whl", ".whl", ".zip", ""]))
    if how == "mutated":
        return _mutated(NAME.encode(), draw).decode("utf-8", "ignore").replace("/", "_").replace("\x00", "")
    return draw(st.text(NAME_CHARS, min_size=1, max_size=120)) + ".whl"


@st.composite
def members(draw):
    chosen = dict(REAL)
    for name in draw(st.sets(st.sampled_from(MEMBERS), min_size=1)):
        chosen[name] = _mutated(chosen[name], draw) if draw(st.booleans()) else draw(st.binary(max_size=200))
    for name in draw(st.sets(st.sampled_from(MEMBERS), max_size=1)):
        del chosen[name]
    return chosen


def _judge(path) -> None:
    """read_wheel, then every tag check a run or inspect makes on what it read."""
    try:
        wheel = read_wheel(path)
    except GateError:
        return
    for interpreter in INTERPRETERS:
        try:
            check_interpreter(wheel, interpreter)
        except GateError:
            pass
    for row in ROWS.values():
        try:
            check_machine(wheel, row)
        except GateError:
            pass
        check_wheel_tags(wheel, row, None)
    try:
        rows_for(wheel, [])
    except GateError:
        pass


def _bounded(path) -> None:
    tracemalloc.start()
    start = time.monotonic()
    try:
        _judge(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND, peak
    assert time.monotonic() - start < SECONDS_BOUND


def _write_wheel(folder, name, chosen) -> object:
    path = folder / name
    try:
        with zipfile.ZipFile(path, "w") as archive:
            for member, data in chosen.items():
                archive.writestr(f"{DIST_INFO}/{member}", data)
            archive.writestr("executorch/__init__.py", b"")
    except OSError:  # a name the file system refuses (too long): nothing to feed the gate
        return None
    return path


def _name_case(tmp_path_factory, name):
    path = _write_wheel(tmp_path_factory.mktemp("n"), name, REAL)
    if path is not None:
        _bounded(path)


def _member_case(tmp_path_factory, chosen):
    _bounded(_write_wheel(tmp_path_factory.mktemp("m"), NAME, chosen))


FAST = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SLOW = settings(max_examples=examples(3000), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.slow
@FAST
@given(name=names())
@example(name="executorch-1.5.1-cp311d-abi3-cp311.whl")  # found by the slow profile: int('11d') escaped check_interpreter
def test_any_file_name_is_read_or_refused_by_the_gate(tmp_path_factory, name):
    _name_case(tmp_path_factory, name)


@pytest.mark.slow
@FAST
@given(chosen=members())
def test_any_wheel_metadata_is_read_or_refused_by_the_gate(tmp_path_factory, chosen):
    _member_case(tmp_path_factory, chosen)


@pytest.mark.slow
@SLOW
@given(name=names())
def test_thousands_of_file_names(tmp_path_factory, name):
    _name_case(tmp_path_factory, name)


@pytest.mark.slow
@SLOW
@given(chosen=members())
def test_thousands_of_wheel_metadata(tmp_path_factory, chosen):
    _member_case(tmp_path_factory, chosen)
