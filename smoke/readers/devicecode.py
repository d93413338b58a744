"""The GPU architectures a shared library carries code for, read with ``cuobjdump``.

``cuobjdump --list-elf`` names one ``*.sm_XX.cubin`` per machine-code image in the
library's fatbin, ``--list-ptx`` one ``*.sm_XX.ptx`` per portable image. A library
with no fatbin makes cuobjdump say so and exit non-zero: that is "no device code".
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from smoke import proc

_IMAGE = re.compile(r"\.(sm_\d+[a-z]?)\.(cubin|ptx)\s*$")
# Where cuobjdump is found besides PATH: the CUDA toolkit, NVIDIA's own PyPI wheel
# (nvidia-cuda-cuobjdump, installed with the gate), and the copy triton's wheel carries.
_PACKAGED = ("nvidia/cu13/bin/cuobjdump", "nvidia/cuda_cuobjdump/bin/cuobjdump", "triton/backends/nvidia/bin/cuobjdump")


class CuobjdumpError(RuntimeError):
    pass


def find_cuobjdump() -> str | None:
    """The cuobjdump to use: $CUOBJDUMP, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, then packaged copies."""
    if os.environ.get("CUOBJDUMP"):
        return os.environ["CUOBJDUMP"]
    found = shutil.which("cuobjdump")
    if found:
        return found
    candidates = [Path(os.environ[v]) / "bin" / "cuobjdump" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates.append(Path("/usr/local/cuda/bin/cuobjdump"))
    sites = [Path(sysconfig.get_paths()["purelib"]), Path(sysconfig.get_paths()["platlib"])]
    sites += [Path(p) for p in sys.path if p.endswith("site-packages")]
    candidates += [site / rel for site in sites for rel in _PACKAGED]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@dataclass(frozen=True)
class DeviceCode:
    cubins: frozenset[str]  # sm_90, ...
    ptx: frozenset[str]

    @property
    def any(self) -> bool:
        return bool(self.cubins or self.ptx)


def _list(cuobjdump: str, flag: str, path: Path) -> set[str]:
    ran = proc.run([cuobjdump, flag, path], what=f"{cuobjdump} {flag} {path.name}", error=CuobjdumpError, timeout=120, check=False)
    text = ran.stdout + ran.stderr
    found = {m.group(1) for line in text.splitlines() if (m := _IMAGE.search(line))}
    if ran.returncode and not found and "does not contain device code" not in text and "No PTX file found" not in text:
        raise CuobjdumpError(f"{cuobjdump} {flag} {path.name} failed: {text.strip().splitlines()[-1] if text.strip() else ran.returncode}")
    return found


def device_code(cuobjdump: str, path: Path) -> DeviceCode:
    return DeviceCode(frozenset(_list(cuobjdump, "--list-elf", path)), frozenset(_list(cuobjdump, "--list-ptx", path)))


def sm_number(arch: str) -> int:
    return int(re.sub(r"\D", "", arch))


def base(arch: str) -> str:
    """sm_90a (arch-specific features) and sm_100f (family) are code for sm_90 and sm_100."""
    return re.sub(r"[af]$", "", arch)
