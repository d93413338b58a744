"""smoke.engine.row (through smoke.commands.gate): a row's run, as ``python -m smoke ROW`` runs it.

A row that must execute never PASSes with the seed's checks skipped (``unexecuted``, smoke.stages.MUST_EXECUTE);
a CPU build on a CUDA row with --fail-fast ends before any environment; a macOS or Windows row on this host
runs its file checks and says why the rest skipped.

Where the gate writes, and the machine it writes on (issue 23, classes 4 and 10): every output path
(the report folder and its two reports, the step summary, the environment and work folders) is refused
before any work, with one ERROR line naming the option, and nothing there is touched; a report that
still cannot be written at the end leaves the verdict printed and its exit code; a disk full or a
read-only folder during the run is an ERROR naming the folder (exit 2), never a FAIL of the wheel. The
wheel is PyPI's 1.5.1 (x86_64): it fails `libraries resolve` at the file checks, so a run with
--fail-fast reaches its verdict in about a second, before any environment. A real full or read-only
file system is a tiny tmpfs where this machine lets the tests mount one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke import cli, report, stages
from smoke.engine import row as gate_module
from smoke.environment import build as environment
from smoke.errors import GateError
from smoke.results import failed, passed, skipped
from smoke.rows import ROWS
from tests.helpers import (
    REPO,
    examples,
    failed_ours,
    line,
    lines,
    nox,
    smoke,
)


def _all_passed():
    return [passed(name, "ok") for name in stages.MUST_EXECUTE]


def test_nothing_unrun_when_every_seed_check_passed_or_failed():
    results = _all_passed()
    results[0] = failed(results[0].name, "raised")
    assert gate_module.unexecuted(results) == []


def test_a_skipped_seed_check_is_named_with_its_reason():
    results = [r if r.name != stages.WEIGHTS.name else skipped(r.name, "not run: a data file is missing or unreadable")
               for r in _all_passed()]
    assert gate_module.unexecuted(results) == ["weights in the data file (skipped: not run: a data file is missing or unreadable)"]


def test_a_seed_check_never_reported_is_named():
    results = [r for r in _all_passed() if r.name != stages.NEGATIVE.name]
    assert gate_module.unexecuted(results) == ["negative control (weighted, no data file) (not reported)"]


def test_skips_for_one_reason_are_named_together():
    why = "not run: no usable CUDA device"
    results = [skipped(r.name, why) if r.name.startswith("export") else r for r in _all_passed()]
    assert gate_module.unexecuted(results) == [f"export (weightless), export (weighted) (skipped: {why})"]


@pytest.mark.slow
def test_cpu_build_on_cuda_row_with_fail_fast_ends_before_any_environment(wheel_x86_64, tmp_path):
    start = time.monotonic()
    proc = nox("-s", "cuda_x86_64", "--", str(wheel_x86_64), "--fail-fast", "--env-dir", str(tmp_path / "env"))
    seconds = time.monotonic() - start
    assert proc.returncode == 1  # the wheel failed the gate
    assert "FAIL CUDA build: 'executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl' is a CPU build" in proc.stdout
    # wheel tags, foreign files, start-up code, torch requirement, platform tag and architecture, then CUDA build
    assert "6 passed, 1 failed, 0 skipped" in proc.stdout
    assert f"a CPU build is gated by the CPU row: nox -s cpu_x86_64 -- {wheel_x86_64}" in proc.stdout
    assert not (tmp_path / "env").exists()
    assert seconds < 20


@pytest.mark.slow
def test_cpu_build_on_cuda_row_stops_after_its_file_checks(wheel_x86_64, tmp_path):
    """Without --fail-fast too: a CPU build cannot pass a CUDA row's installed half, so no environment is built for it
    (75 s before): its file checks, one line naming its row, and the installed half skipped saying why."""
    import resource

    def cpu() -> float:  # the processes' CPU time, which a machine busy with other tests does not stretch as it does the wall clock
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    start = cpu()
    proc = smoke("cuda_x86_64", wheel_x86_64, "--env-dir", tmp_path / "env")
    seconds = cpu() - start
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the wheel failed the gate
    assert "FAIL CUDA build: 'executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl' is a CPU build" in proc.stdout
    assert "PASS wheel RECORD: " in proc.stdout  # every file check ran
    assert line(proc, "the environment is not built: ") == (
        "the environment is not built: the wheel is a CPU build, which the cuda_x86_64 row cannot run; its row is "
        "cpu_x86_64 (see CUDA build)")
    installed_half = lines(proc, "SKIP ")[1:]  # after the file checks' own skip of device code
    assert installed_half[0] == "SKIP torch agrees: not run: the wheel is a CPU build (see CUDA build)"
    assert len(installed_half) >= 15 and all(skip.endswith(": not run: the wheel is a CPU build (see CUDA build)")
                                             for skip in installed_half), installed_half
    assert not (tmp_path / "env").exists() and "building the environment" not in proc.stdout
    assert seconds < 10


@pytest.mark.slow
@pytest.mark.network
def test_the_macos_row_on_a_linux_host_runs_its_file_checks_and_says_why_the_rest_skipped(macos_declared, tmp_path):
    proc = smoke("cpu_macos_arm64", macos_declared, "--env-dir", tmp_path / "env", "--report-dir", tmp_path / "reports")
    assert proc.returncode in (0, 1) and not failed_ours(proc) and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "PASS platform tag: " in proc.stdout and "PASS wheel RECORD: " in proc.stdout
    assert line(proc, "the cpu_macos_arm64 row installs and runs the wheel on macOS only, and this host is Linux ").endswith(
        "its file checks judged the wheel here; run the row on macOS (the workflow's macos-14) for the rest")
    skips = lines(proc, "SKIP ")
    why = "not run: the cpu_macos_arm64 row installs and runs the wheel on macOS only (this host: Linux "
    assert len(skips) >= 15 and all(why in skip for skip in skips), skips
    assert any(s.startswith("SKIP run with data file (weighted): not run: ") for s in skips)
    assert not (tmp_path / "env").exists()


@pytest.mark.slow
@pytest.mark.network
def test_the_windows_row_runs_its_file_checks_and_skips_its_installed_half_saying_it_is_not_built(windows_1_0_0, tmp_path):
    """No Windows host runs the installed half yet: the row says so and records each skip, on any host. Its file
    checks judge the wheel: 1.0.0 imports pytorch_tokenizers and huggingface_hub undeclared on the LLM export path
    (executorch#15283), on Windows as on Linux, and nothing else fails."""
    proc = smoke("cpu_windows_x86_64", windows_1_0_0, "--env-dir", tmp_path / "env")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert [fail.split(":")[0] for fail in lines(proc, "FAIL ")] == ["FAIL imports declared"], proc.stdout
    assert line(proc, "FAIL imports declared: ").startswith("FAIL imports declared: 2 third-party modules imported when the "
                                                            "package is imported, not in Requires-Dist: huggingface_hub")
    assert line(proc, "the cpu_windows_x86_64 row's installed half (environment, export, load and run on Windows) is not built yet")
    skips = lines(proc, "SKIP ")
    assert len(skips) >= 15 and all("not run: the Windows row's installed half is not built yet" in s for s in skips), skips
    assert not (tmp_path / "env").exists()


def gate(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "smoke", "cpu_x86_64", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **(env or {})}, timeout=timeout)


