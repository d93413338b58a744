"""smoke.readers.settings: the gate's policy (--policy FILE, [tool.executorch-wheel-gate] in the pyproject.toml of the
folder nox was run from, else the defaults), judged through `nox -s inspect` on PyPI's real 1.5.1 (file checks only)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.helpers import SCHEMA, nox, rewrite_wheel

UNDECLARED_TORCH = ("FAIL libraries resolve", "FAIL imports declared")


def _lines(out: str) -> dict[str, str]:
    return {line.split(":", 1)[0]: line for line in out.splitlines() if line.startswith(("PASS ", "FAIL ", "SKIP "))}


def test_a_release_must_declare_torch_by_default(wheel_x86_64, tmp_path):
    proc = nox("-s", "inspect", "--", str(wheel_x86_64), "--row", "cpu_x86_64", "--report-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "policy: torch is declared (the default for a release version, 1.5.1)" in proc.stdout
    lines = _lines(proc.stdout)
    for name in UNDECLARED_TORCH:
        assert name in lines, proc.stdout
    report = json.loads((tmp_path / "inspect-cpu_x86_64.json").read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["policy"] == {"torch": "declared", "why": "the default for a release version, 1.5.1"}


def test_a_policy_file_makes_torch_user_supplied_and_nothing_fails_for_it(wheel_x86_64, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('torch = "user-supplied"\n')
    proc = nox("-s", "inspect", "--", str(wheel_x86_64), "--row", "cpu_x86_64", "--policy", str(policy),
               "--report-dir", str(tmp_path / "reports"))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert f"policy: torch is user-supplied (torch = 'user-supplied', --policy {str(policy)!r})" in out
    lines = _lines(out)
    assert "user-supplied (the gate's policy)" in lines["PASS libraries resolve"]
    assert lines["PASS imports declared"].startswith("PASS imports declared:") and "torch" in lines["PASS imports declared"]
    report = json.loads((tmp_path / "reports" / "inspect-cpu_x86_64.json").read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["policy"]["torch"] == "user-supplied"


def test_a_dev_version_leaves_torch_to_the_user_by_default_and_a_pyproject_can_say_otherwise(wheel_x86_64, tmp_path):
    name = wheel_x86_64.name.replace("1.5.1", "1.6.0.dev20261201")
    nightly = rewrite_wheel(wheel_x86_64, tmp_path / "wheel", new_name=name,
                            metadata=lambda text: text.replace("Version: 1.5.1", "Version: 1.6.0.dev20261201"))
    proc = nox("-s", "inspect", "--", str(nightly), "--row", "cpu_x86_64")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("policy: torch is user-supplied (the default for a dev version, 1.6.0.dev20261201: main leaves torch to its "
            "consumers (setup.py))") in proc.stdout
    # The folder nox is run from holds a pyproject.toml whose table asks for a declared torch: read, and said.
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.executorch-wheel-gate]\ntorch = "declared"\n')
    proc = nox("-s", "inspect", "--", str(nightly), "--row", "cpu_x86_64", cwd=project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"policy: torch is declared (torch = 'declared', [tool.executorch-wheel-gate] in {project / 'pyproject.toml'})" in proc.stdout
    for name in UNDECLARED_TORCH:
        assert name in _lines(proc.stdout)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('torch = "maybe"\n', "torch = 'maybe'; it must be one of 'declared', 'user-supplied'"),
        ('torch = "declared"\nwaive = []\n', "unknown key 'waive'; the keys are torch (one of 'declared', 'user-supplied')"),
        ("torch = \n", "is not TOML ("),
    ],
)
def test_a_policy_the_gate_cannot_read_is_one_error_line(wheel_x86_64, tmp_path, text, error):
    policy = tmp_path / "policy.toml"
    policy.write_text(text)
    proc = nox("-s", "inspect", "--", str(wheel_x86_64), "--policy", str(policy))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR ")]
    assert len(errors) == 1 and error in errors[0] and f"--policy {str(policy)!r}" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
