"""smoke.environment.build: the plan of what to install, the reuse of an environment, and what a failed build leaves."""

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


def test_the_stamp_holds_no_index_token(wheel_x86_64, tmp_path):
    """Issue 37: the environment's stamp (written into its folder, compared on --reuse-env) masks a --torch-index
    password; a build with another token of the same index is the same build."""
    (tmp_path / "c.txt").write_text("torch==2.14.1\n")
    wheel, interpreter = read_wheel(wheel_x86_64), probe_interpreter(None)

    def stamp(token: str) -> dict:
        options = environment.EnvOptions(env_dir=tmp_path / "env", constraints=tmp_path / "c.txt",
                                         **{**opts.for_environment(opts.Options()),
                                            "torch_index": f"https://user:{token}@example.com/simple"})
        return environment._stamp(wheel, interpreter, options)

    assert stamp("SECRET123")["torch_index"] == "https://user:****@example.com/simple"
    assert "SECRET123" not in json.dumps(stamp("SECRET123")) and stamp("SECRET123") == stamp("OTHER")
