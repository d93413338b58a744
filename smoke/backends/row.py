"""What a backend reads of the row it serves: its name, its machine and its backend object. ``smoke.rows.Row`` is one;
the backends name this protocol, not the rows, which import them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from smoke.stages import Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.readers.wheel import Wheel
    from smoke.results import CheckResult


class RowOf(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def machine(self) -> str: ...

    @property
    def backend(self) -> Any: ...


# A backend's checks of each parent-side stage: the stage's signature (``smoke.checks.kinds``) with the row this protocol
# (a row is one), which makes each a check of that stage for any row.
BackendFileCheck = Check[Callable[["Wheel", RowOf, "Libraries"], "CheckResult"]]
BackendEnvironmentCheck = Check[Callable[["Wheel", RowOf, "dict[str, Any]", "Libraries"], "CheckResult"]]
