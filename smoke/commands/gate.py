"""``python -m smoke ROW WHEEL``: one row, start to verdict (the engine, ``smoke.engine.row``); its exit code."""

from __future__ import annotations

from smoke.engine import row as engine
from smoke.options import Options
from smoke.rows import Row


def gate(row: Row, options: Options) -> int:
    """The row's run: 0 passed, 1 the wheel failed; the gate's own errors are raised to the edge (``smoke.cli``)."""
    return engine.gate(row, options)
