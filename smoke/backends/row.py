"""What a backend reads of the row it serves: its name, its machine and its backend object. ``smoke.rows.Row`` is one;
the backends name this protocol, not the rows, which import them."""

from __future__ import annotations

from typing import Any, Protocol


class RowOf(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def machine(self) -> str: ...

    @property
    def backend(self) -> Any: ...
