"""Reading a wheel before anything is built: real PyPI wheels, and copies changed in one thing."""

from __future__ import annotations

import zipfile

import pytest

from smoke.errors import InvalidWheel, NoTorchPairing, WrongPlatform
from smoke.readers import pairing
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


def _as(wheel_x86_64, tmp_path, version: str, requires: str | None = None):
    """PyPI's 1.5.1 renamed and relabelled as another version (and declaring ``requires``, where given)."""
    name = wheel_x86_64.name.replace("1.5.1", version)

    def edit(text: str) -> str:
        text = text.replace("Version: 1.5.1", f"Version: {version}")
        return text.replace("Requires-Dist: expecttest", f"Requires-Dist: {requires}\nRequires-Dist: expecttest", 1) if requires else text
    return read_wheel(rewrite_wheel(wheel_x86_64, tmp_path, new_name=name, metadata=edit))


@pytest.mark.parametrize(("release", "torch"), [("1.2.0", "2.11"), ("1.3.1", "2.12"), ("1.4.0", "2.13"), ("1.5.1", "2.14")])
def test_constraints_pair_each_release(wheel_x86_64, tmp_path, release, torch):
    path = constraints_for(_as(wheel_x86_64, tmp_path, release))
    assert path.name == f"torch-{torch}.txt"
    assert any(line.startswith(f"torch=={torch}.") for line in path.read_text().splitlines())


def test_each_release_lines_pairing_names_its_upstream_source():
    from smoke.readers.pairing import release_lines

    lines = release_lines()
    assert lines["1.5"]["torch"] == "2.14" and "pytorch/test-infra#8837" in lines["1.5"]["source"]
    for line, entry in lines.items():
        assert entry["source"], line
        assert (pairing.CONSTRAINTS_DIR / f"torch-{entry['torch']}.txt").is_file(), line


def test_a_nightly_is_paired_by_rule_and_says_how(wheel_x86_64, tmp_path):
    # main's nightly declares no torch ("consumers bring their own"): the newest known line's torch.
    made = pairing.pair(_as(wheel_x86_64, tmp_path / "a", "1.6.0.dev20261201"))
    assert made.by_rule and made.torch == "2.14"
    assert made.how == ("executorch 1.6.0.dev20261201 is newer than every release line the gate knows (newest: 1.5) and "
                        "declares no torch: paired with the newest line's torch 2.14 (pass --constraints FILE to choose another)")
    # One that declares a torch: the newest line its requirement admits.
    made = pairing.pair(_as(wheel_x86_64, tmp_path / "b", "1.6.0.dev20261201", "torch<2.14,>=2.12"))
    assert made.torch == "2.13" and "the newest line it declares (torch<2.14,>=2.12) admits" in made.how
    # A nightly of a torch no constraints file pins: refused, naming the fix.
    with pytest.raises(NoTorchPairing, match=r"declares torch>=2.15.0.dev0, which no torch line the gate has constraints "
                                             r"for admits \(2.14, 2.13, 2.12, 2.11\); pass --constraints FILE"):
        pairing.pair(_as(wheel_x86_64, tmp_path / "c", "1.6.0.dev20261201", "torch>=2.15.0.dev0"))


def test_an_unknown_older_release_names_the_override(wheel_x86_64, tmp_path):
    wheel = _as(wheel_x86_64, tmp_path, "1.0.1")
    with pytest.raises(NoTorchPairing, match="is of no release line the gate knows .* pass --constraints FILE"):
        constraints_for(wheel)
    with pytest.raises(NoTorchPairing, match="does not exist"):
        constraints_for(wheel, tmp_path / "nope.txt")
