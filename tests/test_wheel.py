"""Reading a wheel before anything is built: real PyPI wheels, and copies changed in one thing."""

from __future__ import annotations

import zipfile

import pytest

from smoke.errors import InvalidWheel, NoTorchPairing, WrongPlatform
from smoke.readers.pairing import constraints_for
from smoke.readers.wheel import Interpreter, check_interpreter, platform_machine, read_wheel
from smoke.rows import ROWS, check_machine
from tests.helpers import rewrite_wheel


@pytest.mark.parametrize(
    ("platform", "machine"),
    [("manylinux_2_28_x86_64", "x86_64"), ("manylinux_2_28_aarch64", "aarch64"), ("macosx_14_0_arm64", "arm64"), ("any", "any")],
)
def test_platform_machine(platform, machine):
    assert platform_machine(platform) == machine


def test_reads_pypi_wheel(wheel_x86_64):
    wheel = read_wheel(wheel_x86_64)
    assert str(wheel.version) == "1.5.1" and wheel.release == "1.5"
    assert wheel.machines == {"x86_64"}
    assert any(req.name == "torchao" for req in wheel.requires_dist)
    assert len(wheel.sha256) == 64


def test_architecture_is_refused_naming_the_right_session(wheel_x86_64, wheel_aarch64):
    with pytest.raises(WrongPlatform, match=r"built for x86_64; the cuda_aarch64 row needs aarch64 \(use nox -s cuda_x86_64\)"):
        check_machine(read_wheel(wheel_x86_64), ROWS["cuda_aarch64"])
    with pytest.raises(WrongPlatform, match=r"use nox -s cuda_aarch64"):
        check_machine(read_wheel(wheel_aarch64), ROWS["cuda_x86_64"])
    check_machine(read_wheel(wheel_aarch64), ROWS["cuda_aarch64"])


@pytest.mark.parametrize(
    ("version", "accepted"),
    [((3, 11), True), ((3, 12), False), ((3, 10), False)],
)
def test_python_tag_against_interpreter(wheel_x86_64, version, accepted):
    interpreter = Interpreter("/usr/bin/python", "cpython", version)
    if accepted:
        check_interpreter(read_wheel(wheel_x86_64), interpreter)
    else:
        with pytest.raises(WrongPlatform, match=r"is for cp311; .* run the gate with --python python3\.11"):
            check_interpreter(read_wheel(wheel_x86_64), interpreter)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.whl", "does not exist"),
        (lambda d: d, "is not a file"),
        (lambda d: _write(d / "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl", b"not a zip"), "cannot be read as a wheel archive"),
        (lambda d: _zip(d / "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"), "has no .dist-info folder"),
        (lambda d: _write(d / "notes.txt", b""), "is not a wheel file name"),
        (lambda d: _zip(d / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"), "of project 'torch', not 'executorch'"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, make, message):
    with pytest.raises(InvalidWheel, match=message):
        read_wheel(make(tmp_path))


def _write(path, data):
    path.write_bytes(data)
    return path


def _zip(path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("README", "a zip, not a wheel")
    return path


@pytest.mark.parametrize(("release", "torch"), [("1.2.0", "2.11"), ("1.3.1", "2.12"), ("1.4.0", "2.13"), ("1.5.1", "2.13")])
def test_constraints_pair_each_release(wheel_x86_64, tmp_path, release, torch):
    name = wheel_x86_64.name.replace("1.5.1", release)
    wheel = read_wheel(rewrite_wheel(wheel_x86_64, tmp_path, new_name=name, metadata=lambda t: t.replace("Version: 1.5.1", f"Version: {release}")))
    path = constraints_for(wheel)
    assert path.name == f"torch-{torch}.txt"
    assert f"torch=={torch}.0" in path.read_text()


def test_unknown_release_names_the_override(wheel_x86_64, tmp_path):
    name = wheel_x86_64.name.replace("1.5.1", "9.9.0")
    wheel = read_wheel(rewrite_wheel(wheel_x86_64, tmp_path, new_name=name, metadata=lambda t: t.replace("Version: 1.5.1", "Version: 9.9.0")))
    with pytest.raises(NoTorchPairing, match="no known torch pairing .* pass --constraints FILE"):
        constraints_for(wheel)
    with pytest.raises(NoTorchPairing, match="does not exist"):
        constraints_for(wheel, tmp_path / "nope.txt")
