"""Real environments built from PyPI's executorch 1.5.1 wheel with the torch requirement it lacks added (slow):
the gate killed with SIGKILL while pip installs, and uv and pip filling an environment from the same sources."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from smoke import options as opts
from smoke.environment import build as environment
from smoke.readers.wheel import probe_interpreter, read_wheel


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.slow
def test_a_gate_killed_with_sigkill_while_pip_installs_leaves_nothing_writing_and_the_next_run_rebuilds(declared_x86_64, tmp_path):
    """kill -9 reaches no handler of the gate's: what it started must still end (its warden, smoke.proc), and
    the next run must see the unfinished build for what it is and build afresh."""
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import REPO

    env_dir = tmp_path / "env"
    gate = subprocess.Popen([sys.executable, "-m", "smoke", "cpu_x86_64", str(declared_x86_64), "--env-dir", str(env_dir),
                             "--venv-backend", "virtualenv"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not any(b"pip" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in _processes_mentioning(str(env_dir))
                  if Path(f"/proc/{pid}").exists()):
        assert gate.poll() is None and time.monotonic() < deadline, "the gate never reached pip install"
        time.sleep(0.2)
    time.sleep(1)  # pip is installing
    gate.send_signal(signal.SIGKILL)
    gate.wait()
    deadline = time.monotonic() + 10
    while _processes_mentioning(str(env_dir)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_mentioning(str(env_dir)) == []  # pip died with the gate: nothing writes into the folder now
    assert not (env_dir / environment.STAMP).exists()

    said: list[str] = []
    wheel, interpreter = read_wheel(declared_x86_64), probe_interpreter(None)
    from smoke.readers import pairing

    # The rebuild takes torch from the tests' interpreter (--no-deps --torch-from): what is asserted is that the unfinished
    # folder is seen and built afresh, not how long torch takes to install (the killed run above installed whole).
    options = environment.EnvOptions(env_dir=env_dir, constraints=pairing.constraints_for(wheel, None),
                                     **{**opts.for_environment(opts.Options()), "reuse_env": True, "no_deps": True,
                                        "torch_from": Path(sys.executable).parent.parent})
    with environment.built(wheel, interpreter, options, said.append) as env:
        assert not env.reused
    assert said[0] == (f"environment {env_dir} holds an unfinished build (an earlier run was stopped or failed while "
                       f"building): building it afresh")
    assert (env_dir / environment.STAMP).is_file()


def _installed(python: Path) -> dict[str, tuple[str, str]]:
    """Each distribution of an environment: its version, and the tool its INSTALLER names."""
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m, json; print(json.dumps(sorted("
                          "[d.metadata['Name'].lower(), d.version, (d.read_text('INSTALLER') or '').strip()] "
                          "for d in m.distributions())))"], capture_output=True, text=True, check=True)
    return {name: (version, tool) for name, version, tool in json.loads(out.stdout)}


@pytest.mark.slow
def test_uv_and_pip_install_the_same_versions(declared_row, declared_x86_64, tmp_path):
    """The same wheel through both backends, from the same configured sources: the same distributions and
    versions, each environment's INSTALLER naming the tool that filled it. The uv one is the row run's own (the
    default backend, where uv is found: tests/conftest.py, declared_row), built once for every test of that wheel."""
    pytest.importorskip("uv")
    from smoke import options as opts
    from smoke.readers import pairing
    from smoke.readers.wheel import probe_interpreter, read_wheel

    assert "installing with uv (" in declared_row.proc.stdout, declared_row.proc.stdout
    uv = _installed(declared_row.env_dir / "bin" / "python")
    wheel, interpreter = read_wheel(declared_x86_64), probe_interpreter(None)
    options = environment.EnvOptions(env_dir=tmp_path / "virtualenv", constraints=pairing.constraints_for(wheel, None),
                                     **{**opts.for_environment(opts.Options()), "venv_backend": "virtualenv"})
    with environment.built(wheel, interpreter, options, [].append) as env:
        pip = _installed(Path(env.python))
    shutil.rmtree(options.env_dir)  # several GB
    seeds = {"pip", "setuptools", "wheel"}  # what each tool seeds a new environment with, not what it installed
    assert {n: v for n, (v, _) in uv.items() if n not in seeds} == {n: v for n, (v, _) in pip.items() if n not in seeds}
    assert uv["torch"][1] == "uv" and uv["executorch"][1] == "uv"
    assert pip["torch"][1] == "pip" and pip["executorch"][1] == "pip"


@pytest.mark.slow
def test_a_gate_killed_with_sigkill_while_the_child_works_leaves_no_helper_running_or_writing(declared_row, declared_x86_64,
                                                                                              tmp_path):
    """Issue 48: killed 3 s after its child started, the gate left 2 to 4 of the child's helpers (the extension
    modules' interpreter, the library loads' forks) re-parented to init, writing into the work folder after its lock
    was gone. Every process of the environment ends with the gate (its warden, smoke.proc), and nothing is written
    after the kill."""


    # the environment of the wheel's one row run (tests/conftest.py, declared_row), which PASSed; this test's alone
    assert "cpu_x86_64: PASSED" in declared_row.proc.stdout, declared_row.proc.stdout + declared_row.proc.stderr
    with declared_row.using() as env_dir:
        _kill_while_the_child_works(declared_x86_64, env_dir, tmp_path)


def _kill_while_the_child_works(declared_x86_64, env_dir, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import REPO

    work, out = tmp_path / "work", tmp_path / "gate.out"
    args = [sys.executable, "-m", "smoke", "cpu_x86_64", str(declared_x86_64), "--env-dir", str(env_dir)]
    with out.open("w") as handle:
        gate = subprocess.Popen([*args, "--reuse-env", "--workdir", str(work)], cwd=REPO, stdout=handle, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while "running the child" not in out.read_text():
        assert gate.poll() is None and time.monotonic() < deadline, out.read_text()
        time.sleep(0.1)
    time.sleep(3)  # the child imports torch; its helpers import the extension modules and load the libraries
    assert _processes_mentioning(str(env_dir)), "nothing of the environment ran when the gate was killed"
    gate.send_signal(signal.SIGKILL)
    gate.wait()
    killed = time.time()
    deadline = time.monotonic() + 10
    while _processes_mentioning(str(env_dir)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_mentioning(str(env_dir)) == []
    time.sleep(2)  # anything still writing would have written by now
    late = [str(p) for p in work.rglob("*") if p.is_file() and p.stat().st_mtime > killed + 0.5]
    assert late == []
