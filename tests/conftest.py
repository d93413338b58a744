from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

from smoke.readers.wheel import read_wheel
from tests.helpers import declare_torch, make_cuda_wheel, patchelf_path, platform_wheel, pypi_wheel, rewrite_wheel

# Hypothesis profiles (its documentation's way: the number of examples is a setting of the run). Each property names its
# count through tests.helpers.examples, and a profile caps it: `quick` for the fast tier (nox -s tests -- -m "not slow"),
# `ci` for the whole suite (what .ci/run runs: the noxfile's tests session loads it), `thorough` with every property's
# own count, run before a release and weekly (.github/workflows: nox -s tests -- --hypothesis-profile=thorough).
# A run loads one with --hypothesis-profile=NAME; without it, `quick`.
PROFILE_CAPS = {"quick": 25, "ci": 50, "thorough": 1_000_000}
for _name, _cap in PROFILE_CAPS.items():
    settings.register_profile(_name, max_examples=_cap)
settings.load_profile("quick")

# Fixtures that download from the package index (PyPI's wheels, kept in .gate/test-wheels after the
# first time); a test that takes one, directly or through another fixture, is marked `network`.
DOWNLOADING = {"wheel_x86_64", "wheel_aarch64", "wheel_1_2_0", "pypi_1_4_1", "declared_x86_64", "declared_aarch64",
               "macos_1_5_1", "windows_1_0_0"}


def pytest_collection_modifyitems(items):
    for item in items:
        if DOWNLOADING & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.network)
    # The slow tests first (a stable sort): under pytest-xdist (nox -s tests runs it) the workers take them while every
    # other test still waits, so that no long test is left to run alone at the end (one took 7 minutes at the end of
    # a run, the other worker idle).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _no_developer_pip_settings(monkeypatch):
    # A developer's PIP_CONSTRAINT or PIP_TARGET must not change what the gate installs in a test.
    for name in ("PIP_CONSTRAINT", "PIP_TARGET", "PIP_REQUIRE_VIRTUALENV"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def wheel_x86_64() -> Path:
    return pypi_wheel("x86_64")


@pytest.fixture(scope="session")
def wheel_aarch64() -> Path:
    return pypi_wheel("aarch64")


@pytest.fixture(scope="session")
def declared_x86_64(wheel_x86_64, tmp_path_factory) -> Path:
    """PyPI's x86_64 1.5.1 with the torch requirement it lacks (tests.helpers.declare_torch): a wheel that passes."""
    return declare_torch(wheel_x86_64, tmp_path_factory.mktemp("declared"))


@pytest.fixture(scope="session")
def declared_aarch64(wheel_aarch64, tmp_path_factory) -> Path:
    return declare_torch(wheel_aarch64, tmp_path_factory.mktemp("declared"))


@pytest.fixture(scope="session")
def wheel_1_2_0() -> Path:
    """The release the GPU test machine gates (its torch is 2.11): cp312, x86_64."""
    return pypi_wheel("x86_64", "1.2.0", "3.12")


@pytest.fixture(scope="session")
def slim_x86_64(wheel_x86_64, tmp_path_factory) -> Path:
    """PyPI's x86_64 wheel with only its metadata, its shared libraries and the module its one command (flatc, in
    entry_points.txt) names (RECORD rewritten to match): the same real files where the checks look, a tenth of the
    time to copy in each test."""
    def keep(name: str) -> bool:
        return ".dist-info/" in name or (".so" in name.rsplit("/", 1)[-1]) or name == "executorch/data/bin/__init__.py"

    return rewrite_wheel(wheel_x86_64, tmp_path_factory.mktemp("slim"), keep=keep)


# One row run per wheel and options (issue 57): a test that asserts on a row's output, report or environment reads the
# run an earlier test made for the same wheel with the same options, instead of running it again. The run is made once
# for the whole session, whichever xdist worker asks first (pytest-xdist's documented recipe for a session fixture run
# once: a folder all workers share, the basetemp's parent, and a file lock), and kept as data (its exit code and output)
# beside its environment and reports. A test that runs the gate on that environment again holds its lock
# (``RowRun.using``): the gate refuses a second run in an environment in use. The folder is removed when the session ends.
ROW_RUNS = "row-runs"


class RowRun:
    def __init__(self, folder: Path, said: dict) -> None:
        import subprocess

        self.folder, self.env_dir, self.report = folder, folder / "env", folder / "reports" / f"{said['row']}.json"
        self.proc = subprocess.CompletedProcess(said["args"], said["returncode"], said["stdout"], said["stderr"])

    @contextlib.contextmanager
    def using(self):
        """The environment, for a test that runs the gate in it again: one such test at a time, across workers."""
        from filelock import FileLock

        with FileLock(str(self.folder / "env.lock")):
            yield self.env_dir


class RowRuns:
    """The row runs of this session, by (the gate's source, the wheel's sha256, the row, the options)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, wheel: Path, row: str = "cpu_x86_64", *options: str) -> RowRun:
        import hashlib
        import json

        from filelock import FileLock

        from smoke.readers.wheel import _sha256
        from tests.helpers import REPO, gate_source_digest, nox

        key = json.dumps([gate_source_digest(), _sha256(wheel), row, list(options)])
        folder = self.root / hashlib.sha256(key.encode()).hexdigest()[:16]
        folder.mkdir(parents=True, exist_ok=True)
        said_file = folder / "run.json"
        with FileLock(str(folder / "run.lock")):
            if not said_file.is_file():
                args = ["-s", row, "--", str(wheel), "--env-dir", str(folder / "env"), "--report-dir",
                        str(folder / "reports"), *options]
                proc = nox(*args, cwd=REPO)
                said_file.write_text(json.dumps({"key": key, "row": row, "args": args, "returncode": proc.returncode,
                                                 "stdout": proc.stdout, "stderr": proc.stderr}))
        return RowRun(folder, json.loads(said_file.read_text()))


def _row_runs_root(config) -> Path:
    """The folder every process of the session shares: the controller's basetemp (a worker's is a folder in it)."""
    base = config._tmp_path_factory.getbasetemp()
    return (base.parent if hasattr(config, "workerinput") else base) / ROW_RUNS


@pytest.fixture(scope="session")
def row_runs(request) -> RowRuns:
    return RowRuns(_row_runs_root(request.config))


def pytest_sessionfinish(session):
    # Once every worker has ended (the controller's session ends last; without xdist, the one session): the runs'
    # environments are several GB each.
    if not hasattr(session.config, "workerinput") and hasattr(session.config, "_tmp_path_factory"):
        try:
            shutil.rmtree(_row_runs_root(session.config), ignore_errors=True)
        except (OSError, ValueError):
            pass


@pytest.fixture(scope="session")
def declared_row(row_runs, declared_x86_64) -> RowRun:
    """The CPU row on PyPI's 1.5.1 with torch declared, default options: it PASSes (tests/integration/test_row_runs.py)."""
    return row_runs.get(declared_x86_64)


