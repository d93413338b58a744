"""smoke.environment.build: the plan of what to install, the reuse of an environment, and what a failed build leaves."""

from __future__ import annotations

import json
import zipfile
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


# --- where torch came from, as the row's "torch from ..." line says it -------------------------------------------------


def _tiny_wheel(folder: Path, name: str, version: str, body: str = "") -> Path:
    """A pure-Python wheel of one module (its RECORD hashing it), standing in for torch or executorch."""
    import base64
    import hashlib

    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": body.encode(),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    digest = {path: base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode() for path, data in files.items()}
    record = "".join(f"{path},sha256={digest[path]},{len(data)}\n" for path, data in files.items()) + f"{info}/RECORD,,\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in {**files, f"{info}/RECORD": record.encode()}.items():
            archive.writestr(member, data)
    return path


def _only_pip_settings(monkeypatch, **settings: str) -> None:
    """pip's configuration is these PIP_* variables alone (no pip.conf, none of the machine's variables)."""
    import os

    for name in [name for name in os.environ if name.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip then reads no configuration file
    for name, value in settings.items():
        monkeypatch.setenv(f"PIP_{name.upper()}", value)


def _torch_line(tmp_path: Path, reuse_env: bool = False) -> str:
    pytest.importorskip("uv")
    (tmp_path / "c.txt").write_text("torch==0.1\n")
    options = environment.EnvOptions(env_dir=tmp_path / "env", constraints=tmp_path / "c.txt",
                                     **{**opts.for_environment(opts.Options()), "venv_backend": "uv", "reuse_env": reuse_env})
    wheel = read_wheel(_tiny_wheel(tmp_path / "in", "executorch", "1.5.1"))
    with environment.built(wheel, probe_interpreter(None), options, lambda line: None) as env:
        return f"torch from {env.torch_source}"  # the line the row prints (smoke.engine.row.environment_built)


@pytest.mark.slow
def test_torch_from_a_local_wheel_folder_is_said_so(tmp_path, monkeypatch):
    """A torch found in pip's configured find-links folder is said to come from that folder, not from an index;
    and again when the environment is reused."""
    links = tmp_path / "links"
    _tiny_wheel(links, "torch", "0.1")
    _only_pip_settings(monkeypatch, find_links=str(links), no_index="1")
    line = f"torch from a local wheel folder ({links}), pinned by c.txt"
    assert _torch_line(tmp_path) == line
    assert _torch_line(tmp_path, reuse_env=True) == line  # as the build found it
    (tmp_path / "env" / environment.TORCH_SOURCE).unlink()  # an environment an earlier gate built: found again
    assert _torch_line(tmp_path, reuse_env=True) == line


def test_torch_from_a_package_index_is_said_so(tmp_path, monkeypatch):
    """The paired torch found in pip's index (a file:// simple index, so that no network is needed) beside an older
    one in a find-links folder: the index is named."""
    _tiny_wheel(tmp_path / "links", "torch", "0.0.9")
    _tiny_wheel(tmp_path / "files", "torch", "0.1")
    (tmp_path / "simple" / "torch").mkdir(parents=True)
    (tmp_path / "simple" / "torch" / "index.html").write_text(
        '<html><body><a href="../../files/torch-0.1-py3-none-any.whl">torch-0.1-py3-none-any.whl</a></body></html>')
    index = (tmp_path / "simple").as_uri()
    _only_pip_settings(monkeypatch, find_links=str(tmp_path / "links"), index_url=index)
    assert _torch_line(tmp_path) == f"torch from the package index {index}, pinned by c.txt"


def test_a_wheel_of_the_same_name_and_version_is_not_taken_for_the_installed_one(tmp_path):
    """Another build of torch 0.1 in a local folder is not where the installed torch came from: its files differ; the
    one remote source given is named instead."""
    site = tmp_path / "site"
    installed = _tiny_wheel(tmp_path / "built", "torch", "0.1", body="# the installed build\n")
    with zipfile.ZipFile(installed) as archive:
        archive.extractall(site)
    _tiny_wheel(tmp_path / "links", "torch", "0.1", body="# another build\n")
    given = installer.places(installer.Sources(find_links=(str(tmp_path / "links"),)), None, None)
    assert installer.installed_from([site], "torch", given) == "the package index PyPI"
    given = installer.places(installer.Sources(find_links=(str(tmp_path / "built"),)), None, None)
    assert installer.installed_from([site], "torch", given) == f"a local wheel folder ({tmp_path / 'built'})"
