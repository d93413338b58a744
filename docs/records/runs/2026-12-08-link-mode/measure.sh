#!/usr/bin/env bash
# What uv's copy link mode costs against its default hard links (issue 58, class 14), on this machine: torch 2.14.1
# and its nvidia-* packages (what the CPU rows install for executorch 1.5.x) into a fresh environment from a warm uv
# cache, timed by farm-bench (each run makes the environment anew), then the disk each leaves: the bytes of its files
# that no other path shares (link count 1), which is what the environment adds to the disk.
# Usage: bash docs/records/runs/2026-12-08-link-mode/measure.sh > docs/records/runs/2026-12-08-link-mode/measured.txt
set -euo pipefail
cd "$(dirname "$0")/../../../.."
uv=$(.nox/tests/bin/python -c "from uv import find_uv_bin; print(find_uv_bin())")
work=$(mktemp -d /tmp/link-mode-XXXX)
trap 'rm -rf "$work"' EXIT
sources="--find-links /opt/wheels --extra-index-url file:///opt/pypi/simple --extra-index-url file:///opt/pypi-more/simple --index-strategy unsafe-best-match"
install() {  # $1: link mode
  echo "rm -rf $work/$1 && $uv venv -q -p python3.11 $work/$1 && $uv pip install -q --compile-bytecode --python $work/$1/bin/python --link-mode $1 $sources torch==2.14.1"
}
$uv --version
sh -c "$(install hardlink)"  # the cache warm for both
farm-bench -n 3 --warmup 0 --timeout 600 --vs "sh -c '$(install hardlink)'" -- sh -c "$(install copy)"
sh -c "$(install copy)"; sh -c "$(install hardlink)"
for mode in copy hardlink; do
  .nox/tests/bin/python - "$work/$mode" "$mode" <<'PY'
import os, sys
own = shared = files = 0
for folder, _, names in os.walk(sys.argv[1]):
    for name in names:
        stat = os.lstat(os.path.join(folder, name))
        files += 1
        if stat.st_nlink == 1:
            own += stat.st_blocks * 512
        else:
            shared += stat.st_blocks * 512
print(f"{sys.argv[2]}: {files} files; {own / 1e9:.2f} GB its own (link count 1), {shared / 1e9:.2f} GB shared with uv's cache")
PY
done
