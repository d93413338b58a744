"""The gate's policy for a wheel: what its maintainers ask of it that the wheel file does not say.

Read from ``--policy FILE`` (TOML), else from ``[tool.executorch-wheel-gate]`` in the pyproject.toml of the
folder the gate runs in, else the defaults (``docs/policy.md``). One key so far:

- ``torch = "declared"`` or ``"user-supplied"``: whether the wheel must declare torch in Requires-Dist. Default:
  "declared" for a release version, "user-supplied" for a dev, pre-release or local version (PEP 440), as main
  intends (setup.py: "torch is intentionally absent ... consumers bring their own"). With "user-supplied" the gate
  installs the paired torch itself, and no check FAILs because torch is undeclared: torch counts as the user's.

An unknown key, a wrong value or a file that does not parse is one ``ERROR`` line naming the fix (exit 2).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smoke.errors import GateError
from smoke.readers.wheel import Wheel

if sys.version_info >= (3, 11):
    import tomllib
else:  # requirements-gate.txt installs tomli on Python 3.10
    import tomli as tomllib

TABLE = "executorch-wheel-gate"
TORCH = ("declared", "user-supplied")
KEYS = {"torch": f"one of {', '.join(map(repr, TORCH))}"}


class PolicyError(GateError):
    pass


@dataclass(frozen=True)
class Policy:
    torch: str  # "declared" or "user-supplied"
    why: str  # where it came from: the file and key, or the default and the version that chose it

    @property
    def user_supplied(self) -> tuple[str, ...]:
        """The requirements the user brings, which the wheel need not declare."""
        return ("torch",) if self.torch == "user-supplied" else ()

    def line(self) -> str:
        return f"policy: torch is {self.torch} ({self.why})"

    def to_json(self) -> dict[str, Any]:
        return {"torch": self.torch, "why": self.why}


def read(policy_file: Path | None, folder: Path) -> tuple[dict[str, Any], str | None]:
    """The policy's table and where it was read (None: no policy given, the defaults hold)."""
    if policy_file is not None:
        try:
            data = tomllib.loads(policy_file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise PolicyError(f"--policy {str(policy_file)!r}: {exc.strerror or exc}; pass an existing TOML file") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise PolicyError(f"--policy {str(policy_file)!r} is not TOML ({exc}); fix the file") from None
        where = f"--policy {str(policy_file)!r}"
        table = data.get("tool", {}).get(TABLE, data) if isinstance(data.get("tool"), dict) else data
    else:
        pyproject = folder / "pyproject.toml"
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except OSError:
            return {}, None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            return {}, None  # somebody else's file, not the gate's to judge: its table is only read when it parses
        tool = data.get("tool")
        if not isinstance(tool, dict) or TABLE not in tool:
            return {}, None
        table, where = tool[TABLE], f"[tool.{TABLE}] in {pyproject}"
    if not isinstance(table, dict):
        raise PolicyError(f"{where}: the policy must be a table of keys ({', '.join(KEYS)}); fix it")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise PolicyError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                          f"the keys are {', '.join(f'{k} ({v})' for k, v in KEYS.items())} (docs/policy.md)")
    return table, where


def for_wheel(wheel: Wheel, policy_file: Path | None, folder: Path) -> Policy:
    table, where = read(policy_file, folder)
    if "torch" in table:
        value = table["torch"]
        if value not in TORCH:
            raise PolicyError(f"{where}: torch = {value!r}; it must be {KEYS['torch']}")
        return Policy(value, f"torch = {value!r}, {where}")
    version = wheel.version
    kind = ("a dev version" if version.is_devrelease else "a pre-release" if version.is_prerelease else
            "a local version" if version.local else None)
    if kind is None:
        return Policy("declared", f"the default for a release version, {version}")
    return Policy("user-supplied", f"the default for {kind}, {version}: main leaves torch to its consumers (setup.py)")
