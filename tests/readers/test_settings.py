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


@pytest.mark.slow
def test_a_release_must_declare_torch_by_default(wheel_x86_64, tmp_path):
    proc = nox("-s", "inspect", "--", str(wheel_x86_64), "--row", "cpu_x86_64", "--report-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "policy: torch is declared (the default for a release version, 1.5.1)" in proc.stdout
    lines = _lines(proc.stdout)
    for name in UNDECLARED_TORCH:
        assert name in lines, proc.stdout
    report = json.loads((tmp_path / "inspect-cpu_x86_64.json").read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["policy"] == {"torch": "declared", "why": "the default for a release version, 1.5.1", "strict": False, "waive": []}


@pytest.mark.slow
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


@pytest.mark.slow
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
        ('torch = "declared"\nwaivers = []\n', "unknown key 'waivers'; the keys are torch (one of 'declared', 'user-supplied'), "
                                              "strict (true or false), waive ("),
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


# --- waivers, severities and strict (issue 34): judged through inspect on PyPI's real 1.4.1, whose CPU wheel ships a
# Windows import library (a WARN) and fails one runtime core (libqnn_executorch_backend.so's runtime state twice).

QNN = "libqnn_executorch_backend.so"


def _waiver(tmp_path, text: str, name: str = "policy.toml"):
    policy = tmp_path / name
    policy.write_text(text)
    return policy


def _inspect_141(tmp_path, *args):
    from tests.helpers import release_wheel

    reports = tmp_path / "reports"
    proc = nox("-s", "inspect", "--", str(release_wheel("1.4.1")), "--row", "cpu_x86_64", "--report-dir", str(reports), *args)
    report = json.loads((reports / "inspect-cpu_x86_64.json").read_text()) if (reports / "inspect-cpu_x86_64.json").exists() else None
    return proc, report


@pytest.mark.slow
def test_without_a_waiver_the_finding_fails_and_the_windows_library_only_warns(tmp_path):
    proc, report = _inspect_141(tmp_path)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "WARN foreign files: 1 file of another platform than Linux, which nothing here loads: " \
           "executorch/data/lib/aoti_cuda_shims.lib (a Windows library archive)" in out
    assert f"FAIL one runtime core: two copies of the runtime's state in one process: {QNN}" in out
    assert "inspect-cpu_x86_64: FAILED: 11 passed, 1 failed, 0 skipped, 2 warned in " in out
    jsonschema.validate(report, SCHEMA)
    assert report["counts"] == {"pass": 11, "fail": 1, "skip": 0, "warn": 2, "waived": 0} and report["strict"] is False


@pytest.mark.slow
def test_a_waiver_with_a_reason_makes_the_fail_waived_and_the_row_pass(tmp_path):
    policy = _waiver(tmp_path, f'[[waive]]\ncheck = "one runtime core"\nmatch = "{QNN}"\n'
                               'reason = "QNN\'s AOT library is loaded by a QNN export only"\nuntil = "1.5.0"\n'
                               '[[waive]]\ncheck = "wheel RECORD"\nreason = "never needed"\n')
    proc, report = _inspect_141(tmp_path, "--policy", str(policy))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    waived = next(line for line in out.splitlines() if line.startswith("WAIVED one runtime core: "))
    assert QNN in waived and waived.endswith("(waived: QNN's AOT library is loaded by a QNN export only)")
    assert "waiver unused: [[waive]] check = 'wheel RECORD' matched no finding of this run (never needed)" in out
    assert "policy: torch is declared (the default for a release version, 1.4.1); 2 waivers" in out
    assert "inspect-cpu_x86_64: PASSED: 11 passed, 0 failed, 0 skipped, 2 warned, 1 waived in " in out
    jsonschema.validate(report, SCHEMA)
    check = next(c for c in report["checks"] if c["name"] == "one runtime core")
    assert check["status"] == "waived"
    assert check["waiver"] == {"check": "one runtime core", "match": QNN, "reason": "QNN's AOT library is loaded by a QNN export only",
                               "until": "1.5.0", "was": "fail"}
    junit = (tmp_path / "reports" / "inspect-cpu_x86_64.xml").read_text()
    assert '<skipped message="WAIVED one runtime core: ' in junit and "WARN foreign files: " in junit


@pytest.mark.slow
def test_a_waiver_whose_match_is_not_in_the_finding_waives_nothing(tmp_path):
    policy = _waiver(tmp_path, '[[waive]]\ncheck = "one runtime core"\nmatch = "libsomething_else.so"\nreason = "not this one"\n')
    proc, report = _inspect_141(tmp_path, "--policy", str(policy))
    assert proc.returncode == 1 and "FAIL one runtime core: " in proc.stdout, proc.stdout + proc.stderr
    assert "waiver unused: [[waive]] check = 'one runtime core', match = 'libsomething_else.so'" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("until", ['"1.4.1"', "2026-01-31"])
def test_an_expired_waiver_lets_the_fail_stand_and_says_it_expired(tmp_path, until):
    policy = _waiver(tmp_path, f'[[waive]]\ncheck = "one runtime core"\nreason = "known"\nuntil = {until}\n')
    proc, report = _inspect_141(tmp_path, "--policy", str(policy))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    fail = next(line for line in out.splitlines() if line.startswith("FAIL one runtime core: "))
    assert f"(the waiver of it expired: until {until.strip(chr(34))}, and this is executorch 1.4.1 on " in fail
    assert next(c for c in report["checks"] if c["name"] == "one runtime core")["status"] == "fail"


@pytest.mark.slow
def test_strict_makes_a_warning_fail_from_the_policy_or_the_command_line(tmp_path):
    waive = '[[waive]]\ncheck = "one runtime core"\nreason = "known"\n'
    for args, policy_text in ((["--strict"], waive), ([], "strict = true\n" + waive)):
        policy = _waiver(tmp_path, policy_text)
        proc, report = _inspect_141(tmp_path, "--policy", str(policy), *args)
        out = proc.stdout
        assert proc.returncode == 1, out + proc.stderr
        assert "inspect-cpu_x86_64: FAILED: 11 passed, 0 failed, 0 skipped, 2 warned, 1 waived (strict: warnings fail) in " in out
        jsonschema.validate(report, SCHEMA)
        assert report["verdict"] == "fail" and report["strict"] is True and report["exit_code"] == 1
        assert '<failure message="1 file of another platform than Linux' in (tmp_path / "reports" / "inspect-cpu_x86_64.xml").read_text()


@pytest.mark.parametrize(("text", "message"), [
    ('[[waive]]\ncheck = "one runtime core"\n', "[[waive]] 1 has no reason: every waiver names its check and says why"),
    ('[[waive]]\ncheck = "one runtime core"\nreason = "  "\n', "[[waive]] 1 has no reason"),
    ('[[waive]]\nreason = "x"\n', "[[waive]] 1 has no check"),
    ('[[waive]]\ncheck = "no such check"\nreason = "x"\n',
     "[[waive]] check = 'no such check': the gate has no check 'no such check'; the checks are "),
    ('[[waive]]\ncheck = "one runtime core"\nreason = "x"\nuntil = "soon"\n', "until = 'soon' is neither a version (1.6.0) nor a date"),
    # issue 58: PEP 440 reads "2026-11" as 2026.post11, which never expires for executorch 1.x; a date is written whole
    ('[[waive]]\ncheck = "one runtime core"\nreason = "x"\nuntil = "2026-11"\n', "until = '2026-11' is neither a version (1.6.0) nor a date"),
    ('[[waive]]\ncheck = "one runtime core"\nreason = "x"\nuntil = "2026-1-31"\n', "until = '2026-1-31' is neither a version (1.6.0) nor a date"),
    ('[[waive]]\ncheck = "one runtime core"\nreason = "x"\nexpires = "1.6"\n',
     "unknown key 'expires'; a waiver's keys are check, match, reason, until"),
    ('waive = "everything"\n', "waive must be a list of [[waive]] tables"),
    ('strict = "yes"\n', "strict = 'yes'; it must be true or false"),
])
def test_a_bad_waiver_or_strict_is_one_error_line_and_exit_2(tmp_path, text, message):
    from tests.helpers import release_wheel

    policy = _waiver(tmp_path, text)
    proc = nox("-s", "inspect", "--", str(release_wheel("1.4.1")), "--policy", str(policy))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR ")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in proc.stderr, proc.stderr


# --- a waiver accepts the findings it matches, each apart (issue 48): PyPI's real 1.5.1 under the default policy FAILs
# `libraries resolve` with five findings, one per library whose RUNPATH leads into torch/, which it does not declare.

TORCH_FINDINGS = "so pip installs none: declare torch"  # in each of 1.5.1's five torch findings, in no other
KNOWN_1_5_1 = ('[[waive]]\ncheck = "libraries resolve"\nmatch = "' + TORCH_FINDINGS + '"\nreason = "torch is the user\'s (executorch#22971)"\n'
               '[[waive]]\ncheck = "imports declared"\nmatch = "torch"\nreason = "torch is the user\'s"\n')


def _with_a_library_needing_nowhere(wheel_x86_64, tmp_path, patchelf) -> object:
    """1.5.1 with one more library, made with cc, whose DT_NEEDED (libnowhere.so) exists nowhere."""
    import shutil
    import subprocess

    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler to make the library")
    source = tmp_path / "empty.c"
    source.write_text("int executorch_gate_test_symbol(void) { return 0; }\n")
    library = tmp_path / "libnew_thing.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libnew_thing.so", "-o", str(library), str(source)], check=True)
    subprocess.run([patchelf, "--add-needed", "libnowhere.so", str(library)], check=True)
    return rewrite_wheel(wheel_x86_64, tmp_path / "mutant", add={"executorch/lib/libnew_thing.so": library.read_bytes()})


