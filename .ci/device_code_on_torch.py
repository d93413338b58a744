"""On the GPU test machine: the device-code check on torch's own CUDA libraries.

PyPI's executorch 1.2.0 ships no CUDA library, so on it the device-code check can only
fail. To see it pass on real, published CUDA machine code, this builds a copy of the
1.2.0 wheel relabelled +cu130 whose shim layer is one of torch's own CUDA libraries (the
smallest that carries device code), and judges it twice: against a row that claims
torch's own arch list (torch.cuda.get_arch_list(): it must PASS), and against the
cuda_x86_64 row's cu130 list (it must FAIL, naming the architectures torch has and the
row does not claim, or the reverse).

    python .ci/device_code_on_torch.py WHEEL OUT_DIR
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from smoke.backends import cuda  # noqa: E402
from smoke.checks import kinds, shipped
from smoke.readers import devicecode  # noqa: E402
from smoke.readers.wheel import read_wheel  # noqa: E402
from smoke.readers.wheelcopy import rewrite_wheel  # noqa: E402
from smoke.rows import ROWS  # noqa: E402


def main(wheel_path: str, out: str) -> int:
    cuobjdump = devicecode.find_cuobjdump()
    print(f"cuobjdump: {cuobjdump}")
    lib_dir = Path(torch.__file__).parent / "lib"
    candidates = sorted((p for p in lib_dir.glob("*.so*") if p.is_file()), key=lambda p: p.stat().st_size)
    with_code = {}
    for lib in candidates:
        t = time.monotonic()
        code = devicecode.device_code(cuobjdump, lib)
        print(f"{lib.name}: {lib.stat().st_size} B, sm {sorted(code.cubins, key=devicecode.sm_number)}, "
              f"ptx {sorted(code.ptx, key=devicecode.sm_number)} ({time.monotonic() - t:.2f} s)")
        if code.any:
            with_code[lib] = code
    # The smallest library with PTX for its newest architecture, else the smallest with any code.
    with_ptx = [lib for lib, code in with_code.items() if code.ptx]
    chosen = (with_ptx or list(with_code) or [None])[0]
    if chosen is None:
        print("no torch library with device code found")
        return 1
    torch_archs = tuple(a for a in torch.cuda.get_arch_list() if a.startswith("sm_"))
    print(f"torch {torch.__version__} arch list: {' '.join(torch_archs)}")
    source = Path(wheel_path)
    label = f"{source.name.split('-')[1]}+cu130"
    def edit(text: str) -> str:
        return re.sub(r"^Version: .*$", f"Version: {label}", text, count=1, flags=re.M) + "Requires-Dist: nvidia-cuda-runtime==13.0.96\n"
    copy = rewrite_wheel(source, Path(out), new_name=source.name.replace(source.name.split("-")[1], label, 1),
                         metadata=edit, add={"executorch/backends/cuda/libaoti_cuda_shims.so": chosen.read_bytes()})
    wheel = read_wheel(copy)
    libraries = shipped.read_libraries(wheel)
    torch_row = dataclasses.replace(ROWS["cuda_x86_64"], name="torch's own arch list",
                                    backend=dataclasses.replace(ROWS["cuda_x86_64"].backend, archs={"cu130": torch_archs}))
    results = {}
    for row in (torch_row, ROWS["cuda_x86_64"]):
        result = kinds.run_file(cuda.DEVICE_CODE, wheel, row, libraries)
        print(f"[{row.name}] {result.line()} ({result.seconds} s)")
        results[row.name] = result.to_json()
    Path(out, "device-code-on-torch.json").write_text(json.dumps({"library": chosen.name, "torch": torch.__version__,
                                                                   "results": results}, indent=2, default=str))
    copy.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
