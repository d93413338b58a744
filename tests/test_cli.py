"""smoke.cli: what a user sees from `nox -s ROW -- ...` and ``python -m smoke ROW``: the lines, the exit code,
and nothing built on refusal.

The gate under a hostile user: folders that are not its own, damaged and oversized wheels, concurrent
runs and interrupts. Inputs are made at test time; each case asserts the exit code, the one line the
user sees, and that nothing was deleted or left behind. The lock and interrupt cases run real processes.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO, nox, rewrite_wheel, script_child


def test_nox_lists_every_row_with_a_description():
    out = nox("-l").stdout
    for row in ("cuda_x86_64", "cuda_aarch64", "cpu_x86_64", "cpu_aarch64", "inspect", "summary", "tests"):
        assert f"{row} -> " in out


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
    ("cpu_x86_64", ["--wheel-index", "file:///nonexistent/index", "--wheel-version", "1.4.1"],
     "none could be downloaded from file:///nonexistent/index (executorch 1.4.1: "),
    ("cpu_x86_64", ["--wheel-version", "1.x"], "argument --wheel-version: '1.x' is not a version (PEP 440)"),
    ("cpu_x86_64", ["{wheel}", "--pre"], "--pre chooses the wheel to download when none is given, and '"),
    ("cpu_x86_64", ["{wheel}", "--wheel-version", "1.4.1"], "pass the wheel or --wheel-version, not both"),
    ("cpu_x86_64", ["{wheel}", "--no-overlap", "--parallel-exports", "yes"],
     "--parallel-exports yes exports beside the overlapped child, and --no-overlap runs the serial way: pass one, not both"),
    ("cpu_x86_64", ["{wheel}", "--wheelhouse", "{tmp}", "--torch-index", "https://download.pytorch.org/whl/cpu"],
     "--wheelhouse installs from that folder alone, with no package index, so --torch-index would be dropped"),
    ("cpu_x86_64", ["{wheel}", "--torch-from", "{tmp}", "--torch-index", "https://download.pytorch.org/whl/cpu"],
     "--torch-from takes torch from that environment, so --torch-index would be dropped: pass one, not both"),
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


@pytest.mark.slow
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


def test_a_tool_of_the_gates_own_missing_is_one_error_naming_it_and_the_fix(wheel_x86_64, tmp_path):
    """The first H200 call of 2026-12-04 stopped at a ModuleNotFoundError traceback (macholib not installed there)."""
    code = ("import sys; sys.modules['macholib'] = None; from smoke import cli; "
            f"raise SystemExit(cli.main([{str(wheel_x86_64)!r}, '--env-dir', {str(tmp_path / 'env')!r}], row='cpu_x86_64'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("ERROR the gate's own tool 'macholib' is not installed in ")
    assert proc.stderr.rstrip().endswith("install requirements-gate.txt there (python -m pip install -r requirements-gate.txt)")


# --- the gate under a hostile user ----------------------------------------------------------------

def gate(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "smoke", *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def one_error_line(proc, text):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ERROR ") and "Traceback" not in proc.stderr, proc.stderr
    assert text in proc.stderr, proc.stderr


def users_folder(tmp_path) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("three years of work")
    return folder


# --- folders the gate did not make ----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("option", ["--env-dir", "--workdir"])
def test_a_users_folder_is_never_emptied(wheel_x86_64, tmp_path, option):
    folder = users_folder(tmp_path)
    other = "--workdir" if option == "--env-dir" else "--env-dir"
    proc = gate("cpu_x86_64", wheel_x86_64, option, folder, other, tmp_path / "other")
    one_error_line(proc, f"is not empty and the gate did not make it (no .executorch-wheel-gate in it), "
                         f"so it will not touch it: pass a new or empty folder to {option}")
    assert [p.name for p in folder.iterdir()] == ["thesis.tex"]
    assert (folder / "thesis.tex").read_text() == "three years of work"
    assert not (tmp_path / "other").exists()


def test_a_folder_that_cannot_be_made_is_one_line(wheel_x86_64, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = gate("cpu_x86_64", wheel_x86_64, "--env-dir", blocker / "env")
    one_error_line(proc, "cannot be made or written")
    assert "pass a writable folder to --env-dir" in proc.stderr


# --- one run at a time per folder: a real second process ---------------------------------------

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from smoke.environment import folders as owned
    held = owned.claim(Path(sys.argv[1]), "environment folder", "--env-dir")
    print("held", flush=True)
    time.sleep(60)
""")


