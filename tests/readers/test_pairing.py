"""smoke.readers.pairing: the torch each executorch release (and nightly) is paired with, on PyPI's real
1.5.1 renamed and relabelled."""

from __future__ import annotations

import pytest

from smoke.errors import NoTorchPairing
from smoke.readers import pairing
from smoke.readers.pairing import constraints_for
from smoke.readers.wheel import read_wheel
from tests.helpers import rewrite_wheel


def _as(wheel_x86_64, tmp_path, version: str, requires: str | None = None):
    """PyPI's 1.5.1 renamed and relabelled as another version (and declaring ``requires``, where given)."""
    name = wheel_x86_64.name.replace("1.5.1", version)

    def edit(text: str) -> str:
        text = text.replace("Version: 1.5.1", f"Version: {version}")
        return text.replace("Requires-Dist: expecttest", f"Requires-Dist: {requires}\nRequires-Dist: expecttest", 1) if requires else text
    return read_wheel(rewrite_wheel(wheel_x86_64, tmp_path, new_name=name, metadata=edit))


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_an_unknown_older_release_names_the_override(wheel_x86_64, tmp_path):
    wheel = _as(wheel_x86_64, tmp_path, "1.0.1")
    with pytest.raises(NoTorchPairing, match="is of no release line the gate knows .* pass --constraints FILE"):
        constraints_for(wheel)
    with pytest.raises(NoTorchPairing, match="does not exist"):
        constraints_for(wheel, tmp_path / "nope.txt")
