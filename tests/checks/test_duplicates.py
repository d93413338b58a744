"""smoke.checks.duplicates: `no duplicate content`, on the real wheels of 1.0.0 to 1.5.1 and their mutants
(issue 28: every part of the wheel exercised)."""

from __future__ import annotations

import shutil
import subprocess
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
from tests.helpers import PUBLIC_RELEASES, THREADPOOL, examples, member, patched, release_wheel

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


@pytest.mark.slow
def test_a_library_shipped_under_two_names_fails_naming_both(slim, tmp_path):
    assert duplicates.check_duplicate_content(*_run(slim)[:1], ROW, _run(slim)[1]).status is Status.PASS  # the real one
    with zipfile.ZipFile(slim) as archive:
        data = archive.read(THREADPOOL)  # 194 KB: a library is judged at any size
    wheel, libraries = _run(rewrite_wheel(slim, tmp_path, add={"executorch/lib/libexecutorch_threadpool.so.1": data}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.line() == (f"FAIL no duplicate content: {THREADPOOL} and executorch/lib/libexecutorch_threadpool.so.1 are the "
                             f"same {len(data)} B (one file shipped 2 times); ship each once")


@pytest.mark.slow
def test_two_builds_of_one_library_share_a_soname_and_fail(slim, tmp_path, patchelf):
    with zipfile.ZipFile(slim) as archive:
        other = patched(archive.read("executorch/lib/libexecutorch_etdump.so"), tmp_path, patchelf, "--set-soname", "libexecutorch.so")
    wheel, libraries = _run(rewrite_wheel(slim, tmp_path / "out", add={"executorch/lib/libexecutorch_etdump.so": other}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.line() == ("FAIL no duplicate content: executorch/lib/libexecutorch.so and executorch/lib/libexecutorch_etdump.so "
                             "are one library under 2 names (each has SONAME 'libexecutorch.so'); ship each once")


@pytest.mark.slow
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


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


# --- a second OpenMP runtime in one process (issue 37; pytorch#149422) ---------------------------------------------

OPENMP_SOURCE = """
int omp_get_num_threads(void) { return 1; }
void GOMP_parallel(void (*fn)(void *), void *data, unsigned threads, unsigned flags) { fn(data); }
"""
OPTIMIZED = "executorch/lib/libexecutorch_kernels_optimized.so"


def _openmp_runtime(tmp_path: Path, soname: str) -> bytes:
    """A stand-in OpenMP runtime, compiled here: GNU's entry points, under ``soname``."""
    source = tmp_path / "omp.c"
    source.write_text(OPENMP_SOURCE)
    out = tmp_path / soname
    subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(source)], check=True)
    return out.read_bytes()


needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make a stand-in OpenMP runtime")


@pytest.mark.slow
@needs_cc
def test_a_bundled_renamed_openmp_runtime_beside_torchs_fails(declared_slim, tmp_path, patchelf):
    """The optimized kernels linked against a libgomp bundled under auditwheel's kind of name: torch 2.14 ships its own
    torch/lib/libgomp.so.1 (read from its wheel), and the process loads both. It passed before."""
    runtime = _openmp_runtime(tmp_path, "libgomp-1a2b3c4d.so.1")
    kernels = patched(member(declared_slim, OPTIMIZED), tmp_path, patchelf, "--add-needed", "libgomp-1a2b3c4d.so.1")
    wheel, libraries = _run(rewrite_wheel(declared_slim, tmp_path / "out", add={
        "executorch/lib/libgomp-1a2b3c4d.so.1": runtime, OPTIMIZED: kernels}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.line() == (
        "FAIL no duplicate content: executorch/lib/libgomp-1a2b3c4d.so.1 is an OpenMP runtime (libgomp-1a2b3c4d.so.1), and "
        "torch 2.14 (torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl) ships its own (torch/lib/libgomp.so.1): two OpenMP "
        "runtimes in one process, each with its own threads and state (pytorch#149422); link torch's instead of bundling one")


@pytest.mark.slow
@needs_cc
def test_a_library_that_defines_the_openmp_entry_points_is_a_runtime_whatever_its_name(declared_slim, tmp_path):
    runtime = _openmp_runtime(tmp_path, "libexecutorch_parallel.so")
    wheel, libraries = _run(rewrite_wheel(declared_slim, tmp_path / "out", add={"executorch/lib/libexecutorch_parallel.so": runtime}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.status is Status.FAIL
    assert result.reason.startswith("executorch/lib/libexecutorch_parallel.so is an OpenMP runtime (libexecutorch_parallel.so), "
                                    "and torch 2.14 (")
    assert result.measured["openmp_runtimes"] == {"executorch/lib/libexecutorch_parallel.so": "libexecutorch_parallel.so"}


@pytest.mark.slow
@needs_cc
def test_an_openmp_runtime_under_torchs_own_name_is_the_one_the_loader_keeps(declared_slim, tmp_path):
    # torch's libtorch_cpu.so needs libgomp.so.1: a library already loaded under that SONAME is the one it gets, not a second
    runtime = _openmp_runtime(tmp_path, "libgomp.so.1")
    wheel, libraries = _run(rewrite_wheel(declared_slim, tmp_path / "out", add={"executorch/lib/libgomp.so.1": runtime}))
    result = duplicates.check_duplicate_content(wheel, ROW, libraries)
    assert result.status is Status.PASS, result.reason
    assert result.measured["torch_openmp_runtimes"] == ["torch/lib/libgomp.so.1"]


@pytest.mark.slow
@needs_cc
def test_an_openmp_runtime_beside_a_torch_the_gate_has_not_read_is_judged_only_end_to_end(slim, tmp_path):
    from tests.helpers import make_cuda_wheel

    runtime = _openmp_runtime(tmp_path, "libgomp-1a2b3c4d.so.1")
    wheel = make_cuda_wheel(slim, tmp_path / "out", label="1.5.1+cu126", requirement=None,
                            parts={"executorch/lib/libgomp-1a2b3c4d.so.1": runtime})
    result = duplicates.check_duplicate_content(wheel, ROWS["cuda_x86_64"], read_libraries(wheel))
    assert result.status is Status.SKIP, result.reason
    assert result.reason.startswith(
        "the wheel ships an OpenMP runtime (executorch/lib/libgomp-1a2b3c4d.so.1); whether the torch it runs with loads another "
        "is judged only end to end: the gate has read no torch 2.14 cu126 wheel for x86_64")