@pytest.mark.parametrize(("option", "what"), [("--env-dir", "environment folder"), ("--workdir", "work folder")])
def test_a_second_run_on_a_held_folder_is_refused_at_once_and_the_lock_dies_with_its_holder(wheel_x86_64, tmp_path, option,
                                                                                           what):
    folder = tmp_path / "held"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        proc = gate("cpu_x86_64", wheel_x86_64, option, folder)
        one_error_line(proc, f"{what} {str(folder)!r} is in use by another gate run (pid {holder.pid}): wait for it to "
                             f"end, or pass another folder to {option}")
        assert proc.stdout == ""  # refused first, before the wheel's line or any check (issue 36)
        assert time.monotonic() - start < 5  # nothing read, waited for or built
        assert [p.name for p in folder.iterdir()] == [".executorch-wheel-gate"]
    finally:
        holder.kill()
        holder.wait()
    from smoke.environment import folders as owned

    owned.claim(folder, what, option).release()  # killed holder: no stale lock


HOLD_REPORTS = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from smoke.engine import row as gate
    with gate.hold_reports(Path(sys.argv[1]), sys.argv[2]):
        print("held", flush=True)
        time.sleep(60)
""")


@pytest.mark.slow
@pytest.mark.parametrize(("command", "stem"), [(["cpu_x86_64"], "cpu_x86_64"), (["inspect", "--row", "cpu_x86_64"], "inspect-cpu_x86_64")])
def test_a_second_run_writing_the_same_reports_is_refused_and_the_firsts_reports_stay(wheel_x86_64, tmp_path, command, stem):
    """A run holds its row's reports in --report-dir from its first step until it writes them: a second run of the row
    into that folder meanwhile is one ERROR line naming the holder, exit 2, and the reports there are left as they were."""
    reports = tmp_path / "reports"
    reports.mkdir()
    earlier = {f"{stem}.json": '{\n  "schema": 4, "verdict": "passed"}\n'}  # what a run before wrote, as its start is the gate's
    for name, text in earlier.items():
        (reports / name).write_text(text)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_REPORTS, str(reports), stem], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = gate(*command, wheel_x86_64, "--report-dir", reports)
        one_error_line(proc, f"report folder {str(reports)!r} is in use by another gate run (pid {holder.pid}) that writes the "
                             f"same reports: wait for it to end, or pass another folder to --report-dir")
        assert "checks:" not in proc.stdout and "PASSED" not in proc.stdout
        assert sorted(p.name for p in reports.iterdir()) == sorted([*earlier, f".{stem}.lock"])
        assert {name: (reports / name).read_text() for name in earlier} == earlier
    finally:
        holder.kill()
        holder.wait()


# --- interrupts: every process the gate started ends --------------------------------------------

DRIVER = textwrap.dedent("""
    import signal, sys
    # As a terminal's foreground job has it: a test run started in the background of a non-interactive shell (nohup
    # CMD &) hands its processes SIGINT ignored, and the Ctrl-C below would reach nothing.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from pathlib import Path
    from smoke import cli
    from smoke.environment import follow
    work = Path(sys.argv[1])
    # A child that starts a process of its own (as the negative control and the export helper are), then waits.
    child = [sys.executable, "-c", "import subprocess, sys, time; p = subprocess.Popen(['sleep', '300']); "
             "open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(300)", str(work / "grandchild.pid")]
    code = cli._at_the_edge(lambda: follow.run_child(child, work / "record.jsonl", work / "child.log", 600, None, lambda r: None) and 0)
    sys.exit(code)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_ends_the_child_and_what_it_started(tmp_path, signum, code):
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], cwd=REPO, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group, like a terminal's foreground job
    pid_file = tmp_path / "grandchild.pid"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    grandchild = int(pid_file.read_text())
    assert _alive(grandchild)
    os.killpg(proc.pid, signum) if signum == signal.SIGINT else os.kill(proc.pid, signum)  # Ctrl-C reaches the group
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert err.strip() == (f"INTERRUPTED by {signal.Signals(signum).name}: the run was stopped, every process it "
                           "started was ended; no verdict")
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


