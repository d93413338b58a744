"""Errors that mean the gate could not run, each with the fix in its message and its exit code.

They are caught once, at the edge (``smoke.cli``), printed as one ERROR line, and the command exits with the
error's ``return_code``.
"""

from __future__ import annotations

# Exit codes: a wheel that fails the gate, and a gate that could not run.
EXIT_FAILED = 1
EXIT_CANNOT_RUN = 2


class GateError(Exception):
    """The gate cannot run as asked; the message says why and what to do."""

    return_code = EXIT_CANNOT_RUN  # every error of the gate's: it could not judge (a verdict is 0 or EXIT_FAILED)


class InvalidWheel(GateError):
    """The given path is not a readable wheel of executorch."""


class WrongPlatform(GateError):
    """The wheel is built for another architecture or Python than the session's."""


class NoTorchPairing(GateError):
    """No constraints file is known for this executorch release."""


class EnvironmentBuildError(GateError):
    """Building or filling the isolated environment failed."""


class MachineError(GateError):
    """The machine, not the wheel: a folder the run writes to is full, read-only or gone (the message names it)."""


class MissingTool(GateError):
    """A tool the gate itself needs is not installed in the interpreter running it."""


class Interrupted(Exception):
    """SIGTERM (or SIGINT) reached the gate: it ends what it started and exits 128 + the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