def one_error_line(proc, text):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ERROR ") and "Traceback" not in proc.stderr, proc.stderr
    assert text in proc.stderr, proc.stderr


# --- output paths refused before any work ------------------------------------------------------

def _report_is_a_folder(tmp):
    (tmp / "reports" / "cpu_x86_64.json").mkdir(parents=True)
    return ["--report-dir", tmp / "reports"], "cpu_x86_64.json' is a folder, which the gate will not replace"


def _report_is_a_dangling_link(tmp):
    (tmp / "reports").mkdir()
    (tmp / "reports" / "cpu_x86_64.xml").symlink_to(tmp / "nowhere")
    return ["--report-dir", tmp / "reports"], "cpu_x86_64.xml' is a dangling link, which the gate will not replace"


def _report_links_to_a_users_file(tmp):
    (tmp / "reports").mkdir()
    (tmp / "reports" / "cpu_x86_64.json").symlink_to(tmp / "mine" / "thesis.tex")
    return ["--report-dir", tmp / "reports"], "cpu_x86_64.json' is a link, which the gate will not replace"


def _report_is_a_users_file(tmp):
    (tmp / "reports").mkdir()
    (tmp / "reports" / "cpu_x86_64.json").write_text("three years of work")
    return ["--report-dir", tmp / "reports"], "cpu_x86_64.json' is a file the gate did not write, which the gate will not replace"


