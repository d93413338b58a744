"""smoke.stages: the checks a row that must execute may not skip."""

from __future__ import annotations

from smoke import stages


def test_a_row_that_must_execute_may_not_skip_it():
    assert stages.PORTABLE.name in stages.MUST_EXECUTE
