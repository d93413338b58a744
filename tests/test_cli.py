"""What a user sees from `nox -s ROW -- ...`: the lines, the exit code, and nothing built on refusal."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile

import pytest

from tests.helpers import REPO, nox, rewrite_wheel


def test_nox_lists_every_row_with_a_description():
    out = nox("-l").stdout
    for row in ("cuda_x86_64", "cuda_aarch64", "cpu_x86_64", "cpu_aarch64", "inspect", "summary", "tests"):
        assert f"{row} -> " in out


def test_cpu_build_on_cuda_row_with_fail_fast_ends_before_any_environment(wheel_x86_64, tmp_path):
    start = time.monotonic()
    proc = nox("-s", "cuda_x86_64", "--", str(wheel_x86_64), "--fail-fast", "--env-dir", str(tmp_path / "env"))
    seconds = time.monotonic() - start
    assert proc.returncode == 1  # the wheel failed the gate
    assert "FAIL CUDA build: 'executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl' is a CPU build" in proc.stdout
    assert "4 passed, 1 failed, 0 skipped" in proc.stdout  # wheel tags, foreign files, platform tag and architecture, then CUDA build
    assert f"a CPU build is gated by the CPU row: nox -s cpu_x86_64 -- {wheel_x86_64}" in proc.stdout
    assert not (tmp_path / "env").exists()
    assert seconds < 20


def test_wrong_architecture_is_refused_with_the_right_session(wheel_x86_64, tmp_path):
    proc = nox("-s", "cuda_aarch64", "--", str(wheel_x86_64), "--env-dir", str(tmp_path / "env"))
    assert proc.returncode == 2  # the gate could not run
    assert "cuda_aarch64 could not run (exit 2)" in proc.stderr
    assert "ERROR wheel 'executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl' is built for x86_64; " \
           "the cuda_aarch64 row needs aarch64 (use nox -s cuda_x86_64)" in proc.stderr
    assert not (tmp_path / "env").exists()


def _not_a_zip(tmp, wheel):
    path = tmp / "in" / wheel.name
    path.write_text("not a zip")
    return path


def _zip_not_a_wheel(tmp, wheel):
    path = tmp / "in" / wheel.name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "no dist-info here")
    return path


def _other_project(tmp, wheel):
    return rewrite_wheel(wheel, tmp / "in", new_name=wheel.name.replace("executorch-", "notexecutorch-"))


def _other_python(tmp, wheel):
    return rewrite_wheel(wheel, tmp / "in", new_name=wheel.name.replace("cp311-cp311", "cp312-cp312"))


def _aarch64_wheel(tmp, wheel):
    from tests.helpers import pypi_wheel

    return pypi_wheel("aarch64")


# Bad input, each with one line and exit 2: (row, arguments, what the line must say).
# {wheel} is PyPI's x86_64 wheel, {tmp} a fresh folder; a callable makes the bad file.
BAD_INPUT = [
    ("cuda_x86_64", ["--wheel-index", "file:///nonexistent/index"], "no wheel given and none could be downloaded"),
    ("cuda_x86_64", ["/nonexistent/executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"], "does not exist"),
    ("cuda_x86_64", ["{tmp}"], "is not a file"),
    ("cuda_x86_64", [_not_a_zip], "cannot be read as a wheel archive"),
    ("cuda_x86_64", [_zip_not_a_wheel], "has no .dist-info folder"),
    ("cuda_x86_64", [_other_project], "is of project 'notexecutorch', not 'executorch'"),
    ("cuda_aarch64", ["{wheel}"], "the cuda_aarch64 row needs aarch64 (use nox -s cuda_x86_64)"),
    ("cpu_x86_64", [_other_python], "is for cp312; this session's interpreter is cpython 3.11"),
    ("gpu_x86_64", ["{wheel}"], "argument row: invalid choice: 'gpu_x86_64'"),
    ("cuda_x86_64", ["{wheel}", "--no-such-option"], "ERROR unrecognized arguments: --no-such-option"),
    ("cuda_x86_64", ["{wheel}", "--constraints", "{tmp}/missing.txt"], "constraints file"),
    ("cuda_x86_64", ["{wheel}", "--wheelhouse", "{tmp}/missing"], "is not a directory"),
    ("cuda_x86_64", ["{wheel}", "--report-dir", "{wheel}/reports"], "/reports' cannot be written"),
    ("cpu_x86_64", ["{wheel}", "--timeout", "0"], "argument --timeout: '0' is not a time limit: give seconds above 0"),
    ("cpu_x86_64", ["{wheel}", "--timeout", "-5"], "argument --timeout: '-5' is not a time limit"),
    ("cpu_x86_64", ["{wheel}", "--timeout", "nan"], "argument --timeout: 'nan' is not a time limit"),
    ("cpu_x86_64", ["{wheel}", "--python", "/bin/echo"], "'/bin/echo' is not a Python interpreter"),
    ("cpu_x86_64", ["{wheel}", "--torch-from", "{tmp}"], "has no torch in lib/python3*/site-packages"),
    ("cpu_aarch64", [_aarch64_wheel], "the cpu_aarch64 row needs an aarch64 interpreter; cpython 3.11"),
]


@pytest.mark.parametrize(("row", "args", "message"), BAD_INPUT, ids=[m for _, _, m in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2_and_leaves_nothing(wheel_x86_64, tmp_path, row, args, message):
    (tmp_path / "in").mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    args = [str(a(tmp_path, wheel_x86_64)) if callable(a) else a.format(tmp=tmp_path / "in", wheel=wheel_x86_64) for a in args]
    proc = subprocess.run([sys.executable, "-m", "smoke", row, *args, "--env-dir", str(tmp_path / "env")],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "TMPDIR": str(scratch)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ERROR ") and "Traceback" not in proc.stderr
    assert not (tmp_path / "env").exists()
    assert not list(scratch.iterdir())  # no artifacts folder, nothing left behind


def test_every_option_of_the_table_is_in_help_and_in_docs_options_md():
    from smoke import cli, options

    shown = cli.parser("cpu_x86_64").format_help()
    page = (REPO / "docs" / "options.md").read_text()
    flags = [opt.flag for opt in options.ROW_OPTIONS if opt.flag]
    assert len(flags) == len(options.ROW_OPTIONS) - 1  # all but the wheel itself
    for flag in flags:
        assert flag in shown, flag
        assert f"`{flag}" in page, flag
    # the page's table is the one the options table makes, word for word
    assert options.markdown() in page


def test_the_childs_arguments_come_from_the_same_table():
    from smoke import options

    given = options.Options(fail_fast=True, overlap=False, parallel_exports="yes")
    words = options.child_arguments(given)
    assert words == ["--fail-fast", "--no-overlap", "--parallel-exports", "yes"]
    parsed = options.child_parser(__import__("argparse").ArgumentParser()).parse_args(words)
    assert (parsed.fail_fast, parsed.overlap, parsed.parallel_exports) == (True, False, "yes")
    assert options.child_arguments(options.Options()) == []  # the defaults pass nothing


def test_a_tool_of_the_gates_own_missing_is_one_error_naming_it_and_the_fix(wheel_x86_64, tmp_path):
    """The first H200 call of 2026-12-04 stopped at a ModuleNotFoundError traceback (macholib not installed there)."""
    code = ("import sys; sys.modules['macholib'] = None; from smoke import cli; "
            f"raise SystemExit(cli.main([{str(wheel_x86_64)!r}, '--env-dir', {str(tmp_path / 'env')!r}], row='cpu_x86_64'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("ERROR the gate's own tool 'macholib' is not installed in ")
    assert proc.stderr.rstrip().endswith("install requirements-gate.txt there (python -m pip install -r requirements-gate.txt)")
