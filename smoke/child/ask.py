"""The child's questions to the parent: what only the parent's readers can tell.

The child imports none of the parent's readers or checks (pyproject.toml's ``forbidden`` contract), so it writes
an ``Ask`` (``smoke.protocol``) to its record, and the parent, which follows the record, answers with one line on
the child's stdin:

- ``exported``: the two models' exports are written; the parent judges ``delegate``, ``data file`` and ``weights
  in the data file``, and answers each label's ``data file`` status, on which the runs depend;
- ``ran``: a program was loaded and run (``run with data file``, ``portable kernels``); the parent judges the check
  from the outputs the child gives, against eager's answer computed apart from the wheel's code, and answers its
  status. A check the parent judges is never the child's to record (``smoke.engine.row.PARENT_JUDGED``).
"""

from __future__ import annotations

import sys
from typing import Any

from smoke import protocol
from smoke.record import FailFast, Recorder
from smoke.results import Status


class NoAnswer(Exception):
    """The parent did not answer (its stdin ended: no parent follows this child, or it has gone)."""


def ask(rec: Recorder, question: str, **data: Any) -> dict[str, Any]:
    rec.write(protocol.Ask(question, data))
    line = sys.stdin.readline()
    if not line:
        raise NoAnswer(f"no answer from the parent to {question!r} (its stdin ended)")
    try:
        return protocol.decode_answer(line)
    except protocol.ProtocolError as exc:
        raise NoAnswer(f"the parent's answer to {question!r}: {exc}") from None


def hand_over(rec: Recorder, ran: dict[str, Any]) -> str:
    """A check the parent judges from what this process ran (``ran``: its ``name``, and ``outputs``, ``error`` or
    ``skipped``): its status, as the parent answers it; with --fail-fast a FAIL stops the child, as its own do."""
    answer = ask(rec, "ran", **ran)
    status = str(answer.get("status", ""))
    if rec.fail_fast and status == Status.FAIL.value:
        raise FailFast(str(ran.get("name")))
    return status
