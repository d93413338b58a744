from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
H200 = DATA / "h200-executorch-1.2.0"
CPU = DATA / "cpu-executorch-1.5.1"
DEVICE_CODE = DATA / "device-code"
WHEEL_CACHE = REPO / ".gate" / "test-wheels"
PYPI_RELEASE = "1.5.1"


@pytest.fixture(autouse=True)
def _no_developer_pip_settings(monkeypatch):
    # A developer's PIP_CONSTRAINT or PIP_TARGET must not change what the gate installs in a test.
    for name in ("PIP_CONSTRAINT", "PIP_TARGET", "PIP_REQUIRE_VIRTUALENV"):
        monkeypatch.delenv(name, raising=False)


def pypi_wheel(machine: str, release: str = PYPI_RELEASE, python: str = "3.11") -> Path:
    """PyPI's executorch wheel for this machine kind and CPython, downloaded once (the file only)."""
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    tag = "cp" + python.replace(".", "")
    pattern = f"executorch-{release}-{tag}-{tag}-manylinux_*_{machine}.whl"
    found = sorted(WHEEL_CACHE.glob(pattern))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", python,
             "--implementation", "cp", "--platform", f"manylinux_2_28_{machine}", "-d", str(WHEEL_CACHE),
             f"executorch=={release}"],
            check=True,
        )
        found = sorted(WHEEL_CACHE.glob(pattern))
    return found[-1]


@pytest.fixture(scope="session")
def wheel_x86_64() -> Path:
    return pypi_wheel("x86_64")


@pytest.fixture(scope="session")
def wheel_aarch64() -> Path:
    return pypi_wheel("aarch64")


@pytest.fixture(scope="session")
def wheel_1_2_0() -> Path:
    """The release the GPU test machine gates (its torch is 2.11): cp312, x86_64."""
    return pypi_wheel("x86_64", "1.2.0", "3.12")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def rewrite_wheel(source: Path, target_dir: Path, *, new_name: str | None = None, drop=(), add=None, metadata=None,
                  update_record: bool = True, keep=None) -> Path:
    """A copy of a real wheel with one thing changed: its name, files removed, added or replaced, or METADATA
    edited. RECORD is rewritten to match (as a build tool would) unless ``update_record`` is False."""
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / (new_name or source.name)
    add = dict(add or {})
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as dst:
        record_item, lines = None, []
        for item in src.infolist():
            if any(item.filename.startswith(prefix) for prefix in drop) or item.filename in add:
                continue
            if keep is not None and not keep(item.filename):
                continue
            if item.filename.endswith(".dist-info/RECORD"):
                record_item = item
                continue
            data = src.read(item.filename)
            if metadata and item.filename.endswith(".dist-info/METADATA"):
                data = metadata(data.decode()).encode()
            dst.writestr(item, data)
            if not item.is_dir():
                lines.append(_record_line(item.filename, data))
        for name, data in add.items():
            dst.writestr(name, data)
            lines.append(_record_line(name, data))
        if record_item is not None:
            if update_record:
                record = "\n".join([*lines, f"{record_item.filename},,"]) + "\n"
            else:
                record = src.read(record_item.filename).decode()
            dst.writestr(record_item, record)
    return target


@pytest.fixture(scope="session")
def slim_x86_64(wheel_x86_64, tmp_path_factory) -> Path:
    """PyPI's x86_64 wheel with only its metadata and its shared libraries (RECORD rewritten to match):
    the same real files where the checks look, a tenth of the time to copy in each test."""
    keep = lambda name: ".dist-info/" in name or (".so" in name.rsplit("/", 1)[-1])
    return rewrite_wheel(wheel_x86_64, tmp_path_factory.mktemp("slim"), keep=keep)


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
    from smoke.child import export_xnnpack, models

    root = tmp_path_factory.mktemp("exports")
    made = {}
    for label, (model, example) in models().items():
        (root / label).mkdir()
        export_xnnpack(model, example, root / label)
        made[label] = root / label
    return made
