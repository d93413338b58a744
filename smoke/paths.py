"""Where the gate lives and where it writes: the checkout, its constraints, and ``.gate``, said once.

Every folder the gate makes by default is under ``.gate`` in the checkout (``smoke.environment.folders``
marks and locks each one); nothing else computes these paths.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the gate's checkout: the child runs with it on PYTHONPATH
CONSTRAINTS = REPO / "constraints"  # the pinned torch of each release line (smoke.readers.pairing)
GATE = REPO / ".gate"  # the only place in the checkout where the gate's folders may be
ENVS = GATE / "envs"  # a row's environment: ENVS / ROW (compare's: ENVS / "compare")
BENCH = GATE / "bench"  # the benchmark's environments: BENCH / ROW
WHEELS = GATE / "wheels"  # the default download's cache
