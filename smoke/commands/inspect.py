"""``nox -s inspect -- WHEEL [--row ROW]``: the checks that need no environment and no GPU.

The same functions a row runs before it builds its environment (``smoke.checks.shipped``), on the wheel file alone:
any interpreter runs them, whatever the wheel's Python tag, and nothing is installed. With no ``--row``, the rows of
the wheel's architecture and kind of build are judged, each with its own verdict line and report; the others are
named with why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

from smoke import report
from smoke.checks import shipped
from smoke.console import say
from smoke.engine import row as gate
from smoke.options import Options
from smoke.readers import wheel as wheels
from smoke.report import Run
from smoke.rows import ROWS, Row, check_machine, no_row, rows_fitting


def rows_for(wheel: wheels.Wheel, names: list[str]) -> list[Row]:
    if names:
        rows = [ROWS[name] for name in names]
        for row in rows:
            check_machine(wheel, row)
        return rows
    rows = rows_fitting(wheel)  # its platform's rows: Linux (by machine), macOS or Windows
    if not rows:
        raise no_row(wheel)
    # The rows of its kind of build (a CPU build: the CPU rows); the others are named, with why, not judged.
    its = [row for row in rows if row.backend.not_its_build(wheel) is None]
    return its or rows


def not_judged(wheel: wheels.Wheel, rows: list[Row]) -> list[str]:
    """The rows of the wheel's architecture left out, each with why (``rows_for`` with no ``--row``)."""
    return [f"not judged: {row.name}, the wheel is {row.backend.not_its_build(wheel)} (--row {row.name} judges it there anyway)"
            for row in rows_fitting(wheel) if row not in rows and row.backend.not_its_build(wheel)]


def inspect(wheel_path: Path, options: Options, names: list[str]) -> int:
    if options.report_dir is not None:
        report.check_writable(options.report_dir)
    report.check_step_summary()
    start = time.monotonic()
    wheel = wheels.read_wheel(wheel_path)
    policy = gate.policy_for(wheel, options)
    wheel = dataclasses.replace(wheel, user_supplied=policy.user_supplied)
    rows = rows_for(wheel, names)
    say(f"wheel: {wheel.filename}, {wheel.size} B, sha256 {wheel.sha256}; executorch {wheel.version}; "
             f"read in {time.monotonic() - start:.2f} s; rows: {', '.join(r.name for r in rows)}")
    say(policy.line())
    for line in [] if names else not_judged(wheel, rows):
        say(line)
    codes = []
    libraries = shipped.read_libraries(wheel)  # once: every row judges the same files
    runs = [Run(row.name, mode="inspect", wheel=wheel.filename, wheel_size=wheel.size, wheel_sha256=wheel.sha256)
            for row in rows]
    with contextlib.ExitStack() as held:
        if options.report_dir is not None:
            for run in runs:  # each row's two reports, held until written
                held.enter_context(gate.hold_reports(options.report_dir, run.stem))
        for row, run in zip(rows, runs):
            row_start = time.monotonic()
            gate.judged_by(run, policy, wheel, options)
            gate.file_checks(run, row, wheel, options, libraries)
            codes.append(gate.finish(run, options, None, row_start))
    return max(codes)