# --- damaged, oversized and linked wheels --------------------------------------------------------

def _bad_crc(tmp, wheel):
    """One byte of a stored member changed after the fact: its CRC no longer matches."""
    target = tmp / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item), compress_type=zipfile.ZIP_STORED)
    with zipfile.ZipFile(target) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(".so"))
        name_len = len(info.filename.encode())
    data = bytearray(target.read_bytes())
    extra_len = struct.unpack_from("<H", data, info.header_offset + 28)[0]
    data[info.header_offset + 30 + name_len + extra_len + 100] ^= 0xFF
    target.write_bytes(bytes(data))
    return target


def _version_not_a_version(tmp, wheel):
    return rewrite_wheel(wheel, tmp, metadata=lambda text: text.replace("Version: 1.5.1", "Version: one-point-five", 1))


def _huge_member(tmp, wheel):
    """300 MiB of zeros, deflated to a few hundred kB."""
    target = rewrite_wheel(wheel, tmp)
    with zipfile.ZipFile(target, "a", zipfile.ZIP_DEFLATED) as archive, archive.open("executorch/zeros.bin", "w", force_zip64=True) as out:
        block = bytes(1 << 20)
        for _ in range(300):
            out.write(block)
    return target


def _link_chain(tmp, wheel):
    target = rewrite_wheel(wheel, tmp)
    with zipfile.ZipFile(target, "a") as archive:
        for name, to in (("executorch/a", ".."), ("executorch/b", "a/.."), ("executorch/c", "b/etc/passwd")):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            archive.writestr(info, to)
    return target


