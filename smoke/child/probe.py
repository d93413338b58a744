"""Run inside the gate's environment: ``python -m smoke.child.probe`` prints one JSON line.

torch's version and CUDA, the executorch runtime's registered backends, and where
site-packages is. Standard library only, so it runs in any environment.
"""

from __future__ import annotations

import json
from typing import Any


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and the last line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}".rstrip(": ")


def probe() -> dict[str, Any]:
    """Run in the environment: what torch and the executorch runtime say about themselves."""
    import os
    import sys
    import sysconfig

    facts: dict[str, Any] = {"purelib": sysconfig.get_paths()["purelib"], "platlib": sysconfig.get_paths()["platlib"],
                             # where imports come from (a .pth file adds another environment's site-packages)
                             "paths": [p for p in sys.path if p and os.path.isdir(p)]}
    try:
        import torch

        facts.update(torch=torch.__version__, torch_cuda=torch.version.cuda)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        facts["torch_error"] = one_line(exc)
    try:
        from executorch.extension.pybindings import portable_lib

        facts["backends"] = list(portable_lib._get_registered_backend_names())
    except Exception as exc:  # noqa: BLE001
        facts["backends_error"] = one_line(exc)
    return facts


if __name__ == "__main__":
    print(json.dumps(probe()), flush=True)
