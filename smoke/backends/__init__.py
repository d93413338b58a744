"""The delegates a row can gate, one module each, behind one small Protocol.

A backend declares what its rows need: the delegate id, the data file, the keys its delegates fetch, its own checks
(``smoke.stages.Check``) and the rules it adds to common checks. Export and device work run in the child
(``smoke.child.delegates``, keyed by ``name``); nothing else branches on which backend a row (``smoke.rows``) names.

Adding a delegate: a module here with an object satisfying ``Backend``, its kind in ``KINDS``, a row in
``smoke.rows`` naming it, and that row in the workflow's matrix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from smoke.backends.cuda import Cuda
from smoke.backends.cuda_checks import ARCHS as CUDA_ARCHS
from smoke.backends.xnnpack import Xnnpack

if TYPE_CHECKING:
    from smoke.backends.row import BackendEnvironmentCheck, BackendFileCheck, RowOf
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.stages import Check, MissingData


class Backend(Protocol):
    # Read-only (a backend is a frozen dataclass): properties here, so that its fields satisfy them.
    @property
    def name(self) -> str:
        """The rows' and the workflow's key: "cuda", "xnnpack"."""

    @property
    def delegate_id(self) -> str:
        """BackendDelegate.id its programs carry."""

    @property
    def data_file(self) -> str:
        """Its external data file's name, as the runners pass it."""

    @property
    def weightless_writes_data(self) -> bool:
        """Does it write a data file for a model with no weights?"""

    @property
    def checks(self) -> tuple[Check[Any], ...]:
        """Its own checks, at their places in each stage."""

    @property
    def file_checks(self) -> tuple[BackendFileCheck, ...]:
        """Its own wheel-file checks (of ``checks``), each of the stage's signature (``smoke.checks.kinds``)."""

    @property
    def environment_checks(self) -> tuple[BackendEnvironmentCheck, ...]:
        """Its own environment checks (of ``checks``), each of the stage's signature."""

    @staticmethod
    def expected_keys(plan: str, compile_specs: dict[str, bytes], processed: bytes | memoryview) -> tuple[str, ...]:
        """The named data one of its delegates fetches at load, from the program alone (of the kind: no object needed)."""

    def not_its_build(self, wheel: Wheel) -> str | None:
        """None when ``wheel`` is the kind of build its rows gate; else why not (``inspect`` with no ``--row``)."""

    def runpath_problems(self, wheel: Wheel, row: RowOf, libraries: Libraries) -> tuple[list[str], str]:
        """Its rule of ``library RUNPATH``: the problems, and what a PASS adds to its sentence."""

    def torch_problems(self, wheel: Wheel, facts: dict[str, Any]) -> tuple[list[str], list[str]]:
        """Its part of ``torch agrees``: the problems, and what a PASS says."""

    @staticmethod
    def missing_data(version: Any) -> MissingData:
        """What its runtime does, in this release (packaging's Version), with a weighted program whose data file is
        missing or damaged: the controls' rule (``smoke.checks.controls``)."""


# Every kind of backend a row may name: a new backend's object is added here, and named by its rows.
KINDS: tuple[type[Backend], ...] = (Cuda, Xnnpack)


def for_delegate(delegate_id: str) -> type[Backend] | None:
    """The backend whose programs carry this delegate id, for readers that know only the program (``smoke.artifacts``)."""
    return next((kind for kind in KINDS if kind.delegate_id == delegate_id), None)


__all__ = ["Backend", "CUDA_ARCHS", "Cuda", "Xnnpack", "KINDS", "for_delegate"]
