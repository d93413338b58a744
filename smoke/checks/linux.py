"""A Linux wheel's own checks, gathered: those that read its ELF files (``smoke.checks.shipped``, ``policy``,
``resolve``, ``imports``) and judge its installed environment (``installed``, ``resolve``). Every system's
(``smoke.checks.macos``, ``smoke.checks.windows``) has the same two tuples; ``smoke.checks.pipeline`` adds the
checks every row runs."""

from __future__ import annotations

from smoke.checks import imports, installed, policy, resolve, shipped
from smoke.checks.kinds import EnvironmentCheck, FileCheck

FILE_CHECKS: tuple[FileCheck, ...] = (*shipped.CHECKS, *policy.CHECKS, *resolve.FILE_CHECKS, *imports.CHECKS)
ENVIRONMENT_CHECKS: tuple[EnvironmentCheck, ...] = (*installed.CHECKS, *resolve.ENVIRONMENT_CHECKS)
