"""Each delegate's part of the child: the export through it, and the device it needs.

Keyed by the row's ``backend`` (``smoke.child.row.ChildRow``); the parent's side of each delegate
(its checks of the wheel, the keys its programs fetch) is ``smoke.backends``. Imports nothing beyond
the standard library at its top: torch and executorch are imported where used, in the wheel's environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smoke.child.row import ChildRow
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import CUDA_DEVICE


def _write(program, folder: Path) -> None:
    (folder / "model.pte").write_bytes(program.buffer)
    program.write_tensor_data_to_file(str(folder))


def export_cuda(model, example, folder: Path) -> None:
    import torch
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    from executorch.exir import to_edge_transform_and_lower

    # The method-name compile spec works on every release; 1.2 and 1.3 reject an
    # empty list ("Could not find method name in compile specs").
    partitioner = CudaPartitioner([CudaBackend.generate_method_name_compile_spec("forward")])
    _write(to_edge_transform_and_lower(torch.export.export(model, example), partitioner=[partitioner]).to_executorch(), folder)


def export_xnnpack(model, example, folder: Path, tag: str = "model") -> None:
    import torch

    lower_xnnpack(torch.export.export(model, example).module(), example, folder, tag)


def lower_xnnpack(module, example, folder: Path, tag: str = "model") -> None:
    """An unlifted module (an exported program's ``.module()``, or PT2E's converted one) lowered to XNNPACK and written
    into ``folder``: every constant tagged for the external data file named after the tag ("model" -> model.ptd),
    then exported again so the tags reach the delegate."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.passes.external_constants_pass import delegate_external_constants_pass_unlifted

    delegate_external_constants_pass_unlifted(module=module, gen_tag_fn=lambda node: tag)
    _write(to_edge_transform_and_lower(torch.export.export(module, example), partitioner=[XnnpackPartitioner()]).to_executorch(),
           folder)


def export(row: ChildRow, model, example, folder: Path) -> None:
    """Export ``model`` through the row's delegate; write ``model.pte`` and its data file into ``folder``."""
    if row.backend == "cuda":
        return export_cuda(model, example, folder)
    if row.backend == "xnnpack":  # its data file is named after the constants' tag: model.ptd <- "model"
        return export_xnnpack(model, example, folder, tag=Path(row.data_file).stem)
    raise ValueError(f"no export for the backend {row.backend!r}")


def device_facts(row: ChildRow) -> dict[str, Any]:
    """Torch imported: the device the row runs on, for the report."""
    if row.backend != "cuda":
        return {"cuda_available": False}
    import torch

    facts: dict[str, Any] = {"cuda_available": torch.cuda.is_available(), "torch_cuda": torch.version.cuda}
    if facts["cuda_available"]:
        major, minor = torch.cuda.get_device_capability(0)
        facts.update(device_name=torch.cuda.get_device_name(0), sm=f"sm_{major}{minor}", arch_list=torch.cuda.get_arch_list())
    return facts


def check_device(row: ChildRow, facts: dict[str, Any]) -> CheckResult | None:
    """Is there a device the exports and loads can use (None: the row needs none)."""
    if row.backend != "cuda":
        return None
    name = CUDA_DEVICE.name
    if facts["cuda_available"]:
        if facts["sm"] not in facts["arch_list"]:
            return failed(name, f"{facts['device_name']} is {facts['sm']}, torch's arch list {facts['arch_list']} lacks it", **facts)
        return passed(name, f"{facts['device_name']} ({facts['sm']}), in torch's arch list", **facts)
    why = f"no CUDA device visible (torch.cuda.is_available() is False; torch CUDA {facts['torch_cuda'] or 'none: a CPU build'})"
    if row.execution_required:
        return failed(name, f"{why}; the {row.name} row must execute", **facts)
    return skipped(name, f"{why}; export and execution need one", **facts)
