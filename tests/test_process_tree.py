"""Class 9 of the hostile catalogue, first half: nothing a child starts outlives the gate.

A child (a small Python script, run through ``follow.run_child`` or ``proc.run`` as the gate runs
its child and its commands) starts a grandchild that leaves the child's process group and session
(``start_new_session``), or a daemon that double-forks and lets its parent exit, or that clears
its environment; each writes its pid and sleeps. At the time limit, on SIGTERM or Ctrl-C of the
gate, and when the child exits leaving it behind, the grandchild must be gone within seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from smoke import proc
from smoke.environment.follow import judge_child, run_child
from smoke.errors import GateError
from tests.helpers import REPO

# Each writes the pid of a process that escaped the child's group to sys.argv[1], then sleeps.
SETSID = ("import subprocess, sys, time; p = subprocess.Popen(['sleep', '300'], start_new_session=True); "
          "open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(300)")
DAEMON = textwrap.dedent("""
    import os, sys, time
    if os.fork() == 0:          # the classic daemon: fork, setsid, fork, the middle one exits
        os.setsid()
        if os.fork() == 0:
            open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); os.rename(sys.argv[1] + '.tmp', sys.argv[1])
            time.sleep(300)
        os._exit(0)
    time.sleep(300)
""")
CLEARED = ("import subprocess, sys, time; p = subprocess.Popen(['sleep', '300'], start_new_session=True, env={}); "
           "open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(300)")
EXITS = ("import subprocess, sys; p = subprocess.Popen(['sleep', '300'], start_new_session=True); "
         "open(sys.argv[1], 'w').write(str(p.pid))")  # the child exits at once, its grandchild left running
STUBBORN = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)'], start_new_session=True, env={}); "
            "open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(300)")  # ignores SIGTERM; outlives its parent's end
ESCAPES = {"setsid": SETSID, "double-fork daemon": DAEMON, "setsid, empty environment": CLEARED,
           "setsid, empty environment, ignores SIGTERM": STUBBORN}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _gone_soon(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _pid(path: Path, seconds: float = 30) -> int:
    deadline = time.monotonic() + seconds
    while not (path.exists() and path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(path.read_text())


def _kill(pid: int) -> None:  # a test that fails must not leave its sleeper behind
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.parametrize("script", ESCAPES.values(), ids=ESCAPES.keys())
def test_a_grandchild_that_left_the_group_is_ended_at_the_time_limit(tmp_path, script):
    pid_file = tmp_path / "grandchild.pid"
    start = time.monotonic()
    outcome = run_child([sys.executable, "-c", script, str(pid_file)], tmp_path / "record.jsonl", tmp_path / "child.log",
                        2, dict(os.environ), lambda r: None)
    grandchild = _pid(pid_file)
    try:
        assert judge_child(outcome, 2, tmp_path / "child.log").reason == "killed after the 2 s time limit (--timeout to change it)"
        assert _gone_soon(grandchild), f"pid {grandchild} outlived the child"
        assert time.monotonic() - start < 15
    finally:
        _kill(grandchild)


def test_a_grandchild_left_running_by_a_child_that_exited_is_ended(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    run_child([sys.executable, "-c", EXITS, str(pid_file)], tmp_path / "record.jsonl", tmp_path / "child.log", 60,
              dict(os.environ), lambda r: None)
    grandchild = _pid(pid_file)
    try:
        assert _gone_soon(grandchild)
    finally:
        _kill(grandchild)


@pytest.mark.parametrize("script", [SETSID, EXITS], ids=["at its time limit", "after it exits"])
def test_a_command_run_to_its_end_leaves_nothing_running(tmp_path, script):
    pid_file = tmp_path / "grandchild.pid"
    try:
        proc.run([sys.executable, "-c", script, str(pid_file)], what="probing", timeout=2)
    except GateError as exc:
        assert "ran past its 2 s limit and was ended" in str(exc)
    grandchild = _pid(pid_file)
    try:
        assert _gone_soon(grandchild)
    finally:
        _kill(grandchild)


def test_a_grandchild_that_left_the_group_is_reaped_by_the_gate_not_left_a_zombie(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    run_child([sys.executable, "-c", DAEMON, str(pid_file)], tmp_path / "record.jsonl", tmp_path / "child.log", 1,
              dict(os.environ), lambda r: None)
    grandchild = _pid(pid_file)
    try:
        with pytest.raises(ProcessLookupError):  # the gate is its subreaper: killed and reaped, not a zombie
            os.kill(grandchild, 0)
    finally:
        _kill(grandchild)


def test_a_process_outside_the_tree_is_left_alone(tmp_path):
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        proc.run([sys.executable, "-c", "pass"], what="probing")
        run_child([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "record.jsonl", tmp_path / "child.log",
                  0.5, dict(os.environ), lambda r: None)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


# --- the gate interrupted -------------------------------------------------------------------------

DRIVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from smoke import cli
    from smoke.environment import follow
    work = Path(sys.argv[1])
    child = [sys.executable, "-c", sys.argv[2], str(work / "grandchild.pid")]
    sys.exit(cli._at_the_edge(lambda: follow.run_child(child, work / "record.jsonl", work / "child.log", 600, None,
                                                       lambda r: None) and 0))
""")


@pytest.mark.parametrize("script", ESCAPES.values(), ids=ESCAPES.keys())
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_gate_ends_a_grandchild_that_left_the_group(tmp_path, signum, code, script):
    gate = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path), script], cwd=REPO, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # its own group, like a terminal's foreground job
    grandchild = _pid(tmp_path / "grandchild.pid")
    try:
        assert _alive(grandchild)
        os.killpg(gate.pid, signum) if signum == signal.SIGINT else os.kill(gate.pid, signum)
        _out, err = gate.communicate(timeout=30)
        assert gate.returncode == code, err
        assert err.strip() == (f"INTERRUPTED by {signal.Signals(signum).name}: the run was stopped, every process it "
                               "started was ended; no verdict")
        assert _gone_soon(grandchild), f"pid {grandchild} outlived the interrupted gate"
    finally:
        _kill(grandchild)
        if gate.poll() is None:
            gate.kill()
            gate.wait()
