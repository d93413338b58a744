"""A row that must execute never PASSes with the seed's checks skipped (smoke.commands.gate.unexecuted, smoke.stages.MUST_EXECUTE)."""

from __future__ import annotations

from smoke import stages
from smoke.commands import gate
from smoke.results import failed, passed, skipped


def _all_passed():
    return [passed(name, "ok") for name in stages.MUST_EXECUTE]


def test_nothing_unrun_when_every_seed_check_passed_or_failed():
    results = _all_passed()
    results[0] = failed(results[0].name, "raised")
    assert gate.unexecuted(results) == []


def test_a_skipped_seed_check_is_named_with_its_reason():
    results = [r if r.name != stages.WEIGHTS.name else skipped(r.name, "not run: a data file is missing or unreadable")
               for r in _all_passed()]
    assert gate.unexecuted(results) == ["weights in the data file (skipped: not run: a data file is missing or unreadable)"]


def test_a_seed_check_never_reported_is_named():
    results = [r for r in _all_passed() if r.name != stages.NEGATIVE.name]
    assert gate.unexecuted(results) == ["negative control (weighted, no data file) (not reported)"]


def test_skips_for_one_reason_are_named_together():
    why = "not run: no usable CUDA device"
    results = [skipped(r.name, why) if r.name.startswith("export") else r for r in _all_passed()]
    assert gate.unexecuted(results) == [f"export (weightless), export (weighted) (skipped: {why})"]