def _report_dir_is_a_file(tmp):
    return ["--report-dir", tmp / "mine" / "thesis.tex"], "thesis.tex' is not a writable directory"


def _report_dir_is_a_dangling_link(tmp):
    (tmp / "reports").symlink_to(tmp / "nowhere")
    return ["--report-dir", tmp / "reports"], "reports' is a dangling link; pass --report-dir with a folder you can write"


def _report_dir_name_too_long(tmp):
    return ["--report-dir", tmp / ("r" * 256)], "has a name of 256 bytes"


def _report_dir_path_too_long(tmp):
    return ["--report-dir", tmp / "/".join(["r" * 200] * 21)], "the file system holds paths under 4096: pass a shorter one"


def _env_dir_name_too_long(tmp):
    return ["--env-dir", tmp / ("e" * 300)], "has a name of 300 bytes"


def _workdir_path_too_long(tmp):
    return ["--workdir", tmp / "/".join(["w" * 250] * 17)], "the file system holds paths under 4096: pass a shorter one"


def _env_dir_in_workdir(tmp):
    return ["--workdir", tmp / "work", "--env-dir", tmp / "work" / "env"], "--env-dir '" + str(tmp / "work" / "env") + "' is inside --workdir"


def _env_dir_is_workdir(tmp):
    return ["--workdir", tmp / "env"], "--env-dir '" + str(tmp / "env") + "' is --workdir"


def _workdir_in_env_dir(tmp):
    return ["--workdir", tmp / "env" / "work"], "--env-dir '" + str(tmp / "env") + "' holds --workdir"


def _workdir_is_a_link_to_the_env_dir(tmp):
    (tmp / "env").mkdir()
    (tmp / "work").symlink_to(tmp / "env")
    return ["--workdir", tmp / "work"], "' is --workdir"


def _report_dir_in_workdir(tmp):
    return ["--workdir", tmp / "work", "--report-dir", tmp / "work" / "reports"], "holds --report-dir"


def _env_dir_in_report_dir(tmp):
    return ["--report-dir", tmp, "--env-dir", tmp / "env"], "is inside --report-dir"


def _env_dir_is_the_gates_own_folder(tmp):
    return ["--env-dir", REPO / ".gate"], "is the gate's own folder of environments and downloads"


def _workdir_holds_the_checkout(tmp):  # the checkout itself: its parent may hold the test's own folders (a clone in /tmp)
    # Where TMPDIR is inside the checkout (TMPDIR=.nox/tests/tmp), the test's --env-dir is inside that --workdir, refused first.
    return ["--workdir", REPO], "is inside --workdir" if tmp.resolve().is_relative_to(REPO.resolve()) else "holds"


def _env_dir_holds_the_wheel(tmp):
    return ["--env-dir", tmp / "wheels"], "holds the wheel"


def _step_summary_is_a_folder(tmp):
    (tmp / "summary").mkdir()
    return [], "GITHUB_STEP_SUMMARY '" + str(tmp / "summary") + "' is a folder, not a file it can append to"


def _step_summary_is_a_fifo(tmp):  # opening it to append would wait for a reader for ever
    os.mkfifo(tmp / "summary")
    return [], "GITHUB_STEP_SUMMARY '" + str(tmp / "summary") + "' is a FIFO, not a file it can append to"


