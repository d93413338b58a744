"""smoke.proc: every process the gate starts fails as the gate's own one-line error, never a traceback.

Class 8 of the hostile catalogue, for commands: whatever a command run by ``proc.run`` prints, the gate
stays bounded. Class 9, first half: nothing a child starts outlives the gate. A child (a small Python
script, run through ``follow.run_child`` or ``proc.run`` as the gate runs its child and its commands)
starts a grandchild that leaves the child's process group and session (``start_new_session``), or a
daemon that double-forks and lets its parent exit, or that clears its environment; each writes its pid
and sleeps. At the time limit, on SIGTERM or Ctrl-C of the gate, and when the child exits leaving it
behind, the grandchild must be gone within seconds.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest

from smoke import proc
from smoke.environment.follow import judge_child, run_child
from smoke.errors import EnvironmentBuildError, GateError
from tests.helpers import REPO


def test_a_command_that_fails_names_what_it_was_for_and_its_output_tail():
    with pytest.raises(EnvironmentBuildError) as info:
        proc.run([sys.executable, "-c", "print('one'); print('two'); raise SystemExit(3)"], what="building the environment",
                 error=EnvironmentBuildError)
    message = str(info.value)
    assert message.startswith("building the environment failed (exit 3): ")
    assert message.endswith(": one | two")


def test_a_command_past_its_limit_is_ended_and_named():
    with pytest.raises(GateError, match=r"^waiting failed: .* ran past its 0.5 s limit and was ended; give it more time$"):
        proc.run([sys.executable, "-c", "import time; time.sleep(30)"], what="waiting", timeout=0.5, fix="give it more time")


def test_a_command_that_cannot_start_is_one_line():
    with pytest.raises(GateError, match=r"^probing failed: cannot run '/nonexistent/python'"):
        proc.run(["/nonexistent/python"], what="probing")


def test_tail_keeps_the_last_lines_that_say_something():
    assert proc.tail("a\n\nb\nc\n\n") == "a | b | c"
    assert proc.tail("a\nb\nc\nd", 2) == "c | d"

# --- class 8 of the hostile catalogue: whatever a command writes, the gate stays bounded ----------

MIB = 1024 * 1024


def test_file_tail_reads_a_bounded_window_of_a_huge_file(tmp_path):
    log = tmp_path / "child.log"
    with log.open("wb") as handle:  # 1 GiB, sparse: nothing but the last lines are on disk
        handle.truncate(1 << 30)
        handle.seek(0, os.SEEK_END)
        handle.write(b"\nTraceback (most recent call last):\nImportError: no module named executorch\n")
    tracemalloc.start()
    try:
        text = proc.file_tail(log, 2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text == "Traceback (most recent call last): | ImportError: no module named executorch"
    assert peak < 1 * MIB, peak


def test_file_tail_of_a_folder_is_said_not_raised(tmp_path):
    assert proc.file_tail(tmp_path) == f"(cannot read {tmp_path.name}: Is a directory)"
    assert proc.file_tail(tmp_path / "absent.log") == ""


# --- proc.run: a command's output ---------------------------------------------------------------

def test_a_command_that_prints_far_more_than_is_kept_does_not_grow_the_gate(monkeypatch):
    monkeypatch.setattr(proc, "CAPTURE_BYTES", 1 * MIB)
    tracemalloc.start()
    try:
        with pytest.raises(GateError) as info:
            proc.run([sys.executable, "-c", "import sys\nb = b'w' * (1 << 20)\nfor _ in range(64): sys.stdout.buffer.write(b)\n"
                      "print(); print('the real error'); sys.exit(3)"], what="building the environment")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert re.search(r": \.\.\.w{397}\.\.\. \(10485\d\d chars\) \| the real error$", message), message[-600:]
    assert len(message) < 1000
    assert peak < 8 * MIB, peak


def test_a_command_whose_output_is_not_text_is_quoted_not_a_traceback():
    with pytest.raises(GateError) as info:
        proc.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'\\xff\\xfebad\\n'); sys.exit(2)"], what="probing")
    assert str(info.value).endswith(": \ufffd\ufffdbad")

# --- class 9 of the hostile catalogue: nothing a child starts outlives the gate -------------------

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


@pytest.mark.slow
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


@pytest.mark.slow
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
    import signal, sys
    # As a terminal's foreground job has it: a test run started in the background of a non-interactive shell (nohup
    # CMD &) hands its processes SIGINT ignored, and the Ctrl-C below would reach nothing.
    signal.signal(signal.SIGINT, signal.default_int_handler)
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


# A daemon that leaves everything behind: fork, setsid, fork, an empty environment (no tree token), the middle
# one exits (the grandchild re-parents to the gate, its subreaper, out of the child's tree), and the child itself
# exits 0 at once, as a library's initializer could in a child that then PASSes.
ORPHAN = textwrap.dedent("""
    import os, sys
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); os.rename(sys.argv[1] + '.tmp', sys.argv[1])
            os.execve('/bin/sleep', ['sleep', '300'], {})
        os._exit(0)
    while not os.path.exists(sys.argv[1]):
        pass
