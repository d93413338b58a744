"""The wheel readers fed hostile input (hypothesis): file names and tags, generated and mutated from the real one, and
the WHEEL, METADATA and RECORD bytes of PyPI's 1.5.1 wheel, mutated and wrapped into a small zip. Whatever comes in,
``read_wheel`` and the tag checks raise nothing but the gate's own errors, in bounded memory and time. The fast
profile runs with the tests; the slow one (thousands of examples) in CI."""

from __future__ import annotations

import time
import tracemalloc
import zipfile

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from smoke.checks.tagged import check_wheel_tags
from smoke.commands.inspect import rows_for
from smoke.errors import GateError
from smoke.readers.wheel import Interpreter, check_interpreter, read_wheel
from smoke.rows import ROWS, check_machine
from tests.helpers import pypi_wheel

NAME = "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"
DIST_INFO = "executorch-1.5.1.dist-info"
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


def _write(folder, name, chosen) -> object:
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
    path = _write(tmp_path_factory.mktemp("n"), name, REAL)
    if path is not None:
        _bounded(path)


def _member_case(tmp_path_factory, chosen):
    _bounded(_write(tmp_path_factory.mktemp("m"), NAME, chosen))


FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SLOW = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FAST
@given(name=names())
@example(name="executorch-1.5.1-cp311d-abi3-cp311.whl")  # found by the slow profile: int('11d') escaped check_interpreter
def test_any_file_name_is_read_or_refused_by_the_gate(tmp_path_factory, name):
    _name_case(tmp_path_factory, name)


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