WHEELS = [
    (_bad_crc, "is damaged:"),
    (_version_not_a_version, "has METADATA Version 'one-point-five', which is not a version"),
    (_huge_member, "entry 'executorch/zeros.bin' declares 314572800 B unpacked, over the gate's 268435456 B limit"),
    (_link_chain, "entry 'executorch/a' is a link to '..'; a wheel holds no links"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("make", "text"), WHEELS, ids=[m.__name__ for m, _ in WHEELS])
def test_a_hostile_wheel_is_one_line_quickly(slim_x86_64, tmp_path, make, text):
    wheel = make(tmp_path, slim_x86_64)
    start = time.monotonic()
    proc = gate("cpu_x86_64", wheel, "--env-dir", tmp_path / "env")
    one_error_line(proc, text)
    assert time.monotonic() - start < 20
    assert not (tmp_path / "env").exists()


def test_an_unwritable_step_summary_is_one_line_before_any_work(wheel_x86_64, tmp_path):
    proc = gate("cpu_x86_64", wheel_x86_64, "--env-dir", tmp_path / "env",
                env={"GITHUB_STEP_SUMMARY": str(tmp_path / "no" / "such" / "summary.md")})
    one_error_line(proc, "cannot be written (No such file or directory): point it at a writable file, or unset it")
    assert not (tmp_path / "env").exists()


@pytest.mark.slow
def test_an_index_token_is_never_printed(wheel_x86_64, tmp_path):
    """Issue 37: a --torch-index with credentials (unreachable here, so the build fails): the build's lines and its
    one ERROR line show the URL as pip does, the password masked; nothing holds the token."""
    proc = subprocess.run([sys.executable, "-m", "smoke", "cpu_x86_64", str(wheel_x86_64), "--torch-index",
                           "https://user:SECRET123@127.0.0.1:9/simple", "--env-dir", str(tmp_path / "env")],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "SECRET123" not in proc.stdout + proc.stderr
    assert "--extra-index-url https://user:****@127.0.0.1:9/simple" in proc.stderr and proc.stderr.startswith("ERROR ")


@pytest.mark.slow
def test_a_token_in_an_index_s_query_string_is_never_printed(tmp_path):
    """Issue 48: ``--wheel-index http://host/simple/?token=...`` was printed by the progress line, the ERROR line and
    uv's error; the user:password form was masked, the query's was not."""
    proc = subprocess.run([sys.executable, "-m", "smoke", "cpu_x86_64", "--wheel-index", "http://127.0.0.1:9/simple/?token=SECRET456",
                           "--env-dir", str(tmp_path / "env")], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "SECRET456" not in proc.stdout + proc.stderr
    assert "http://127.0.0.1:9/simple/?token=****" in proc.stdout + proc.stderr


# --- paths given on a command line: made absolute against the caller's folder, refused when too long ----------------

LONG = "a" * 300  # a name over NAME_MAX (255 bytes on the file systems the gate runs on): os.stat raises ENAMETOOLONG

TOO_LONG = [  # (argv, the argument the ERROR line names); {long} is a path with a 300-byte name, {wheel} a real wheel
    (["inspect", "{long}.whl"], "argument wheel"),
    (["cpu_x86_64", "{long}.whl"], "argument wheel"),
    (["cpu_x86_64", "{wheel}", "--wheelhouse", "{long}"], "argument --wheelhouse"),
    (["cpu_x86_64", "{wheel}", "--torch-from", "{long}"], "argument --torch-from"),
    (["cpu_x86_64", "{wheel}", "--constraints", "{long}.txt"], "argument --constraints"),
    (["cpu_x86_64", "{wheel}", "--python", "{long}/python"], "argument --python"),
    (["summary", "{long}"], "argument reports"),
    (["summary", "{tmp}", "--output", "{long}.md"], "argument --output"),
    (["compare", "{long}.whl", "{wheel}", "--static-only"], "argument old"),
    (["compare", "{wheel}", "{wheel}", "--env-dir", "{long}"], "argument --env-dir"),
    (["artifacts", "{long}.pte"], "argument paths"),
]


@pytest.mark.parametrize(("argv", "named"), TOO_LONG, ids=[" ".join(a[:1] + a[2:3]) or a[0] for a, _ in TOO_LONG])
def test_a_path_with_a_name_too_long_is_one_error_line_naming_the_argument(wheel_x86_64, tmp_path, capsys, argv, named):
    from smoke import cli

    words = [w.format(long=tmp_path / LONG, wheel=wheel_x86_64, tmp=tmp_path) for w in argv]
    code = cli.main(words)
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert err.count("\n") == 1 and err.startswith(f"ERROR {named}: path "), err
    assert "has a name of 30" in err and "the file system holds at most" in err and "pass a shorter one" in err, err
    assert "Traceback" not in out + err and out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing made


def test_a_path_too_long_through_python_m_smoke_is_one_line_and_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "smoke", "inspect", str(tmp_path / f"{LONG}.whl")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ERROR argument wheel: path ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


PARSERS = {  # a command's parser, and words that give it each of its path arguments and options, relative
    "row": (lambda cli: cli.parser("cpu_x86_64"), ["w.whl", "--constraints", "c.txt", "--wheelhouse", "h", "--torch-from", "t",
                                                  "--env-dir", "e", "--workdir", "rel/dir", "--policy", "p.toml",
                                                  "--report-dir", "r", "--python", "./bin/python"],
            ["wheel", "constraints", "wheelhouse", "torch_from", "env_dir", "workdir", "policy", "report_dir"]),
    "inspect": (lambda cli: cli.inspect_parser(), ["w.whl", "--policy", "p.toml", "--report-dir", "r"], ["wheel", "policy", "report_dir"]),
    "summary": (lambda cli: cli.summary_parser(), ["r", "--output", "o.md"], ["reports", "output"]),
    "compare": (lambda cli: cli.compare_parser(), ["o.whl", "n.whl", "--env-dir", "e", "--report-dir", "r", "--wheelhouse", "h",
                                                  "--torch-from", "t"], ["old", "new", "env_dir", "report_dir", "wheelhouse", "torch_from"]),
    "artifacts": (lambda cli: cli.artifacts_parser(), ["a.pte", "k"], ["paths"]),
}


@pytest.mark.parametrize("invoked_from", [False, True], ids=["python -m smoke", "nox"])
@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_path_given_is_made_absolute_against_the_folder_the_caller_ran_from(tmp_path, monkeypatch, command, invoked_from):
    """Under nox the gate runs in the checkout and GATE_INVOKED_FROM names the caller's folder; run directly, the caller's
    folder is the working directory. Either way a relative path is the caller's, made absolute once, at the edge."""
    from smoke import cli, paths

    caller = tmp_path / "caller"
    caller.mkdir()
    if invoked_from:
        monkeypatch.setenv(paths.INVOKED_FROM, str(caller))
        monkeypatch.chdir(REPO)
    else:
        monkeypatch.delenv(paths.INVOKED_FROM, raising=False)
        monkeypatch.chdir(caller)
    make, words, dests = PARSERS[command]
    args = make(cli).parse_args(words)
    for dest in dests:
        value = getattr(args, dest)
        for one in value if isinstance(value, list) else [value]:
            assert one.is_absolute() and one.parent.is_relative_to(caller), (dest, one)
    if command == "row":
        assert args.workdir == caller / "rel" / "dir" and args.python == str(caller / "bin" / "python")
        assert cli.parser("cpu_x86_64").parse_args(["--python", "python3.11"]).python == "python3.11"  # a name: PATH's


@pytest.mark.slow
def test_a_relative_workdir_reaches_the_child_absolute(slim_x86_64, tmp_path, monkeypatch, capsys):
    """The child runs in the checkout (smoke.environment.follow), so the folder it is handed must not be relative to the
    caller's. The environment's interpreter is a script that writes where it ran and what it was handed."""
    from smoke import cli, paths

    said = tmp_path / "argv.txt"
    script_child(monkeypatch, tmp_path / "env", f'{{ pwd; printf "%s\\n" "$@"; test -f "$4" && echo row-found; }} > "{said}"')
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.delenv(paths.INVOKED_FROM, raising=False)
    monkeypatch.chdir(caller)
    code = cli.main(["cpu_x86_64", str(slim_x86_64), "--env-dir", str(tmp_path / "env-dir"), "--workdir", "rel/dir"])
    capsys.readouterr()
    assert code == 1  # the script is no child: it wrote no record (child process FAILs)
    cwd, dash_s, dash_m, module, row_file, workdir, record, *rest = said.read_text().splitlines()
    assert (cwd, dash_s, dash_m, module) == (str(REPO), "-S", "-m", "smoke.child")
    work = caller / "rel" / "dir"
    assert (row_file, workdir, record) == (str(work / "row.json"), str(work), str(work / "record.jsonl"))
    assert rest[-1] == "row-found"  # the child, in the checkout, finds the row it is given


@pytest.mark.parametrize("session", ["summary", "compare"])
def test_nox_from_another_folder_reads_relative_paths_there(tmp_path, session):
    """nox runs each session in the checkout: a session that did not say where nox was run from read ``reports`` (or
    ``old.whl``) as the checkout's."""
    (tmp_path / "reports").mkdir()
    args = {"summary": ["reports"], "compare": ["old.whl", "new.whl", "--static-only"]}[session]
    proc = nox("-s", session, "--", *args, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    # summary: the empty folder found (not "does not exist"), with nothing to judge in it (issue 56); compare: the
    # caller's old.whl
    assert proc.returncode == 2, out
    assert {"summary": f"ERROR reports folder {str(tmp_path / 'reports')!r} holds no row report: nothing to judge",
            "compare": f"ERROR OLD: wheel {str(tmp_path / 'old.whl')!r}"}[session] in out, out


# --- the installed command (pyproject.toml's [project.scripts]: executorch-wheel-gate = smoke.cli:script)


@pytest.mark.parametrize(("args", "shown"), [
    (["--help"], ["usage: executorch-wheel-gate ROW ", "commands besides a row (each takes --help):",
                  "executorch-wheel-gate inspect WHEEL [--row ROW] ", "executorch-wheel-gate summary REPORTS_DIR [--json FILE] ",
                  "executorch-wheel-gate compare OLD.whl NEW.whl ", "executorch-wheel-gate benchmark WHEEL ",
                  "executorch-wheel-gate artifacts PATH... ", "Environments and downloads go to .gate in the checkout ("]),
    (["inspect", "--help"], ["usage: executorch-wheel-gate inspect [-h]"]),
    (["summary", "--help"], ["usage: executorch-wheel-gate summary [-h]", "--json FILE"]),
    (["compare", "--help"], ["usage: executorch-wheel-gate compare [-h]"]),
    (["benchmark", "--help"], ["usage: executorch-wheel-gate benchmark [-h]"]),
    (["artifacts", "--help"], ["usage: executorch-wheel-gate artifacts [-h]"]),
], ids=["row", "inspect", "summary", "compare", "benchmark", "artifacts"])
def test_the_installed_command_names_itself_and_every_command(tmp_path, args, shown):
    proc = subprocess.run([sys.executable, "-c", "from smoke.cli import script; raise SystemExit(script())", *args],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for line in shown:
        assert line in proc.stdout, proc.stdout


@pytest.mark.parametrize("args", [["inspect", "WHEEL"], ["--help"], ["cpu_x86_64", "WHEEL"]])
def test_a_command_run_from_a_folder_that_was_removed_is_one_error_line(tmp_path, slim_x86_64, args):
    """Issue 48: run from a deleted folder, `inspect` (and the installed command's --help) ended in a
    FileNotFoundError traceback, exit 1 (a failed wheel's code)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    argv = " ".join(str(slim_x86_64) if arg == "WHEEL" else arg for arg in args)
    proc = subprocess.run(["bash", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m smoke {argv}'],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr == f"ERROR the folder this command runs from ({gone}) no longer exists: cd to a folder that does, then run again\n"


def test_an_os_error_no_stage_caught_is_one_line_naming_the_path_and_the_fix(capsys):
    import errno

    from smoke import cli

    def work() -> int:
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), "/w/" + "r" * 300)

    assert cli._at_the_edge(work) == 2
    err = capsys.readouterr().err
    assert err == (f"ERROR File name too long ('/w/{'r' * 197}'): the machine refused it, not the wheel: shorten that "
                   f"path or name, then run again\n")


def test_version_and_each_commands_own_help_say_what_the_program_does():
    """Issue 61: there was no --version; `python -m smoke inspect --help` called itself `nox -s inspect --` and said
    --report-dir writes DIR/ROW.json (it writes DIR/inspect-ROW.json); benchmark's wheel, --row and --runs had no help."""
    import re

    from tests.helpers import REPO, smoke

    declared = re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(), re.M)[1]  # [project]'s
    version = smoke("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"executorch-wheel-gate {declared}", version
    inspect_help = smoke("inspect", "--help").stdout
    assert inspect_help.startswith("usage: python -m smoke inspect ")
    assert "DIR/inspect-ROW.json and DIR/inspect-ROW.xml" in " ".join(inspect_help.split())
    bench_help = " ".join(smoke("benchmark", "--help").stdout.split())
    assert "wheel the executorch wheel to run the row on" in bench_help and "warm runs of each variant" in bench_help
    assert "``" not in bench_help


def test_a_wheel_this_user_may_not_read_is_said_so_with_the_fix(wheel_x86_64, monkeypatch):
    """Issue 61: a wheel the user may not read was "cannot be read as a wheel archive ...; download or build it again".
    (Root reads any file here, so the open's PermissionError is given by hand.)"""
    from smoke.errors import InvalidWheel
    from smoke.readers import wheel as wheels

    def refused(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied", str(wheel_x86_64))

    monkeypatch.setattr(wheels.zipfile, "ZipFile", refused)
    with pytest.raises(InvalidWheel) as raised:
        wheels.read_wheel(wheel_x86_64)
    assert str(raised.value) == (f"wheel {wheel_x86_64.name!r} cannot be read: Permission denied; make it readable "
                                 f"(chmod a+r {str(wheel_x86_64)!r}) or pass a copy you can read")
