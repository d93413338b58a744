"""What the benchmark's floor import leaves out, on the GPU machine: in the environment the gate built
(ENV_DIR), in its clean loader environment (as the benchmark's own import alone), three fresh interpreters
each timing ``import executorch.exir, torch`` (the floor's import), then the runtime's import (its libraries
loaded), then the device's initialisation: work every load or export on the CUDA row does.

    python3 .ci/device_import_parts.py ENV_DIR
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smoke import paths  # noqa: E402
from smoke.environment import build, loaderenv  # noqa: E402

CODE = """
import time; t = time.perf_counter(); import executorch.exir, torch; a = time.perf_counter()
from executorch.extension.pybindings import portable_lib; b = time.perf_counter()
torch.cuda.init(); torch.zeros(1, device="cuda"); c = time.perf_counter()
print(f"import executorch.exir, torch {a - t:.2f} s; then the runtime {b - a:.2f} s; then CUDA's initialisation {c - b:.2f} s")
"""


def main(env_dir: Path) -> int:
    python = build.environment_python(env_dir)
    env = loaderenv.for_environment(python, paths.HOME).env
    for _ in range(3):
        ran = subprocess.run([str(python), "-c", CODE], cwd=paths.HOME, env=env, capture_output=True, text=True)
        print(ran.stdout.strip() or f"exit {ran.returncode}: {ran.stderr.strip()[-400:]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
