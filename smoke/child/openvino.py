"""A model through the OpenVINO delegate, where the environment has its runtime (issue 47).

The wheel ships the delegate's adapter (``libexecutorch_backend_openvino.so``, registered as ``OpenvinoBackend``), not
its runtime: that comes from the wheel's ``openvino`` extra (upstream's pyproject.toml: ``openvino>=2025.1.0,<2026.0.0``
on Linux), and its partitioner imports the quantizer, which needs nncf
(``backends/openvino/requirements.txt``, not an extra). Upstream's ``.ci/scripts/wheel/test_base.py``
(``test_a_model_runs_through_the_openvino_delegate``, main) exports x + y through ``OpenvinoPartitioner`` with the
``device`` compile spec ``CPU`` and runs it where that stack imports, and says SKIP where it does not. So here: the
weightless model (x + y, seeded) exported through it, written, loaded and run, its outputs handed to the parent, which
reads the program (it carries the OpenvinoBackend delegate) and holds them to the weightless model's eager answer
computed apart. Where the stack is not installed (a default install: the extra is not asked for), a SKIP naming what
is missing and how to install it; an import error inside executorch's own package is the wheel's, and FAILs.
Imports nothing beyond the standard library at its top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smoke import tensors
from smoke.child.models import models, run_program
from smoke.child.probe import one_line
from smoke.stages import OPENVINO_MODEL

DELEGATE = "OpenvinoBackend"
LABEL = "openvino"  # its folder under the work folder
PARTITIONER_MODULE = "executorch.backends.openvino.partitioner"


def work(folder: Path, backends: list[str]) -> dict[str, Any]:
    """Export, write, load and run: what the child hands the parent (its outputs, or why there are none)."""
    name = OPENVINO_MODEL.name
    if DELEGATE not in backends:
        return {"name": name, "skipped": f"not run: the runtime registers no {DELEGATE} (registered: "
                                         f"{', '.join(backends) or 'none'})"}
    try:
        from executorch.backends.openvino.partitioner import OpenvinoPartitioner
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing.split(".")[0] == "executorch":
            return {"name": name, "error": f"import {PARTITIONER_MODULE} raised {one_line(exc)}"}
        return {"name": name, "skipped": (
            f"not run: the OpenVINO export stack is not installed ({one_line(exc)}): the wheel ships the delegate's "
            f"adapter, not its runtime, which comes from its openvino extra, and the partitioner needs nncf "
            f"(upstream's backends/openvino/requirements.txt); install both into the environment to run a model "
            f"through it (its registration is judged by shipped backends register)")}
    except Exception as exc:  # noqa: BLE001 - the wheel's partitioner module itself is broken
        return {"name": name, "error": f"import {PARTITIONER_MODULE} raised {one_line(exc)}"}
    model, example = models()["weightless"]
    try:
        import torch
        from executorch.exir import to_edge_transform_and_lower
        from executorch.exir.backend.compile_spec_schema import CompileSpec

        lowered = to_edge_transform_and_lower(torch.export.export(model, example),
                                              partitioner=[OpenvinoPartitioner([CompileSpec("device", b"CPU")])])
        folder.mkdir(parents=True, exist_ok=True)
        pte = folder / "model.pte"
        pte.write_bytes(lowered.to_executorch().buffer)
    except Exception as exc:  # noqa: BLE001
        return {"name": name, "error": f"the export through OpenvinoPartitioner raised {one_line(exc)}"}
    try:
        outputs = run_program(pte, None, example)
    except Exception as exc:  # noqa: BLE001
        return {"name": name, "error": f"loading or running raised {one_line(exc)}"}
    return {"name": name, "outputs": tensors.encode_all(outputs)}
