"""The release gate workflow's matrix, made from its inputs (.github/workflows/release-gate.yml, its `setup` job).

    ROWS='[]' PYTHONS='["3.12"]' RUNNERS='{}' TORCH_INDEX='{}' python3 .ci/gate_matrix.py

Each input is JSON, as the workflow passes it: ROWS the rows to run (`[]`: every row), PYTHONS the Python versions
(each row runs once for each, and picks that Python's wheel), RUNNERS a runner label, or a list of labels, per row
(the rows it does not name keep `DEFAULT_RUNNERS`), TORCH_INDEX torch's package index per row (the row's
`--torch-index`). It writes `matrix` (`{"include": [...]}`: row, machine, cuda, runner, python, torch_index) and
`pythons` to $GITHUB_OUTPUT (or prints them), for `fromJSON`. An input it cannot use is one ERROR line (and a
workflow error annotation), exit 2, before anything is written.

It runs on the bare runner's python3 before the gate is installed, so it imports nothing of the gate's:
tests/test_workflow.py keeps `ROWS` equal to smoke/rows.py's.
"""

from __future__ import annotations

import json
import os
import re
import sys

# smoke/rows.py ROWS: the machine of each row's wheels (the end of their platform tag) and whether it gates a CUDA
# build (a +cuXXX wheel): how the workflow picks each row's wheel among the artifacts.
ROWS = {
    "cuda_x86_64": {"machine": "x86_64", "cuda": True},
    "cuda_aarch64": {"machine": "aarch64", "cuda": True},
    "cpu_x86_64": {"machine": "x86_64", "cuda": False},
    "cpu_aarch64": {"machine": "aarch64", "cuda": False},
    "cpu_macos_arm64": {"machine": "arm64", "cuda": False},
    "cpu_windows_x86_64": {"machine": "amd64", "cuda": False},
}
# Where each row runs unless RUNNERS names another: GitHub's hosted runners, and for the CUDA x86_64 row a
# self-hosted GPU runner of this repository's (.github/actionlint.yaml names its label). macOS and Windows as
# smoke/readers/systems.py says (System.runner).
DEFAULT_RUNNERS: dict[str, str | list[str]] = {
    "cuda_x86_64": ["self-hosted", "linux.gpu.nvidia"],
    "cuda_aarch64": "ubuntu-24.04-arm",
    "cpu_x86_64": "ubuntu-24.04",
    "cpu_aarch64": "ubuntu-24.04-arm",
    "cpu_macos_arm64": "macos-14",
    "cpu_windows_x86_64": "windows-latest",
}
DEFAULTS = {"ROWS": "[]", "PYTHONS": '["3.12"]', "RUNNERS": "{}", "TORCH_INDEX": "{}"}
INPUTS = {"ROWS": "rows", "PYTHONS": "python-versions", "RUNNERS": "runners", "TORCH_INDEX": "torch-index"}  # the workflow's names
EXAMPLES = {"ROWS": '["cpu_x86_64", "cpu_aarch64"]', "PYTHONS": '["3.10", "3.12", "3.14t"]',
            "RUNNERS": '{"cuda_x86_64": "linux.g5.4xlarge.nvidia.gpu"}', "TORCH_INDEX": '{"cuda_x86_64": "https://download.pytorch.org/whl/cu130"}'}
PYTHON = re.compile(r"3\.\d+(\.\d+)?t?")  # what actions/setup-python takes and a cpXY wheel is for: 3.12, 3.14t, 3.12.12


class Refused(Exception):
    pass


def _read(environ: dict[str, str], name: str) -> object:
    text = environ.get(name, "").strip() or DEFAULTS[name]
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Refused(f"input {INPUTS[name]} is not JSON ({exc.msg} at character {exc.pos}): {text[:80]!r}; "
                      f"give JSON such as {EXAMPLES[name]}") from None
    except RecursionError:  # nested deeper than the parser recurses (issue 48: it was a traceback)
        raise Refused(f"input {INPUTS[name]} is nested too deep: {text[:80]!r}; give JSON such as {EXAMPLES[name]}") from None


def _row_names(value: object, name: str) -> None:
    unknown = [key for key in value if key not in ROWS] if isinstance(value, (dict, list)) else []
    if unknown:
        raise Refused(f"input {INPUTS[name]} names {unknown[0]!r}, which is not a row of the gate ({', '.join(ROWS)})")


def matrix(environ: dict[str, str]) -> tuple[dict[str, list[dict[str, object]]], list[str]]:
    """The matrix and the Python versions, from the inputs; Refused for one it cannot use."""
    rows, pythons, runners, indexes = (_read(environ, name) for name in ("ROWS", "PYTHONS", "RUNNERS", "TORCH_INDEX"))
    if not isinstance(rows, list) or not all(isinstance(r, str) for r in rows):
        raise Refused(f"input rows is {json.dumps(rows)[:80]}: give a JSON list of rows, e.g. {EXAMPLES['ROWS']} ([] runs every row)")
    _row_names(rows, "ROWS")
    if not isinstance(pythons, list) or not pythons or not all(isinstance(p, str) and PYTHON.fullmatch(p) for p in pythons):
        raise Refused(f"input python-versions is {json.dumps(pythons)[:80]}: give a JSON list of CPython versions, e.g. "
                      f"{EXAMPLES['PYTHONS']}")
    twice = sorted({p for p in pythons if pythons.count(p) > 1})
    if twice:
        raise Refused(f"input python-versions names {twice[0]} twice: each Python's rows run once")
    if not isinstance(runners, dict) or not all(isinstance(v, str) and v or isinstance(v, list) and v and
                                                all(isinstance(label, str) and label for label in v) for v in runners.values()):
        raise Refused(f"input runners is {json.dumps(runners)[:80]}: give a JSON object of row: runner label (or a list of "
                      f"labels), e.g. {EXAMPLES['RUNNERS']}")
    _row_names(runners, "RUNNERS")
    if not isinstance(indexes, dict) or not all(isinstance(v, str) and v.startswith(("https://", "http://"))
                                                for v in indexes.values()):
        raise Refused(f"input torch-index is {json.dumps(indexes)[:80]}: give a JSON object of row: index URL, e.g. "
                      f"{EXAMPLES['TORCH_INDEX']}")
    _row_names(indexes, "TORCH_INDEX")
    include = [{"row": row, **ROWS[row], "runner": runners.get(row, DEFAULT_RUNNERS[row]), "python": python,
                "torch_index": indexes.get(row, "")}
               for python in pythons for row in (rows or list(ROWS))]
    return {"include": include}, pythons


def main() -> int:
    environ = dict(os.environ)
    try:
        found, pythons = matrix(environ)
    except Refused as exc:
        print(f"ERROR {exc}", file=sys.stderr, flush=True)
        if environ.get("GITHUB_ACTIONS") == "true":  # the job's annotation (the message holds no newline or %)
            print(f"::error title=release-gate inputs::{str(exc).replace('%', '%25')}", flush=True)
        return 2
    lines = f"matrix={json.dumps(found)}\npythons={json.dumps(pythons)}\n"
    output = environ.get("GITHUB_OUTPUT")
    if output:
        with open(output, "a", encoding="utf-8") as out:
            out.write(lines)
    print(lines, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
