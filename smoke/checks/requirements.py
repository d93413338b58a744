"""``torch requirement``: the wheel's Requires-Dist can be installed beside the torch its release pairs with.

FAILs where ``Requires-Dist: torch`` (markers evaluated for the row) admits no release of the torch line the wheel's
release pairs with (``smoke.readers.releases``), or where a requirement pins a local version (``torch==2.5.0+cu124``),
which no public index serves (PEP 440; pytorch/TensorRT#4545), or where a requirement is a direct reference (``torch @
https://...whl``, PEP 508), whose specifier is empty and which PyPI refuses to upload (pypi/warehouse,
``warehouse/forklift/metadata.py``: "Can't have direct dependency"), whatever its markers. A line the gate does not know (a nightly) is paired by
rule (``smoke.readers.pairing``). When this FAILs the environment is not built (``smoke.engine.row.files_checked``):
what would be installed is not what the wheel declares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from smoke.checks.kinds import FileCheck
from smoke.readers import pairing
from smoke.readers.systems import SYSTEMS
from smoke.readers.wheel import Wheel, marker_environment
from smoke.results import CheckResult, failed, passed
from smoke.stages import FILE, Check

if TYPE_CHECKING:
    from smoke.readers.elf import Libraries
    from smoke.rows import Row


def _applies(req, env: dict[str, str]) -> bool:
    return req.marker is None or req.marker.evaluate(env)


def local_pins(requirements) -> list[str]:
    """Each requirement whose specifier names a local version (``+label``), as written."""
    return [str(req) for req in requirements if any("+" in spec.version for spec in req.specifier)]


def direct_references(requirements) -> list[str]:
    """Each requirement that names a URL instead of versions (``name @ URL``), as written."""
    return [str(req) for req in requirements if req.url]


def check_torch_requirement(wheel: Wheel, row: Row, libraries: Libraries) -> CheckResult:
    name = TORCH_REQUIREMENT.name
    env = marker_environment(row.machine, wheel, row.system)
    applying = [req for req in wheel.requires_dist if _applies(req, env)]
    problems = []
    if direct := direct_references(wheel.requires_dist):
        problems.append(f"Requires-Dist {', '.join(direct)} is a direct reference (name @ URL, PEP 508), which PyPI refuses "
                        f"to upload (\"Can't have direct dependency\", pypi/warehouse) and which no version pin or pairing "
                        f"can be judged by: declare each by name and versions (torch>=2.14,<2.15, say)")
    if pinned := local_pins(applying):
        problems.append(f"Requires-Dist {', '.join(pinned)} pins a local version, which no public index serves (PEP 440; "
                        f"PyPI refuses them), so pip install from the package index cannot satisfy it (pytorch/TensorRT#4545)")
    torch = [req for req in applying if canonicalize_name(req.name) == "torch"]
    line = pairing.release_lines().get(wheel.release)
    pre = wheel.version.is_prerelease or wheel.version.is_devrelease
    if line is not None and torch and not all(pairing.admits_line(req, line["torch"], pre) for req in torch):
        problems.append(f"Requires-Dist {', '.join(map(str, torch))} admits no torch {line['torch']}, the line executorch "
                        f"{wheel.release} pairs with ({line['source']}): pip cannot install the wheel beside it, and "
                        f"installed as declared it gets a torch the runtime was not built against")
    measured = {"torch": [str(req) for req in torch], "local": pinned, "direct": direct,
                "paired": line["torch"] if line else None}
    if problems:
        return failed(name, "; ".join(problems), **measured)
    if not torch:
        return passed(name, f"declares no torch for {SYSTEMS[row.system].machine_words(row.machine)}, "
                            f"and no requirement pins a local version", **measured)
    paired = (f"admits torch {line['torch']}, the line executorch {wheel.release} pairs with" if line is not None else
              f"is declared; executorch {wheel.release} is of no release line the gate knows (its pairing, if any, is said in the run's header)")
    return passed(name, f"Requires-Dist {', '.join(map(str, torch))} {paired}; no requirement pins a local version", **measured)


TORCH_REQUIREMENT = Check("torch requirement", FILE, 7, check_torch_requirement)
CHECKS: tuple[FileCheck, ...] = (TORCH_REQUIREMENT,)
