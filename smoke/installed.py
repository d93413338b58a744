"""What the built environment holds: checks that need the wheel installed, but no GPU.

``smoke.probe`` runs inside the environment and prints what torch and the
executorch runtime say about themselves; the parent judges it here, before the
export child runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from packaging.version import InvalidVersion, Version

from smoke import pairing, proc, shipped
from smoke.errors import GateError
from smoke.results import CheckResult, failed, passed, skipped
from smoke.rows import Row
from smoke.wheel import Wheel


def run_probe(python: Path, env: dict[str, str], cwd: Path, timeout: float = 600) -> dict[str, Any]:
    try:
        ran = proc.run([python, "-m", "smoke.probe"], what="probing the environment", env=env, cwd=cwd, timeout=timeout, check=False)
    except GateError as exc:  # could not start, or ran past its limit: the checks fail, saying so
        return {"probe_error": str(exc)}
    try:
        return json.loads(ran.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"probe_error": f"exited {ran.returncode}: {proc.tail(ran.stdout + ran.stderr)}"}


TORCH_AGREES, DELEGATE_REGISTERS, CUDA_LIBRARIES_RESOLVE = "torch agrees", "delegate registers", "CUDA libraries resolve"


def check_torch_agrees(wheel: Wheel, row: Row, facts: dict[str, Any], libraries: shipped.Libraries | None = None) -> CheckResult:
    """torch in the environment is the release paired with the wheel, and on a CUDA row has its CUDA major."""
    name = TORCH_AGREES
    if "torch" not in facts:
        return failed(name, f"torch does not import in the environment: {facts.get('torch_error') or facts.get('probe_error')}")
    try:
        version = Version(facts["torch"])
    except InvalidVersion:
        return failed(name, f"torch reports version {facts['torch']!r}, which is not a version")
    problems, said = [], [f"torch {version}"]
    paired = pairing.paired_torch(wheel.release)
    if paired is not None:
        if f"{version.major}.{version.minor}" != paired:
            problems.append(f"executorch {wheel.release} pairs with torch {paired}, the environment has {version}")
    if row.needs_cuda:
        train = shipped.cuda_train(wheel)
        torch_cuda = facts.get("torch_cuda")
        if torch_cuda is None:
            problems.append(f"torch {version} is a CPU build (torch.version.cuda is None)")
        elif train is None:
            problems.append(f"torch has CUDA {torch_cuda}, the wheel has no +cuXXX label to agree with (see CUDA build)")
        elif int(str(torch_cuda).split(".")[0]) != shipped.cuda_major(train):
            problems.append(f"torch has CUDA {torch_cuda}, the wheel is +{train} (CUDA {shipped.cuda_major(train)})")
        else:
            said.append(f"CUDA {torch_cuda} as +{train}")
    measured = {"torch": str(version), "torch_cuda": facts.get("torch_cuda"), "paired": paired}
    if problems:
        return failed(name, "; ".join(problems), **measured)
    if paired is None:
        return skipped(name, f"{said[0]}; no pairing is known for executorch {wheel.release}, so the version was not compared", **measured)
    return passed(name, f"{', '.join(said)}, paired with executorch {wheel.release}", **measured)


def check_delegate_registers(wheel: Wheel, row: Row, facts: dict[str, Any], libraries: shipped.Libraries | None = None) -> CheckResult:
    """After import, the row's delegate is among the runtime's registered backends."""
    name = DELEGATE_REGISTERS
    if "backends" not in facts:
        return failed(name, f"the executorch runtime does not import: {facts.get('backends_error') or facts.get('probe_error')}")
    backends = facts["backends"]
    if row.delegate_id not in backends:
        return failed(name, f"{row.delegate_id} is not registered (registered: {', '.join(backends) or 'none'})", backends=backends)
    return passed(name, f"{row.delegate_id} among {len(backends)} registered: {', '.join(backends)}", backends=backends)


def check_cuda_libraries_resolve(wheel: Wheel, row: Row, facts: dict[str, Any], libraries: shipped.Libraries) -> CheckResult:
    """Each installed library that links CUDA finds every CUDA library it needs through its own
    $ORIGIN entries, resolved against site-packages as installed."""
    name = CUDA_LIBRARIES_RESOLVE
    sites = [Path(facts[k]) for k in ("purelib", "platlib") if k in facts]
    if not sites:
        return failed(name, f"the environment's site-packages is unknown: {facts.get('probe_error')}")
    linking = [lib for lib in libraries.items if lib.cuda_needed]
    if not linking:
        return failed(name, "no shipped library links a CUDA library, so there is nothing to resolve")
    problems, found = [], {}
    for lib in linking:
        targets = lib.origin_targets()
        for soname in lib.cuda_needed:
            hit = next((site / t for site in sites for t in targets if (site / t / soname).exists()), None)
            if hit is None:
                tried = ", ".join(str(site / t) for site in sites[:1] for t in targets) or "no $ORIGIN entries"
                problems.append(f"{lib.path} needs {soname}, not in any folder its {lib.tag or 'RUNPATH'} leads to ({tried})")
            else:
                found[f"{lib.path}: {soname}"] = str(hit)
    if problems:
        return failed(name, "; ".join(problems[:3]), problems=problems, found=found)
    return passed(name, f"{len(found)} CUDA libraries found through $ORIGIN entries in site-packages", found=found)


def checks_for(row: Row) -> list[tuple[str, Callable[..., CheckResult]]]:
    """The row's environment checks, by name; each takes (wheel, row, facts, libraries)."""
    checks = [(TORCH_AGREES, check_torch_agrees), (DELEGATE_REGISTERS, check_delegate_registers)]
    if row.needs_cuda:
        checks.append((CUDA_LIBRARIES_RESOLVE, check_cuda_libraries_resolve))
    return checks
