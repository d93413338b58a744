from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from smoke import options as opts
from smoke.environment import build as environment
from smoke.environment import installer
from smoke.environment.build import plan_no_deps
from smoke.readers.wheel import probe_interpreter, read_wheel

LINUX_312 = {"python_version": "3.12", "platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux"}
REQS = [Requirement(r) for r in ("torch>=2.11.0", "torchao>=0.17.0", "pytest<9.0", 'coremltools==9.0; platform_system == "Darwin"', "kgb")]


@pytest.mark.parametrize(
    ("installed", "available", "todo", "left_out"),
    [
        # The GPU machine: torch and pytest are there already; the wheelhouse lacks kgb.
        ({"torch", "pytest"}, {"torchao": [Path("torchao-0.17.0.whl")]}, ["torchao-0.17.0.whl"], ["kgb"]),
        # No wheelhouse: what is missing is installed by requirement, markers evaluated for Linux.
        ({"torch"}, None, ["torchao>=0.17.0", "pytest<9.0", "kgb"], []),
    ],
)
def test_no_deps_plan(installed, available, todo, left_out):
    assert plan_no_deps(REQS, installed, available, LINUX_312) == (todo, left_out)


def _fake_env(tmp_path, stamp):
    location = tmp_path / "env"
    (location / "bin").mkdir(parents=True)
    (location / "bin" / "python").write_text("")
    (location / environment.STAMP).write_text(json.dumps(stamp))
    return location


def test_reuse_never_keeps_an_environment_built_from_another_wheel(slim_x86_64, wheel_x86_64, tmp_path, monkeypatch):
    """nox -R style reuse: the recorded sha256 must be the given wheel's, or the environment is rebuilt."""
    ran, said = [], []
    monkeypatch.setattr(environment, "run", lambda cmd, what, **kw: ran.append(what) or (_ for _ in ()).throw(SystemExit("stop")))
    interpreter = probe_interpreter(None)
    previous, given = read_wheel(slim_x86_64), read_wheel(wheel_x86_64)
    assert previous.sha256 != given.sha256
    (tmp_path / "c.txt").write_text("torch==2.13.0\n")
    options = environment.EnvOptions(env_dir=tmp_path / "env", constraints=tmp_path / "c.txt",
                                     **{**opts.for_environment(opts.Options()), "reuse_env": True})
    location = _fake_env(tmp_path, environment._stamp(previous, interpreter, options))
    with pytest.raises(SystemExit), environment.built(given, interpreter, options, said.append):
        pass
    assert said == [f"environment {location} was built for another wheel or other options: rebuilding it"]
    assert ran == [f"creating the environment ({installer.choose_backend('auto')[0]})"]
    # The failed rebuild left nothing half-made: the folder holds only the gate's mark.
    assert [p.name for p in location.iterdir()] == [".executorch-wheel-gate"]
    # The same wheel: reused, nothing run.
    _fake_env(tmp_path, environment._stamp(given, interpreter, options))
    with environment.built(given, interpreter, options, said.append) as env:
        assert env.reused and said[-1].startswith(f"reusing environment {location} (same wheel sha256 {given.sha256[:12]}")


def test_a_failed_build_in_a_folder_it_created_leaves_no_folder(wheel_x86_64, tmp_path, monkeypatch):
    monkeypatch.setattr(environment, "run", lambda cmd, what, **kw: (_ for _ in ()).throw(SystemExit("stop")))
    (tmp_path / "c.txt").write_text("torch==2.13.0\n")
    options = environment.EnvOptions(env_dir=tmp_path / "new-env", constraints=tmp_path / "c.txt",
                                     **opts.for_environment(opts.Options()))
    with pytest.raises(SystemExit), environment.built(read_wheel(wheel_x86_64), probe_interpreter(None), options, print):
        pass
    assert not (tmp_path / "new-env").exists()


def _dist_info(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_the_cuda_runtime_seen_through_torch_from_is_not_taken_as_installed(tmp_path):
    """--torch-from's .pth makes another environment's packages importable; the wheel's libraries find
    the CUDA runtime by $ORIGIN, in their own site-packages, so nvidia-* packages must be there."""
    import subprocess
    import sys

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "virtualenv", "--quiet", "--no-seed", str(env)], check=True)
    python = env / "bin" / "python"
    other = tmp_path / "torch-env-site"
    _dist_info(other, "nvidia-cuda-runtime", "13.0.96")
    _dist_info(other, "sympy", "1.14.0")
    (environment.site_packages(python) / environment.TORCH_PTH).write_text(f"{other}\n")
    seen = environment._installed_names(python)
    assert "sympy" in seen and "nvidia-cuda-runtime" not in seen
    _dist_info(environment.site_packages(python), "nvidia-cuda-runtime", "13.0.96")
    assert "nvidia-cuda-runtime" in environment._installed_names(python)


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
    """kill -9 reaches no handler of the gate's: what it started must still end (PR_SET_PDEATHSIG), and
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

    options = environment.EnvOptions(env_dir=env_dir, constraints=pairing.constraints_for(wheel, None),
                                     **{**opts.for_environment(opts.Options()), "reuse_env": True})
    with environment.built(wheel, interpreter, options, said.append) as env:
        assert not env.reused
    assert said[0] == (f"environment {env_dir} holds an unfinished build (an earlier run was stopped or failed while "
                       f"building): building it afresh")
    assert (env_dir / environment.STAMP).is_file()


def test_one_interpreter_named_two_ways_is_one_stamp(wheel_x86_64, tmp_path):
    """`python` and `python3` of one environment are one interpreter: --reuse-env must not rebuild for the name."""
    import dataclasses

    (tmp_path / "c.txt").write_text("torch==2.13.0\n")
    options = environment.EnvOptions(env_dir=tmp_path / "env", constraints=tmp_path / "c.txt", **opts.for_environment(opts.Options()))
    wheel, interpreter = read_wheel(wheel_x86_64), probe_interpreter(None)
    alias = tmp_path / "python-alias"
    alias.symlink_to(interpreter.path)
    renamed = dataclasses.replace(interpreter, path=str(alias))
    assert environment._stamp(wheel, renamed, options) == environment._stamp(wheel, interpreter, options)