""")


def test_an_orphan_with_no_token_re_parented_to_the_gate_is_ended(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    outcome = run_child([sys.executable, "-c", ORPHAN, str(pid_file)], tmp_path / "record.jsonl", tmp_path / "child.log",
                        60, dict(os.environ), lambda r: None)
    grandchild = _pid(pid_file)
    try:
        assert outcome.returncode == 0
        assert _gone_soon(grandchild), f"pid {grandchild} outlived the child"
    finally:
        _kill(grandchild)


def test_an_orphan_left_by_a_command_run_to_its_end_is_ended(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    proc.run([sys.executable, "-c", ORPHAN, str(pid_file)], what="probing", timeout=60)
    grandchild = _pid(pid_file)
    try:
        assert _gone_soon(grandchild), f"pid {grandchild} outlived the command"
    finally:
        _kill(grandchild)


# --- issue 45: processes started and ended from two threads at once (the file checks' cuobjdump beside the build) ----

SLEEPS = [sys.executable, "-I", "-S", "-c", "import time; time.sleep(0.02)"]


def _from_two_threads(first, second) -> list[BaseException]:
    """Run ``first`` and ``second`` at once, each in a thread of its own; what either raised."""
    import threading

    failures: list[BaseException] = []

    def work(job) -> None:
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(job,)) for job in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


@pytest.mark.slow
def test_commands_run_from_two_threads_at_once_never_end_each_other():
    """Before the fix, 39 of 210 runs ended with exit -15: a process one thread had just forked was the other's orphan."""
    def many(cmd, count):
        return lambda: [proc.run(cmd, what=f"run {n} of {cmd[0]}", timeout=60) for n in range(count)]

    failures = _from_two_threads(many(["/bin/true"], 150), many(SLEEPS, 60))
    assert failures == []


LINGERS = textwrap.dedent("""
    import os, sys, time
    if os.fork() == 0:  # a middle process that exits once told (argv[2]): its child, carrying the tree's token, re-parents
        if os.fork() == 0:
            open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); os.rename(sys.argv[1] + '.tmp', sys.argv[1])
            time.sleep(300)
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.01)
        os._exit(0)
    time.sleep(300)
""")
# Told to go while the other thread's command runs: the orphan re-parents to the gate during that command.
TELLS = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(1)"


def test_a_tree_s_orphan_is_not_ended_by_another_thread_s_command(tmp_path):
    """An orphan carrying a live tree's token is that tree's: a short command ended meanwhile, in another thread,
    leaves it running; the tree's own end ends it."""
    pid_file, go = tmp_path / "orphan.pid", tmp_path / "go"
    leader = proc.start([sys.executable, "-c", LINGERS, str(pid_file), str(go)], own_group=True)
    orphan = _pid(pid_file)
    try:
        assert _from_two_threads(lambda: proc.run([sys.executable, "-c", TELLS, str(go)], what="a short command"),
                                 lambda: None) == []
        assert int(Path(f"/proc/{orphan}/stat").read_text().rpartition(")")[2].split()[1]) == os.getpid()  # re-parented
        assert _alive(orphan), "another thread's command ended this tree's orphan"
        proc.end_group(leader, grace=0)
        assert _gone_soon(orphan)
    finally:
        _kill(orphan)
        proc.end(leader)


