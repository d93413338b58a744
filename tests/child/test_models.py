"""smoke.child.models: what a run check records of its outputs (what compare sets side by side)."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_a_run_check_records_its_outputs_for_compare():
    """What compare sets side by side: smoke.child.models.compare keeps each output's values (flattened, the first 256)."""
    torch = pytest.importorskip("torch")
    from smoke.child.models import OUTPUT_VALUES
    from smoke.child.models import compare as judge

    out = torch.arange(8, dtype=torch.float32).reshape(2, 4) / 3
    result = judge("weighted", [out], out.clone())
    assert result.measured["outputs"] == [out.flatten().tolist()] and result.measured["max_abs_diff"] == 0.0
    big = torch.ones(1000)
    assert len(judge("weighted", [big], big).measured["outputs"][0]) == OUTPUT_VALUES == 256
