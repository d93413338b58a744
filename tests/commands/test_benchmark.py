"""smoke.commands.benchmark: the floor a run is judged against (issue 35), from runs as data."""

from __future__ import annotations

from smoke.commands import benchmark


def _run(total: float, exports: tuple[float, float], loads: tuple[float, float], child_import: float) -> dict:
    phases = {"import torch and executorch": child_import, "export (weightless)": exports[0], "export (weighted)": exports[1],
              "load and run (weightless)": loads[0], "load and run (weighted)": loads[1]}
    return {"total": total, "phases": phases, "unavoidable": sum(exports) + sum(loads)}


def test_the_floor_is_the_import_measured_alone_plus_the_runs_exports_and_loads():
    # The child's import, slowed by the gate's work beside it (7.3 s), is not the floor's: the import alone (2.9 s) is.
    runs = {"overlap (default)": [_run(13.5, (2.0, 1.0), (0.3, 0.2), 7.3), _run(12.0, (2.0, 1.0), (0.3, 0.2), 6.0)]}
    lines = benchmark.table(runs, alone=[2.9, 3.1, 2.8])
    assert "| import of torch and executorch alone (3 times, nothing of the gate's beside it) | 2.80 / 2.90 / 3.10 |" in lines
    assert "| floor: that import (median) + exports + loads | 6.40 / 6.40 / 6.40 |" in lines
    assert "| **whole run over the floor** | 1.88x / 1.99x / 2.11x |" in lines


def test_without_an_import_measured_alone_no_floor_is_claimed():
    lines = benchmark.table({"overlap (default)": [_run(13.5, (2.0, 1.0), (0.3, 0.2), 7.3)]})
    assert not any("floor" in line for line in lines)


def test_a_log_dir_that_exists_is_refused_before_anything_runs(tmp_path):
    import pytest

    from smoke.errors import GateError

    theirs = tmp_path / "logs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("a maintainer's")
    with pytest.raises(GateError, match=r"--log-dir .*logs exists: name a folder that does not, the benchmark makes it"):
        benchmark.main([str(tmp_path / "missing.whl"), "--log-dir", str(theirs)])
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]
