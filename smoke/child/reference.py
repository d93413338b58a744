"""Eager PyTorch's answers to the child's models, computed where the wheel's code does not run (issue 48).

The parent starts this beside the child, with the environment's interpreter, isolated and without ``site``
(``smoke.environment.reference``): no ``.pth`` file, no ``sitecustomize``, no ``PYTHON*`` variable, no current
folder. It puts the environment's site-packages on ``sys.path`` itself, with the folders that the ``.pth`` files'
path lines name (torch from another environment, ``--torch-from``), and runs none of their ``import`` lines. It imports
torch, with torch's own entry points (``TORCH_DEVICE_BACKEND_AUTOLOAD``) turned off by the parent, and nothing of
executorch; it builds the child's models as the child does (``smoke.child.models``, ``smoke.child.portable``), on the
CPU, and prints one JSON object: each model's outputs (``smoke.tensors``), and every file this process imported or
mapped, which the parent holds against the wheel's own files. The child's outputs are judged against these, in the
parent; the child's own comparison is not asked for.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path

from smoke import tensors


def site_folders(prefix: str) -> list[str]:
    """The site-packages of the environment at ``prefix`` (without ``site``, ``sys.prefix`` is not the environment's:
    ``site.venv`` sets it), and the existing folders its ``.pth`` files' path lines name (``site``'s ``addpackage``
    rules: a line starting with ``#`` is a comment, one starting with ``import`` is code, not run here, any other is a
    folder, relative to the site-packages folder), in ``site``'s order. The ``venv`` scheme (CPython 3.11+) where the
    interpreter has it: a distribution's python3 may default to another (Debian's ``posix_local``, ``dist-packages``),
    which is not a virtual environment's layout."""
    found: list[str] = []
    schemes = [scheme for scheme in ("venv", "posix_prefix", "nt") if scheme in sysconfig.get_scheme_names()]
    folders = [sysconfig.get_paths(scheme, vars={"base": prefix, "platbase": prefix})[key]
               for scheme in schemes for key in ("purelib", "platlib")]
    folders += [str(path) for path in sorted(Path(prefix).glob(f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"))]
    for folder in folders:
        if folder in found or not os.path.isdir(folder):
            continue
        found.append(folder)
        for pth in sorted(Path(folder).glob("*.pth")):
            try:
                lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()[:1000]
            except OSError:
                continue
            for line in lines:
                if not line.strip() or line.startswith("#") or line.startswith(("import ", "import\t")):
                    continue
                named = os.path.abspath(os.path.join(folder, line.rstrip()))
                if os.path.isdir(named) and named not in found:
                    found.append(named)
    return found


def mapped_files() -> list[str]:
    """Every file this process imported (its modules' ``__file__``) or mapped (``/proc/self/maps``: the shared
    libraries)."""
    named = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
    files = {os.path.realpath(path) for path in named if isinstance(path, str)}
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/"):
                    files.add(os.path.realpath(fields[5].strip()))
    except OSError:
        pass
    return sorted(files)


def answers(inputs: dict | None = None, unbuilt: dict | None = None, steps: dict | None = None) -> dict[str, list[dict]]:
    """Each model's outputs (and, into ``inputs`` where given, each model's inputs), as ``smoke.tensors`` writes them;
    into ``unbuilt``, the optional models this torch cannot build, each with why; into ``steps``, the step of a
    quantized output's int8 grid, which its program is held to (``smoke.child.xnnpack_quantized``)."""
    import torch

    from smoke.child import xnnpack_quantized
    from smoke.child.models import models
    from smoke.child.portable import portable_model, quantized_model

    torch.set_num_threads(1)  # beside the child's exports: one core's work, a few milliseconds of it
    found = {}
    with torch.no_grad():
        for label, (model, example) in models().items():
            found[label] = tensors.encode_all(model(*example))
            if inputs is not None:
                inputs[label] = tensors.encode_all(list(example))
        model, example = portable_model()
        found["portable"] = tensors.encode_all(model(*example))
        try:
            model, example = quantized_model()
        except Exception as exc:  # noqa: BLE001 - a torch without the quantized ops: that program alone is not judged
            if unbuilt is not None:
                unbuilt["quantized"] = f"the quantized model cannot be built with this torch: {type(exc).__name__}: {exc}"
        else:
            found["quantized"] = tensors.encode_all(model(*example))
            if inputs is not None:
                inputs["quantized"] = tensors.encode_all(list(example))
    label = xnnpack_quantized.LABEL
    try:  # torchao's copy of the XNNPACK quantizer, not the wheel's (it exports and calibrates: no torch.no_grad here)
        outputs, example, step = xnnpack_quantized.answer()
    except Exception as exc:  # noqa: BLE001 - that program alone is not judged, and says why
        if unbuilt is not None:
            unbuilt[label] = (f"the quantized model's eager answer cannot be computed apart from the wheel here (torchao's "
                              f"{xnnpack_quantized.REFERENCE_QUANTIZER_MODULE}): {type(exc).__name__}: {exc}")
    else:
        found[label] = tensors.encode_all(outputs)
        if inputs is not None:
            inputs[label] = tensors.encode_all(example)
        if steps is not None:
            steps[label] = step
    return found


def main(prefix: str) -> int:
    sites = site_folders(prefix)
    sys.path.extend(sites)
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        print(f"torch cannot be imported from the environment's site-packages {sites} ({exc})", file=sys.stderr)
        return 1
    inputs: dict[str, list[dict]] = {}
    unbuilt: dict[str, str] = {}
    steps: dict[str, float] = {}
    outputs = answers(inputs, unbuilt, steps)
    import torch

    print(json.dumps({"outputs": outputs, "inputs": inputs, "unbuilt": unbuilt, "steps": steps, "torch": torch.__version__,
                      "prefix": prefix, "sites": sites,
                      "files": mapped_files(), "executorch_imported": "executorch" in sys.modules}))
    return 0
