"""smoke.console: under GitHub Actions each FAIL (and each ERROR) is also an `::error` workflow command naming its
check, each WARN a `::warning`, escaped as GitHub's toolkit escapes them and with credentials masked; elsewhere the
lines alone."""

from __future__ import annotations

import pytest

from smoke import console, markup
from smoke.report import Run
from smoke.results import CheckResult, Status, failed, passed, skipped, warned
from tests.helpers import HOSTILE, WAIVED_RESULT, annotations


@pytest.mark.parametrize(("result", "strict", "level"), [
    (failed("libraries resolve", "needs libtorch.so: declare torch"), False, "error"),
    (warned("foreign files", "a Windows .lib"), False, "warning"),
    (warned("foreign files", "a Windows .lib"), True, "error"),  # strict: the warning fails the run
    (WAIVED_RESULT, False, None),
    (passed("wheel tags", "match"), False, None),
    (skipped("device code", "no +cuXXX label"), False, None),
], ids=["fail", "warn", "strict-warn", "waived", "pass", "skip"])
def test_under_github_actions_what_fails_a_run_is_an_error_annotation_naming_its_check(capsys, monkeypatch, result, strict, level):
    run = Run("cpu_x86_64", strict=strict)
    console.emit(run, result)
    assert annotations(capsys.readouterr().out) == []  # not under GitHub Actions: the line alone
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    console.emit(run, result)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == result.line()
    assert annotations("\n".join(lines)) == ([(level, result.name, result.told)] if level else [])


def test_a_hostile_name_or_reason_is_one_workflow_command_read_back_as_written_with_credentials_masked(capsys, monkeypatch):
    """A reason's newline must not end the annotation's command and start another (`::add-mask::`, `::stop-commands::`),
    a `:` or `,` in a check's name must not end its title, and an index's token must not reach the job's annotations."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    printable = [t for t in HOSTILE if "\udcff" not in t]  # a lone surrogate is no line a terminal prints, annotated or not
    texts = [*printable, "a\n::add-mask::x\r\n::stop-commands::y", "50% of a, b: c %0A %25", "from https://user:SECRET@host/simple"]
    run = Run("cpu_x86_64")
    for text in texts:
        console.emit(run, CheckResult(text, Status.FAIL, text))
    out = capsys.readouterr().out
    commands = [line for line in out.splitlines() if line.startswith("::error ")]
    assert len(commands) == len(texts)  # each is one line
    assert annotations("\n".join(commands)) == [("error", markup.redact(t), markup.redact(t)) for t in texts]
    assert "SECRET" not in out


def test_under_github_actions_an_error_is_an_annotation_too(capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    console.error("wheel 'x.whl' is built for aarch64; use nox -s cpu_aarch64")
    captured = capsys.readouterr()
    assert captured.err == "ERROR wheel 'x.whl' is built for aarch64; use nox -s cpu_aarch64\n"
    assert annotations(captured.out) == [("error", "the gate could not run", "wheel 'x.whl' is built for aarch64; use nox -s cpu_aarch64")]


@pytest.mark.parametrize("name", ["lib\n::add-mask::secret.so", "lib\r  ::error title=x::forged.so", "::warning::x.so"])
def test_a_member_name_cannot_smuggle_a_workflow_command_onto_a_line_of_its_own(capsys, monkeypatch, name):
    # A wheel member's name goes into FAIL lines as it is; a newline in it would start a line the runner reads as a
    # workflow command (leading whitespace stripped). Every such line is marked, so none begins with "::".
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    console.emit(Run("cpu_x86_64"), failed("wheel RECORD", f"{name} is not in RECORD"))
    lines = capsys.readouterr().out.splitlines()
    forged = [line for line in lines if line.lstrip().startswith("::") and not line.startswith("::error title=wheel RECORD::")]
    assert forged == [], lines


def test_a_name_that_is_not_utf8_is_printed_escaped_not_a_crash(capsys):
    console.say("executorch/\udcff.so is not in RECORD")
    assert capsys.readouterr().out == "executorch/\\udcff.so is not in RECORD\n"
