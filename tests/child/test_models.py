"""smoke.child.models: what a run hands the parent (its outputs as data, or why there are none)."""

from __future__ import annotations

import pytest

from smoke.stages import RUN


@pytest.mark.slow
def test_a_run_hands_over_every_output_value_and_the_parent_keeps_them_for_compare(exported, tmp_path):
    """The child's run of the real XNNPACK export (in the runtime's process, as the child has it: issue 58) gives all 8
    values of the weighted model's output; the parent's judgement keeps them (what compare sets side by side) and PASSes
    them against eager's."""
    from smoke import proc
    from smoke.child import negative, runtime
    from smoke.child.models import check_run, registered_backends
    from smoke.results import Status
    from tests.helpers import CPU_ROW, child_row, eager_judged

    folder = exported["weighted"]
    loader = runtime.start(tmp_path)
    try:
        case = negative.Case(loader, "weighted", tmp_path)
        assert negative.send(case, folder / "model.pte", folder / "model.ptd")
        said = negative.collect(case, tmp_path, "weighted")
    finally:
        proc.end(loader)
    ran = check_run(child_row(CPU_ROW.name), "weighted", said, registered_backends())
    assert ran["name"] == RUN.of("weighted") and ran["outputs"][0]["shape"] == [2, 4] and len(ran["outputs"][0]["values"]) == 8
    result = eager_judged(RUN.of("weighted"), ran, folder.parent)
    assert result.status is Status.PASS, result.reason
    assert result.measured["outputs"] == [ran["outputs"][0]["values"]]
