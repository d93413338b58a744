"""smoke.checks.duplicates: `no duplicate content`, on the real wheels of 1.0.0 to 1.5.1 and their mutants
(issue 28: every part of the wheel exercised)."""

from __future__ import annotations

import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke.checks import duplicates
from smoke.checks.shipped import read_libraries
from smoke.readers.wheel import read_wheel
from smoke.readers.wheelcopy import rewrite_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import PUBLIC_RELEASES, THREADPOOL, patched, release_wheel

ROW = ROWS["cpu_x86_64"]


def _run(path: Path):
    wheel = read_wheel(path)
    return wheel, read_libraries(wheel)




# --- no duplicate content -------------------------------------------------------------------------------


@pytest.mark.slow  # reads every ELF file of 18 wheels: 49 s here
def test_every_public_release_ships_nothing_twice():
    wheels = [release_wheel(release, machine) for release in PUBLIC_RELEASES for machine in ("x86_64", "aarch64")]
    for path in wheels:
        wheel, libraries = _run(path)
        result = duplicates.check_duplicate_content(wheel, ROW, libraries)
        assert result.status is Status.PASS, (path.name, result.reason)


@pytest.fixture(scope="module")
def slim(wheel_x86_64, tmp_path_factory):
    """PyPI's 1.5.1 with its metadata and shared libraries only (RECORD rewritten)."""
    keep = lambda name: ".dist-info/" in name or ".so" in name.rsplit("/", 1)[-1]  # noqa: E731
    return rewrite_wheel(wheel_x86_64, tmp_path_factory.mktemp("slim"), keep=keep)


def test_a_library_shipped_under_two_names_fails_naming_both(slim, tmp_path):
    assert duplicates.check_duplicate_content(*_run(slim)[:1], ROW, _run(slim)[1]).status is Status.PASS  # the real one
    with zipfile.ZipFile(slim) as archive:
        data = archive.read(THREADPOOL)  # 194 KB: a library is judged at any size
    wheel, libraries = _run(rewrite_wheel(slim, tmp_path, add={"executorch/lib/libexecutorch_threadpool.so.1": data}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.line() == (f"FAIL no duplicate content: {THREADPOOL} and executorch/lib/libexecutorch_threadpool.so.1 are the "
                             f"same {len(data)} B (one file shipped 2 times); ship each once")


def test_two_builds_of_one_library_share_a_soname_and_fail(slim, tmp_path, patchelf):
    with zipfile.ZipFile(slim) as archive:
        other = patched(archive.read("executorch/lib/libexecutorch_etdump.so"), tmp_path, patchelf, "--set-soname", "libexecutorch.so")
    wheel, libraries = _run(rewrite_wheel(slim, tmp_path / "out", add={"executorch/lib/libexecutorch_etdump.so": other}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.line() == ("FAIL no duplicate content: executorch/lib/libexecutorch.so and executorch/lib/libexecutorch_etdump.so "
                             "are one library under 2 names (each has SONAME 'libexecutorch.so'); ship each once")


@pytest.mark.parametrize(("size", "status"), [(1_000_001, Status.WARN), (1_000_000, Status.PASS)])
def test_a_large_data_file_twice_warns_and_a_small_one_does_not(slim, tmp_path, size, status):
    # Two copies of a file that is no library cost the download, not the wheel's working: a WARN (docs/checks.md).
    blob = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    wheel, libraries = _run(rewrite_wheel(slim, tmp_path, add={"executorch/data/a.bin": blob, "executorch/data/copy/a.bin": blob}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.status is status, result.reason
    if status is Status.WARN:
        assert result.measured["same_bytes"] == [["executorch/data/a.bin", "executorch/data/copy/a.bin"]]
        assert result.line().endswith("ship each once (no library among them: it costs the download, not the wheel's working)")


_THREADPOOL_BYTES: list[bytes] = []


def _threadpool() -> bytes:
    if not _THREADPOOL_BYTES:
        with zipfile.ZipFile(release_wheel("1.5.1")) as archive:
            _THREADPOOL_BYTES.append(archive.read(THREADPOOL))
    return _THREADPOOL_BYTES[0]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 8191), st.integers(0, 255)), min_size=1, max_size=24))
def test_a_mutated_library_gives_a_soname_or_none_never_an_exception(changes):
    # The ELF header, program and section headers and .dynamic lie in the first 8 KiB of the real library.
    data = bytearray(_threadpool())
    for at, value in changes:
        data[at] = value
    tracemalloc.start()
    start = time.monotonic()
    try:
        found = duplicates.soname(bytes(data))
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert found is None or isinstance(found, str)
    assert peak < 64 * 1024 * 1024 and time.monotonic() - start < 5