BAD_OUTPUTS = [_report_is_a_folder, _report_is_a_dangling_link, _report_links_to_a_users_file, _report_is_a_users_file,
               _report_dir_is_a_file, _report_dir_is_a_dangling_link, _report_dir_name_too_long, _report_dir_path_too_long,
               _env_dir_name_too_long, _workdir_path_too_long, _env_dir_in_workdir, _env_dir_is_workdir,
               _workdir_in_env_dir, _workdir_is_a_link_to_the_env_dir, _report_dir_in_workdir, _env_dir_in_report_dir,
               _env_dir_is_the_gates_own_folder, _workdir_holds_the_checkout, _env_dir_holds_the_wheel, _step_summary_is_a_folder,
               _step_summary_is_a_fifo]


def _tree(folder: Path) -> dict[str, bytes | str]:
    return {str(p.relative_to(folder)): (os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir")
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("case", BAD_OUTPUTS, ids=[case.__name__.strip("_") for case in BAD_OUTPUTS])
def test_a_bad_output_path_is_one_line_before_any_work_and_touches_nothing(wheel_x86_64, tmp_path, case):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("three years of work")
    (tmp_path / "wheels").mkdir()
    wheel = tmp_path / "wheels" / wheel_x86_64.name
    wheel.symlink_to(wheel_x86_64)
    args, message = case(tmp_path)
    summary = {"GITHUB_STEP_SUMMARY": str(tmp_path / "summary")} if "step_summary" in case.__name__ else {}
    before = _tree(tmp_path)
    args = [*args, "--env-dir", tmp_path / "env"] if "--env-dir" not in args else args
    proc = gate(wheel, *args, "--fail-fast", env=summary, timeout=30)  # a FIFO opened to append would hang: bounded
    one_error_line(proc, message)
    assert proc.stdout == ""  # nothing ran: not even the wheel was read
    assert _tree(tmp_path) == before  # nothing made, nothing touched (the user's file, the links, the wheel)
    assert not list(REPO.glob("tests/env-*"))


# --- a report that cannot be written at the end: the verdict stands ---------------------------------

@pytest.mark.slow
def test_a_step_summary_that_is_full_at_the_end_keeps_the_verdict(wheel_x86_64, tmp_path):
    """/dev/full takes the open and refuses the write with ENOSPC: a real disk full, at the end."""
    proc = gate(wheel_x86_64, "--fail-fast", "--env-dir", tmp_path / "env", "--report-dir", tmp_path / "reports",
                env={"GITHUB_STEP_SUMMARY": "/dev/full"})
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the wheel's verdict, not 2, not a traceback
    assert proc.stdout.splitlines()[-1].startswith("cpu_x86_64: FAILED: ")
    assert proc.stderr == ("ERROR GITHUB_STEP_SUMMARY '/dev/full' could not be appended to (No space left on device); "
                           "the verdict above stands (exit 1), without that file\n")
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["cpu_x86_64.json", "cpu_x86_64.xml"]
    assert not (tmp_path / "env").exists()


def _in_process(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_a_report_that_fails_to_write_at_the_end_keeps_the_verdict_and_leaves_no_part(wheel_x86_64, tmp_path, monkeypatch, capsys):
    real_replace = os.replace

    def full(src, dst):
        if str(dst).endswith(".xml"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(src, dst)

    monkeypatch.setattr(report.os, "replace", full)
    reports = tmp_path / "reports"
    code, out, err = _in_process(["cpu_x86_64", wheel_x86_64, "--fail-fast", "--env-dir", tmp_path / "env",
                                  "--report-dir", reports], capsys)
    assert code == 1
    assert out.splitlines()[-1].startswith("cpu_x86_64: FAILED: ")
    assert err == (f"ERROR report '{reports / 'cpu_x86_64.xml'}' could not be written (No space left on device); "
                   f"the verdict above stands (exit 1), without that file\n")
    assert sorted(p.name for p in reports.iterdir()) == ["cpu_x86_64.json"]  # whole, and no partial file beside it


@pytest.mark.slow
def test_a_report_made_a_link_during_the_run_is_not_written_through(wheel_x86_64, tmp_path, monkeypatch, capsys):
    """Checked before the work and again at the write: a link put there meanwhile is left, and so is its target."""
    reports, target = tmp_path / "reports", tmp_path / "mine.json"
    reports.mkdir()
    target.write_text("mine")
    real = gate_module.shipped.read_libraries

    def and_meanwhile(*args, **kwargs):
        (reports / "cpu_x86_64.json").symlink_to(target)
        return real(*args, **kwargs)

    monkeypatch.setattr(gate_module.shipped, "read_libraries", and_meanwhile)
    code, out, err = _in_process(["cpu_x86_64", wheel_x86_64, "--fail-fast", "--env-dir", tmp_path / "env",
                                  "--report-dir", reports], capsys)
    assert code == 1 and out.splitlines()[-1].startswith("cpu_x86_64: FAILED: ")
    assert err.startswith(f"ERROR report '{reports / 'cpu_x86_64.json'}' is a link, which the gate will not replace")
    assert target.read_text() == "mine" and (reports / "cpu_x86_64.json").is_symlink()


@pytest.mark.slow
def test_an_earlier_report_of_the_gates_is_replaced(wheel_x86_64, tmp_path):
    for _ in range(2):
        proc = gate(wheel_x86_64, "--fail-fast", "--env-dir", tmp_path / "env", "--report-dir", tmp_path / "reports")
        assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["cpu_x86_64.json", "cpu_x86_64.xml"]


# --- the machine, not the wheel ----------------------------------------------------------------------

def _raising(error: OSError):
    @contextlib.contextmanager
    def built(*args, **kwargs):
        raise error
        yield

    return built


@pytest.mark.slow
def test_a_disk_full_while_the_environment_is_built_is_an_error_naming_the_env_dir(wheel_x86_64, tmp_path, monkeypatch, capsys):
    """Without --fail-fast the run goes on to the environment: a write there meets ENOSPC."""
    env_dir = tmp_path / "env"
    monkeypatch.setattr(environment, "built", _raising(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(env_dir / ".gate-stamp.partial"))))
    code, out, err = _in_process(["cpu_x86_64", wheel_x86_64, "--env-dir", env_dir], capsys)
    assert code == 2, out + err
    assert err == (f"ERROR building the environment: No space left on device in '{env_dir}' ({env_dir / '.gate-stamp.partial'}); "
                   f"the machine, not the wheel: free space there (or pass another --env-dir), then run again\n")
    assert "PASSED" not in out and "FAILED" not in out


class _Env:
    def __init__(self, tmp_path):
        self.python, self.torch_source, self.location = Path(sys.executable), "test", tmp_path / "env"


@contextlib.contextmanager
def _built(tmp_path):
    yield _Env(tmp_path)


def test_a_read_only_work_folder_during_the_run_is_an_error_naming_it(wheel_x86_64, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(environment, "built", lambda *a, **k: _built(tmp_path))

    def read_only(cmd, record, log, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))  # a write to the open log: no file name in the error

    monkeypatch.setattr(gate_module, "run_child", read_only)
    work = tmp_path / "work"
    code, out, err = _in_process(["cpu_x86_64", wheel_x86_64, "--env-dir", tmp_path / "env", "--workdir", work], capsys)
    assert code == 2, out + err
    assert err == (f"ERROR the child's record and log: Read-only file system in '{work}'; the machine, not the wheel: "
                   f"make it writable (or pass another --workdir), then run again\n")


@pytest.mark.slow
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
def test_a_child_check_that_failed_on_a_full_disk_is_not_a_fail_of_the_wheel(wheel_x86_64, tmp_path, monkeypatch, capsys, code):
    """The child's export meets the full disk and reports it as its check's failure: no FAIL verdict comes of it."""
    monkeypatch.setattr(environment, "built", lambda *a, **k: _built(tmp_path))

    def child(cmd, record, log, timeout, env, events, *args, **kwargs):
        events.check(failed("export (weighted)", f"OSError: [Errno {code}] {os.strerror(code)}: '{record.parent}/weighted/model.pte'"))
        return _Outcome()

    monkeypatch.setattr(gate_module, "run_child", child)
    monkeypatch.setattr(gate_module, "judge_child", lambda *a: None)
    work = tmp_path / "work"
    code_, out, err = _in_process(["cpu_x86_64", wheel_x86_64, "--env-dir", tmp_path / "env", "--workdir", work], capsys)
    assert code_ == 2, out + err
    assert err.startswith(f"ERROR export (weighted) could not write to the work folder '{work}': {os.strerror(code)}; "
                          f"the machine, not the wheel"), err
    assert err.count("\n") == 1 and "FAILED" not in out


class _Outcome:
    facts: dict = {}
    probe = {"torch": "x"}


# A real file system, full or read-only: a tiny tmpfs, where this machine lets the tests mount one.
@pytest.fixture
def tiny_tmpfs(tmp_path):
    where = tmp_path / "tmpfs"
    where.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=64", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"no tmpfs can be mounted here ({made.stderr.strip()}); the monkeypatched cases stand in")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_a_really_read_only_work_folder_is_refused_before_any_work(wheel_x86_64, tmp_path, tiny_tmpfs):
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_tmpfs)], check=True)
    proc = gate(wheel_x86_64, "--env-dir", tmp_path / "env", "--workdir", tiny_tmpfs / "work", "--fail-fast")
    one_error_line(proc, f"--workdir '{tiny_tmpfs / 'work'}' cannot be made or written ('{tiny_tmpfs}': Read-only file system)")
    assert not (tmp_path / "env").exists()


