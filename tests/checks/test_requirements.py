"""smoke.checks.requirements: ``torch requirement``, on PyPI's real wheels and mutants of them, through ``python -m smoke``
and a row (issue 37: a Requires-Dist off the pairing, or pinning a local version, was an ERROR of the gate)."""

from __future__ import annotations

import pytest

from tests.helpers import line, nox, pypi_wheel, release_wheel, rewrite_wheel, smoke

pytestmark = pytest.mark.network


def _declaring(tmp_path, requirement: str):
    def edit(text: str) -> str:
        return text.replace("Requires-Dist: expecttest", f"Requires-Dist: {requirement}\nRequires-Dist: expecttest", 1)
    return rewrite_wheel(pypi_wheel("x86_64"), tmp_path, metadata=edit)


@pytest.mark.slow
def test_pypis_wheels_pass_as_they_declare_torch():
    assert line(smoke("inspect", pypi_wheel("x86_64")), "PASS torch requirement: ") == (
        "PASS torch requirement: declares no torch for x86_64, and no requirement pins a local version")
    assert line(smoke("inspect", release_wheel("1.2.0")), "PASS torch requirement: ") == (
        "PASS torch requirement: Requires-Dist torch>=2.11.0 admits torch 2.11, the line executorch 1.2 pairs with; no "
        "requirement pins a local version")


@pytest.mark.slow
def test_a_torch_off_the_pairing_fails_the_wheel_and_nothing_is_built(tmp_path):
    mutant = _declaring(tmp_path, "torch==2.13.0")
    out = smoke("inspect", mutant, "--row", "cpu_x86_64")
    said = line(out, "FAIL torch requirement: ")
    assert said.startswith("FAIL torch requirement: Requires-Dist torch==2.13.0 admits no torch 2.14, the line executorch "
                           "1.5 pairs with ("), said
    # The row: a FAIL of the wheel (exit 1), not an ERROR of the gate (exit 2); nothing installed, every skip said.
    row = nox("-s", "cpu_x86_64", "--", str(mutant), "--policy", "docs/examples/torch-user-supplied.toml")
    assert "the environment is not built: the wheel's requirements cannot be installed as declared beside its paired torch " \
           "(see torch requirement)" in row.stdout, row.stdout + row.stderr
    assert "ERROR" not in row.stdout + row.stderr
    assert "cpu_x86_64: FAILED (exit 1)" in row.stdout + row.stderr
    assert line(row, "SKIP run with data file (weighted): ") == (
        "SKIP run with data file (weighted): not run: the environment is not built (see torch requirement)")


@pytest.mark.slow
def test_a_local_version_pin_fails_naming_it(tmp_path):
    out = smoke("inspect", _declaring(tmp_path, "torch==2.14.0+cu124"), "--row", "cpu_x86_64")
    said = line(out, "FAIL torch requirement: ")
    assert said.startswith("FAIL torch requirement: Requires-Dist torch==2.14.0+cu124 pins a local version, which no public "
                           "index serves (PEP 440; PyPI refuses them), so pip install from the package index cannot satisfy it "
                           "(pytorch/TensorRT#4545)"), said


@pytest.mark.slow
@pytest.mark.parametrize("requirement", [
    "torch @ https://download.pytorch.org/whl/cpu/torch-2.14.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    'pyyaml @ file:///tmp/pyyaml.whl ; sys_platform == "win32"'])  # another package, and one whose markers exclude the row
def test_a_direct_reference_fails_naming_it_whatever_its_markers(tmp_path, requirement):
    """Issue 58: `torch @ URL` has an empty specifier, so it admitted the pairing and pinned no local version: PASS."""
    out = smoke("inspect", _declaring(tmp_path, requirement), "--row", "cpu_x86_64")
    said = line(out, "FAIL torch requirement: ")
    assert said.startswith(f"FAIL torch requirement: Requires-Dist {requirement} is a direct reference "
                           f"(name @ URL, PEP 508), which PyPI refuses to upload (\"Can't have direct dependency\", "
                           f"pypi/warehouse)"), said
