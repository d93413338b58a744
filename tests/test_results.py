from __future__ import annotations

import pytest

from smoke.results import CheckResult, Status, all_passed, failed, passed, skipped, summary_line


@pytest.mark.parametrize(
    ("results", "line", "verdict"),
    [
        ([], "0 passed, 0 failed, 0 skipped", True),
        ([passed("a", "x"), skipped("b", "y")], "1 passed, 0 failed, 1 skipped", True),
        ([passed("a", "x"), failed("b", "y"), skipped("c", "z")], "1 passed, 1 failed, 1 skipped", False),
    ],
)
def test_summary_and_verdict(results, line, verdict):
    assert summary_line(results) == line
    assert all_passed(results) is verdict


def test_record_round_trip():
    result = failed("weights in the data file", "too small", weighted_bytes=256)
    assert CheckResult.from_json(result.to_json()) == result


@pytest.mark.parametrize("record", [{}, {"name": "a", "status": "maybe", "reason": ""}, {"name": "a", "reason": "r"}, "x"])
def test_malformed_record_is_refused(record):
    with pytest.raises(ValueError):
        CheckResult.from_json(record)


def test_skip_line_carries_its_reason():
    assert skipped("export (weighted)", "not run: no CUDA device").line() == "SKIP export (weighted): not run: no CUDA device"
    assert Status("skip") is Status.SKIP