@pytest.mark.slow
def test_a_really_full_report_folder_at_the_end_keeps_the_verdict(wheel_x86_64, tmp_path, tiny_tmpfs):
    """The folder takes an empty file (the check before the work) but not a report: ENOSPC at the end, for real."""
    handle = os.open(tiny_tmpfs / "filler", os.O_WRONLY | os.O_CREAT)
    with contextlib.suppress(OSError):
        while True:
            os.write(handle, b"\0" * 4096)
    os.close(handle)
    proc = gate(wheel_x86_64, "--fail-fast", "--env-dir", tmp_path / "env", "--report-dir", tiny_tmpfs)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("cpu_x86_64: FAILED: ")
    assert proc.stderr == (f"ERROR report '{tiny_tmpfs / 'cpu_x86_64.json'}' could not be written (No space left on device); "
                           f"the verdict above stands (exit 1), without that file\n")
    assert sorted(p.name for p in tiny_tmpfs.iterdir()) == ["filler"]  # no partial report left


# --- the folder checks, driven by hypothesis ----------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "env", "work", "r", "..", ".", "x" * 255, "y" * 256, "mine", "wheels"])
PLACES = st.lists(NAMES, min_size=0, max_size=4).map(lambda parts: "/".join(parts))


def _options(tmp: Path, env: str, work: str | None, reports: str | None, wheel: Path):
    from smoke import options as opts

    return opts.Options(wheel=wheel, env_dir=tmp / env if env else tmp, workdir=tmp / work if work is not None else None,
                        report_dir=tmp / reports if reports is not None else None)


