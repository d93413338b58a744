"""What the built environment holds: checks that need the wheel installed, but no GPU.

``smoke.child.probe`` runs inside the environment and prints what torch and the executorch runtime say about
themselves; the parent judges it here, before the export child runs. The common checks are ``CHECKS``; a backend's
own are in its module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from smoke import proc
from smoke.checks.kinds import EnvironmentCheck
from smoke.errors import GateError, NoTorchPairing
from smoke.readers import pairing
from smoke.readers.wheel import Wheel
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import ENVIRONMENT, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.rows import Row


def run_probe(python: Path, env: dict[str, str], cwd: Path, timeout: float = 600) -> dict[str, Any]:
    try:
        ran = proc.run([python, "-m", "smoke.child.probe"], what="probing the environment", env=env, cwd=cwd, timeout=timeout, check=False)
    except GateError as exc:  # could not start, or ran past its limit: the checks fail, saying so
        return {"probe_error": str(exc)}
    try:
        return json.loads(ran.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"probe_error": f"exited {ran.returncode}: {proc.tail(ran.stdout + ran.stderr)}"}


def check_torch_agrees(wheel: Wheel, row: Row, facts: dict[str, Any], libraries: Libraries | None = None) -> CheckResult:
    """torch in the environment is the release paired with the wheel, and on a CUDA row has its CUDA major."""
    name = TORCH_AGREES.name
    if "torch" not in facts:
        return failed(name, f"torch does not import in the environment: {facts.get('torch_error') or facts.get('probe_error')}")
    try:
        version = Version(facts["torch"])
    except InvalidVersion:
        return failed(name, f"torch reports version {facts['torch']!r}, which is not a version")
    problems, said = [], [f"torch {version}"]
    try:
        made = pairing.pair(wheel)
    except NoTorchPairing:  # the caller chose the torch (--constraints): no pairing to compare with
        made = None
    paired = made.torch if made is not None else None
    unpaired = paired is not None and f"{version.major}.{version.minor}" != paired
    given = facts.get(TORCH_GIVEN)  # the caller's own torch (--torch-from): the gate did not choose it
    if unpaired and not given:
        problems.append(f"executorch {wheel.release} pairs with torch {paired}, the environment has {version}")
    more_problems, more_said = row.backend.torch_problems(wheel, facts)
    problems += more_problems
    said += more_said
    measured = {"torch": str(version), "torch_cuda": facts.get("torch_cuda"), "paired": paired, "torch_given": given}
    if problems:
        return failed(name, "; ".join(problems), **measured)
    if unpaired:
        # Not a FAIL of the wheel: the pairing was not what ran, by the caller's choice; said, and recorded as a skip.
        return skipped(name, f"{', '.join(said)}; executorch {wheel.release} pairs with torch {paired}, and this torch is "
                             f"the one --torch-from gave ({given}), so the pairing was not tested: run without --torch-from "
                             f"(or with a torch {paired}) to judge it", **measured)
    if paired is None:
        return skipped(name, f"{said[0]}; no pairing is known for executorch {wheel.release}, so the version was not compared", **measured)
    if made is not None and made.by_rule:  # a nightly or a local build: which rule chose its torch, said
        return passed(name, f"{', '.join(said)}, paired by rule: {made.how}", **measured, paired_by_rule=True)
    return passed(name, f"{', '.join(said)}, paired with executorch {wheel.release}", **measured)


def check_delegate_registers(wheel: Wheel, row: Row, facts: dict[str, Any], libraries: Libraries | None = None) -> CheckResult:
    """After import, the row's delegate is among the runtime's registered backends."""
    name = DELEGATE_REGISTERS.name
    if "backends" not in facts:
        return failed(name, f"the executorch runtime does not import: {facts.get('backends_error') or facts.get('probe_error')}")
    backends = facts["backends"]
    if row.backend.delegate_id not in backends:
        return failed(name, f"{row.backend.delegate_id} is not registered (registered: {', '.join(backends) or 'none'})", backends=backends)
    return passed(name, f"{row.backend.delegate_id} among {len(backends)} registered: {', '.join(backends)}", backends=backends)


# The key the parent adds to the probe's facts when torch came from the caller's environment (--torch-from).
TORCH_GIVEN = "torch_given"
TORCH_AGREES = Check("torch agrees", ENVIRONMENT, 10, check_torch_agrees)
DELEGATE_REGISTERS = Check("delegate registers", ENVIRONMENT, 20, check_delegate_registers)
CHECKS: tuple[EnvironmentCheck, ...] = (TORCH_AGREES, DELEGATE_REGISTERS)  # every row's; a backend adds its own (smoke.backends)