@pytest.mark.slow
def test_waivers_of_each_known_finding_pass_the_real_wheel(wheel_x86_64, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(KNOWN_1_5_1)
    proc = nox("-s", "inspect", "--", str(wheel_x86_64), "--row", "cpu_x86_64", "--policy", str(policy))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inspect-cpu_x86_64: PASSED: 12 passed, 0 failed, 0 skipped, 2 waived in " in proc.stdout


@pytest.mark.slow
def test_a_new_finding_of_a_waived_check_is_not_waived_with_the_known_ones(wheel_x86_64, tmp_path, patchelf):
    """Before issue 48's fix, the match was looked for in the whole reason, which holds the known findings: the new
    library's was waived with them, `10 passed, 0 failed, 2 waived`, and its name never printed."""
    policy = tmp_path / "policy.toml"
    policy.write_text(KNOWN_1_5_1)
    mutant = _with_a_library_needing_nowhere(wheel_x86_64, tmp_path, patchelf)
    reports = tmp_path / "reports"
    proc = nox("-s", "inspect", "--", str(mutant), "--row", "cpu_x86_64", "--policy", str(policy), "--report-dir", str(reports))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fail = next(line for line in proc.stdout.splitlines() if line.startswith("FAIL libraries resolve: "))
    assert "(not waived: 1 of its 6 findings no waiver accepts: executorch/lib/libnew_thing.so needs libnowhere.so" in fail
    assert "inspect-cpu_x86_64: FAILED: 12 passed, 1 failed, 0 skipped, 1 waived in " in proc.stdout
    # each finding its own item in the JSON report, with the waiver that accepts it or none
    checks = json.loads((reports / "inspect-cpu_x86_64.json").read_text())["checks"]
    findings = next(c for c in checks if c["name"] == "libraries resolve")["measured"]["findings"]
    unwaived = [f["finding"] for f in findings if f["waiver"] is None]
    assert len(findings) == 6 and len(unwaived) == 1 and unwaived[0].startswith("executorch/lib/libnew_thing.so needs libnowhere.so")
    assert all(f["waiver"]["match"] == TORCH_FINDINGS and TORCH_FINDINGS in f["finding"] for f in findings if f["waiver"])


@pytest.mark.slow
def test_an_expired_waiver_listed_first_does_not_shadow_one_in_force(tmp_path):
    """Before issue 48's fix the first waiver that matched decided: expired, the FAIL stood, and the waiver in force
    after it was said unused."""
    policy = _waiver(tmp_path, '[[waive]]\ncheck = "one runtime core"\nreason = "old"\nuntil = "1.4.0"\n'
                               f'[[waive]]\ncheck = "one runtime core"\nmatch = "{QNN}"\nreason = "known, tracked"\n')
    proc, report = _inspect_141(tmp_path, "--policy", str(policy))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert next(line for line in out.splitlines() if line.startswith("WAIVED one runtime core: ")).endswith("(waived: known, tracked)")
    assert "waiver unused" not in out


@pytest.mark.slow
def test_a_pyproject_holding_the_gate_s_table_that_is_not_toml_is_one_error_line(wheel_x86_64, tmp_path):
    """Issue 48: strict = true there, and one TOML error elsewhere in the file: the policy was dropped in silence, the
    defaults held and the run passed what strict would have failed. Someone else's broken pyproject (no gate table) is
    still not the gate's to judge."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "x"\nversion = \n\n[tool.executorch-wheel-gate]\nstrict = true\n')
    proc = nox("-s", "inspect", "--", str(wheel_x86_64), "--row", "cpu_x86_64", cwd=project)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR ")]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR {project / 'pyproject.toml'} holds [tool.executorch-wheel-gate] "
                                                     "but is not TOML (") and errors[0].endswith("fix the file"), proc.stderr
    (project / "pyproject.toml").write_text('[project]\nname = "x"\nversion = \n')
    proc = nox("-s", "inspect", "--", str(wheel_x86_64), "--row", "cpu_x86_64", cwd=project)
    assert proc.returncode == 1 and "policy: torch is declared (the default for a release version, 1.5.1)" in proc.stdout


def _inspect_at_once(wheel, *args, cwd=None):
    import os
    import subprocess
    import sys

    from tests.helpers import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "smoke", "inspect", str(wheel), "--row", "cpu_x86_64", *map(str, args)],
                          capture_output=True, text=True, timeout=60, cwd=cwd or REPO, env=env)


DEEP = "[" * 3000 + "]" * 3000


@pytest.mark.parametrize(("kind", "error"), [
    ("fifo", "is a FIFO, not a TOML file; pass the policy's TOML file"),
    ("device", "is a character device, not a TOML file; pass the policy's TOML file"),
    ("huge", "is over 1048576 B, larger than any policy; pass the policy's TOML file"),
    ("deep", "is not TOML (nested too deep); fix the file"),
])
def test_a_policy_that_is_no_toml_file_is_one_error_line_at_once(slim_x86_64, tmp_path, kind, error):
    """Issue 48: --policy naming a FIFO hung forever, /dev/zero ended in a MemoryError traceback, and a file nested
    3000 deep in a RecursionError traceback with exit 1 (a failed wheel's code). Each is one ERROR, exit 2, at once."""
    import os

    policy = tmp_path / "policy.toml"
    if kind == "fifo":
        os.mkfifo(policy)
    elif kind == "device":
        policy = "/dev/zero"
    elif kind == "huge":
        policy.write_text("# " + "x" * (1 << 20) + "\n")
    else:
        policy.write_text(f"strict = {DEEP}\n")
    proc = _inspect_at_once(slim_x86_64, "--policy", policy)
    assert proc.returncode == 2 and proc.stderr == f"ERROR --policy {str(policy)!r} {error}\n", proc.stdout + proc.stderr


def test_a_pyproject_nested_too_deep_is_one_error_line(slim_x86_64, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(f"[tool.executorch-wheel-gate]\nstrict = {DEEP}\n")
    proc = _inspect_at_once(slim_x86_64, cwd=project)
    assert proc.returncode == 2 and proc.stderr.startswith(f"ERROR {project / 'pyproject.toml'} holds [tool.executorch-wheel-gate] "
                                                           "but is not TOML (nested too deep)"), proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1
