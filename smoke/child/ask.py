"""The child's questions to the parent: what only the parent's readers can tell.

The child imports none of the parent's readers or checks (pyproject.toml's ``forbidden`` contract), so it writes
an ``Ask`` (``smoke.protocol``) to its record, and the parent, which follows the record, answers with one line on
the child's stdin:

- ``exported``: the two models' exports are written; the parent judges ``delegate``, ``data file`` and ``weights
  in the data file``, and answers each label's ``data file`` status, on which the runs depend;
- ``program``: the program's plans, their delegates and the operators left to the kernels, or ``error``.
"""

from __future__ import annotations

import sys
from typing import Any

from smoke import protocol
from smoke.record import Recorder


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