@pytest.fixture
def copy_artifacts(tmp_path):
    def copy(folder: Path) -> Path:
        target = tmp_path / folder.name
        shutil.copytree(folder, target)
        for path in target.iterdir():
            path.chmod(0o644)
        return target

    return copy


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """The child's two models exported through XNNPACK with executorch 1.5.1, once per test run."""
    from smoke.child.delegates import export_xnnpack
    from smoke.child.models import models

    root = tmp_path_factory.mktemp("exports")
    made = {}
    for label, (model, example) in models().items():
        (root / label).mkdir()
        export_xnnpack(model, example, root / label)
        made[label] = root / label
    return made


@pytest.fixture(scope="module")
def cuda_wheel(slim_x86_64, tmp_path_factory):
    """PyPI's x86_64 wheel (slim) relabelled +cu130, with the CUDA delegate's libraries and the runtime declared."""
    return make_cuda_wheel(slim_x86_64, tmp_path_factory.mktemp("cuda-wheel"))


@pytest.fixture(scope="module")
def declared_slim(slim_x86_64, tmp_path_factory) -> Path:
    """The slim 1.5.1 wheel with torch declared: it passes every file check, so a mutant's FAIL is the mutant's."""
    return declare_torch(slim_x86_64, tmp_path_factory.mktemp("declared-slim"))


@pytest.fixture(scope="module")
def pypi(wheel_x86_64):
    return read_wheel(wheel_x86_64)


@pytest.fixture(scope="module")
def pypi_1_4_1():
    return read_wheel(pypi_wheel("x86_64", "1.4.1"))


@pytest.fixture(scope="module")
def macos_1_5_1() -> Path:
    return platform_wheel("macosx_14_0_arm64", "1.5.1")


@pytest.fixture(scope="module")
def macos_declared(macos_1_5_1, tmp_path_factory) -> Path:
    """1.5.1 for macOS with the torch requirement it lacks (as on Linux): a wheel whose files pass."""
    return declare_torch(macos_1_5_1, tmp_path_factory.mktemp("declared"))


@pytest.fixture(scope="module")
def windows_1_0_0() -> Path:
    return platform_wheel("win_amd64", "1.0.0")


@pytest.fixture(scope="session")
def patchelf() -> str:
    """The patchelf that changes real libraries into mutants (tests.helpers.patched, patched_member)."""
    return patchelf_path()


@pytest.fixture(autouse=True)
def _not_under_github_actions(monkeypatch):
    # On GitHub's runners the gate also prints workflow commands (smoke.console.annotate); the tests that want them
    # set GITHUB_ACTIONS themselves, so that what every other test reads is what a user's terminal shows.
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    # and the job's files (the step summary a row writes to, smoke.environment.loaderenv.CI_FILE_VARIABLES): a test sets
    # those it wants, in its own folder, never the runner's
    from smoke.environment.loaderenv import CI_FILE_VARIABLES

    for name in CI_FILE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def installed_gate(tmp_path) -> Path:
    """A site-packages folder as `pip install` of the gate leaves it (pyproject.toml's [tool.setuptools]): the smoke
    package, the checkout's constraints/ as smoke/constraints, and the distribution's metadata (version 9.9.9.dev0, so
    that it is told from the checkout's); no checkout around it."""
    from tests.helpers import REPO

    site = tmp_path / "site-packages"
    shutil.copytree(REPO / "smoke", site / "smoke", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "constraints", site / "smoke" / "constraints")
    info = site / "executorch_wheel_gate-9.9.9.dev0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: executorch-wheel-gate\nVersion: 9.9.9.dev0\n")
    return site