@pytest.mark.slow
def test_a_daemon_is_still_ended_while_another_thread_runs_commands(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    failures = _from_two_threads(lambda: proc.run([sys.executable, "-c", ORPHAN, str(pid_file)], what="probing", timeout=60),
                                 lambda: [proc.run(["/bin/true"], what="a short command") for _ in range(100)])
    grandchild = _pid(pid_file)
    try:
        assert failures == []
        assert _gone_soon(grandchild), f"pid {grandchild} outlived the command"
    finally:
        _kill(grandchild)


def test_a_process_started_from_a_thread_that_then_ends_runs_on(tmp_path):
    """PR_SET_PDEATHSIG fires when the starting thread ends: before the fix, this process was killed with it."""
    import threading

    started: list[subprocess.Popen] = []
    thread = threading.Thread(target=lambda: started.append(proc.start(["sleep", "300"], own_group=True)))
    thread.start()
    thread.join()
    try:
        time.sleep(0.5)
        assert started[0].poll() is None, f"ended with the thread that started it: {started[0].returncode}"
    finally:
        proc.end_group(started[0], grace=0)


# A gate that starts a tree from a thread that then ends (its leader starts a grandchild in a session of its own),
# writes both pids, and waits to be killed.
KILLED_GATE = textwrap.dedent("""
    import sys, threading, time
    from pathlib import Path
    from smoke import proc
    work = Path(sys.argv[1])
    started = []
    thread = threading.Thread(target=lambda: started.append(proc.start([sys.executable, "-c", sys.argv[2], str(work / "grandchild.pid")],
                                                                          own_group=True)))
    thread.start(); thread.join()
    (work / "leader.pid").write_text(str(started[0].pid))
    time.sleep(300)
""")


def test_a_gate_killed_with_sigkill_leaves_no_tree_it_started_from_a_thread(tmp_path):
    """kill -9 reaches no handler of the gate's: its warden ends the leader and the grandchild that left its group."""
    gate = subprocess.Popen([sys.executable, "-c", KILLED_GATE, str(tmp_path), SETSID], cwd=REPO)
    leader, grandchild = _pid(tmp_path / "leader.pid"), _pid(tmp_path / "grandchild.pid")
    try:
        assert _alive(leader) and _alive(grandchild)
        gate.kill()
        gate.wait()
        assert _gone_soon(leader), f"the leader {leader} outlived the killed gate"
        assert _gone_soon(grandchild), f"the grandchild {grandchild} outlived the killed gate"
    finally:
        _kill(leader)
        _kill(grandchild)
        if gate.poll() is None:
            gate.kill()
            gate.wait()


@pytest.mark.slow
def test_reading_pip_s_configuration_beside_another_thread_s_commands_is_never_ended(tmp_path):
    """The environment's build reads pip's configuration (``pip config list``) while the file checks' thread runs its
    commands (``cuobjdump`` on the CUDA rows). Started with a bare ``subprocess.run``, that process was no registered
    process of the gate's, so the other thread's end of its own command took it for an orphan and ended it: on the H100,
    2026-12-06, ``ERROR reading pip's configuration failed (exit -15)``, with a correct wheel."""
    from smoke.environment import installer

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "PIP_CONFIG_FILE": os.devnull}

    def reads():
        return [installer.pip_sources(sys.executable, env) for _ in range(6)]

    def commands():
        return [proc.run(["/bin/true"], what="a short command", timeout=60) for _ in range(300)]

    assert _from_two_threads(reads, commands) == []


# Where the gate's processes may start: smoke.proc alone, so that every one is registered (``start``) and no thread's
# end of its own command takes another's for an orphan. The child's forks (smoke.child.forks, smoke.child.loads) are
# the child's, made while nothing else starts processes there, and are reaped by it; the loads' process replaces itself
# (execve: no new process) to start with torch's folder in LD_LIBRARY_PATH.
_STARTS = {("subprocess", name) for name in ("run", "Popen", "call", "check_call", "check_output", "getoutput",
                                             "getstatusoutput")} | {("os", name) for name in (
    "system", "popen", "fork", "forkpty", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "posix_spawn",
    "posix_spawnp", "execv", "execve", "execvp", "execl")}
_MAY_START = {"smoke/proc.py": None, "smoke/child/forks.py": {("os", "fork")}, "smoke/child/loads.py": {("os", "fork"), ("os", "execve")}}


def test_every_process_the_gate_starts_goes_through_smoke_proc():
    import ast

    found = []
    for path in sorted((REPO / "smoke").rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        allowed = _MAY_START.get(name, set())
        if allowed is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                    and (node.func.value.id, node.func.attr) in _STARTS - allowed):
                found.append(f"{name}:{node.lineno} {node.func.value.id}.{node.func.attr}")
    assert found == []
