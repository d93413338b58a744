"""The release gate for executorch wheels: one session per platform row.

    nox -s cuda_x86_64 -- path/to/executorch-....whl [options]

Row sessions run in nox's own interpreter (``venv_backend="none"``) so that the
wheel is read, and a wheel that cannot run is refused, before any environment is
built; ``smoke.environment`` then builds the isolated one. Options: ``--help``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent))

from smoke import cli  # noqa: E402
from smoke.rows import ROWS  # noqa: E402

nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "virtualenv"


def _row_session(row: str):
    def session(session: nox.Session) -> None:
        code = cli.main(list(session.posargs), row=row)
        if code:
            # Never session.skip(): nox counts a skip as a success.
            session.error(f"{row} exited {code}")

    session.__doc__ = ROWS[row].description
    session.__name__ = row
    return session


for _name in ROWS:
    nox.session(name=_name, venv_backend="none")(_row_session(_name))


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """The gate's own tests, the slow integration runs included (pytest -m 'not slow' for the fast ones)."""
    session.install("-r", "requirements-test.txt")
    session.run("pytest", *session.posargs)
