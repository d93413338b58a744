"""Where the gate lives and where it writes: the checkout, its constraints, and ``.gate``, said once.

Every folder the gate makes by default is under ``.gate`` in the checkout (``smoke.environment.folders``
marks and locks each one); nothing else computes these paths.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the gate's checkout: the child runs with it on PYTHONPATH
CONSTRAINTS = REPO / "constraints"  # the pinned torch of each release line (smoke.readers.pairing)
GATE = REPO / ".gate"  # the only place in the checkout where the gate's folders may be
ENVS = GATE / "envs"  # a row's environment: ENVS / ROW (compare's: ENVS / "compare")
BENCH = GATE / "bench"  # the benchmark's environments: BENCH / ROW
WHEELS = GATE / "wheels"  # the default download's cache


# The folder the user ran the gate from (nox runs its sessions in the noxfile's folder, the checkout; the noxfile
# says where nox was invoked from in this variable): its pyproject.toml may hold the gate's policy (smoke.readers.settings).
INVOKED_FROM = "GATE_INVOKED_FROM"


def invoked_from() -> Path:
    return Path(os.environ.get(INVOKED_FROM) or os.getcwd())