def _judge(tmp: Path, env, work, reports, wheel) -> None:
    options = _options(tmp, env, work, reports, wheel)
    try:
        gate_module.check_outputs(ROWS["cpu_x86_64"], options, options.env_dir)
    except GateError:
        return
    # Accepted: the folders are apart, none holds the wheel, each path is one the file system can hold.
    emptied = [Path(os.path.realpath(p)) for p in (options.env_dir, options.workdir) if p is not None]
    real = emptied + ([Path(os.path.realpath(options.report_dir))] if options.report_dir is not None else [])
    for i, a in enumerate(real):
        assert all(len(os.fsencode(part)) <= 255 for part in a.parts)
        for b in real[i + 1:]:
            assert not gate_module._inside(a, b) and not gate_module._inside(b, a), (a, b)
    for folder in emptied:
        assert not gate_module._inside(Path(os.path.realpath(wheel)), folder)


def _check_many(tmp_path, max_examples):
    (tmp_path / "wheels").mkdir(exist_ok=True)
    wheel = tmp_path / "wheels" / "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.touch()
    before = _tree(tmp_path)

    @settings(max_examples=examples(max_examples), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(PLACES, st.none() | PLACES, st.none() | PLACES)
    def check(env, work, reports):
        _judge(tmp_path, env, work, reports, wheel)

    tracemalloc.start()
    try:
        check()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak
    assert _tree(tmp_path) == before  # the checks made nothing and left nothing (their probe files included)


@pytest.mark.slow
def test_the_folder_checks_accept_only_folders_apart(tmp_path):
    _check_many(tmp_path, 300)


@pytest.mark.slow
def test_the_folder_checks_accept_only_folders_apart_many(tmp_path):
    _check_many(tmp_path, 5000)


def test_each_step_of_a_row_takes_and_returns_frozen_products():
    """Issue 46: a row's steps pass products forward, never a shared mutable bag. Every parameter of a step is the
    run's Context or a frozen dataclass an earlier step returned (the file checks' thread, FileWork, the one object
    that changes as it runs), and every step returns such a product, STOP or nothing."""
    import dataclasses
    import typing

    steps = (gate_module.outputs_and_input, gate_module.wheel_read, gate_module.files_only_elsewhere,
             gate_module.wheel_said, gate_module.files_checked, gate_module.environment_built,
             gate_module.environment_probed, gate_module.child_run)
    called = {name for name in gate_module.steps.__code__.co_names}
    assert {step.__name__ for step in steps} <= called

    def frozen(kind) -> bool:
        return dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen

    for step in steps:
        hints = typing.get_type_hints(step)
        returned = hints.pop("return")
        for name, kind in hints.items():
            assert frozen(kind) or kind is gate_module.FileWork or kind is str, (step.__name__, name, kind)
        for kind in typing.get_args(returned) or (returned,):
            assert kind is type(None) or frozen(kind) or kind in (gate_module.FileWork, gate_module.owned.Owned), (
                step.__name__, kind)


# --- a machine that cannot run the C++ checks of a wheel that ships a C++ runtime (issue 56) ----------------------

@pytest.mark.parametrize("how", ["a CXX that does not exist", "a CXX that fails", "no compiler on PATH"])
def test_a_machine_without_the_cpp_tools_is_one_error_naming_them_never_a_pass_with_skips(wheel_x86_64, tmp_path, how):
    """1.5.1 ships a C++ runtime: its six C++ checks must execute. Without a compiler the row PASSed with them skipped; a
    broken CXX FAILed the wheel (exit 1) on a CMake error. Both are the machine's: one ERROR line, exit 2, before
    anything is built."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {"CXX": ""}
    if how == "a CXX that does not exist":
        env["CXX"] = "/nonexistent/g++"
    elif how == "a CXX that fails":
        broken = bin_dir / "broken-g++"
        broken.write_text("#!/bin/sh\necho 'broken-g++: cannot find its own cc1plus' >&2\nexit 1\n")
        broken.chmod(0o755)
        env["CXX"] = str(broken)
    else:
        env["PATH"] = f"{bin_dir}:{Path(sys.executable).parent}"
    proc = gate(wheel_x86_64, "--env-dir", tmp_path / "env", env=env)
    one_error_line(proc, "the wheel ships a C++ runtime (executorch/lib/libexecutorch.so), whose checks must run here")
    fix = {"a CXX that does not exist": "the C++ compiler '/nonexistent/g++' (from CXX) cannot run",
           "a CXX that fails": "(from CXX) exited 1 when asked its version: broken-g++: cannot find its own cc1plus",
           "no compiler on PATH": "no C++ compiler (c++, g++ or clang++ on PATH, or CXX): install one (Debian and Ubuntu: "
                                  "apt install g++), or set CXX to one"}[how]
    one_error_line(proc, fix)
    assert "PASS" not in proc.stdout and "FAIL" not in proc.stdout and not (tmp_path / "env").exists()
