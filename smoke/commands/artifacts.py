"""``python -m smoke artifacts PATH... [--json]``: what the gate reads from kept programs (.pte) and data files
(.ptd), with no executorch (the reader is ``smoke.artifacts``).

Exit 2 when a path cannot be read as a .pte or .ptd (one ERROR line each, the others still read), 1 when a
program's data files lack a key it expects, 0 otherwise.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from smoke.artifacts import ArtifactError, DataFile, Program, describe, missing_keys, read
from smoke.console import error
from smoke.errors import EXIT_CANNOT_RUN, EXIT_FAILED


def _expand(given: list[Path]) -> tuple[list[Path], list[tuple[bool, str]]]:
    """The files to read: a folder the gate kept gives its .pte and .ptd files; a .pte given without a data
    file of its folder brings the .ptd files beside it, said so. Also what is said of them, in order:
    (an error?, the line)."""
    paths: list[Path] = []
    said: list[tuple[bool, str]] = []
    for path in given:
        if path.is_dir() and not path.is_symlink():
            found = sorted(p for p in path.iterdir() if p.suffix in (".pte", ".ptd") and p.is_file())
            if not found:  # the work folder the gate kept: a folder per model
                found = sorted(p for sub in path.iterdir() if sub.is_dir() and not sub.is_symlink()
                               for p in sub.iterdir() if p.suffix in (".pte", ".ptd") and p.is_file())
            if not found:
                said.append((True, f"{str(path)!r} is a folder with no .pte or .ptd file in it: pass the folder the gate "
                                   f"kept (it prints 'artifacts kept in …'), one of its model folders, or the files"))
            paths += found
        else:
            paths.append(path)
    for program in [p for p in paths if p.suffix == ".pte"]:
        folder = program.parent
        if any(p.suffix == ".ptd" and p.parent == folder for p in paths):
            continue
        beside = sorted(p for p in folder.glob("*.ptd") if p.is_file()) if folder.is_dir() else []
        if beside:
            said.append((False, f"{program}: also reading the data file{'s' if len(beside) > 1 else ''} beside it: "
                                f"{', '.join(p.name for p in beside)}"))
            paths += beside
    return list(dict.fromkeys(paths)), said


def artifacts(given: list[Path], as_json: bool) -> int:
    """Print what the gate reads from each path, and whether each program's data files hold every key it expects."""
    code = 0
    records, items = [], []
    paths, said = _expand(given)
    for is_error, line in said:
        if is_error:
            error(line)
            code = EXIT_CANNOT_RUN
        else:
            print(line)
    for path in paths:
        try:
            item = read(path)
        except ArtifactError as exc:
            error(str(exc))
            code = EXIT_CANNOT_RUN
            continue
        items.append(item)
        if as_json:
            records.append({"kind": type(item).__name__.lower(), **asdict(item)})
        else:
            print("\n".join(describe(item)))
    # Given a program with data files from its own folder, say whether every key it expects is there.
    for program in (i for i in items if isinstance(i, Program)):
        folder = Path(program.path).parent
        data_files = [i for i in items if isinstance(i, DataFile) and Path(i.path).parent == folder]
        if not data_files:
            continue
        missing = missing_keys(program, data_files)
        names = ", ".join(Path(d.path).name for d in data_files)
        if missing is None:
            line = f"{program.path}: which keys its delegates expect is unknown to this reader"
        elif missing:
            line, code = f"{program.path} with {names}: missing {missing}", max(code, EXIT_FAILED)
        else:
            line = f"{program.path} with {names}: every key it expects is present ({len(program.expected_keys or ())})"
        if as_json:
            records.append({"kind": "pairing", "program": program.path, "data_files": [d.path for d in data_files], "missing": missing})
        else:
            print(line)
    if as_json:
        print(json.dumps(records, indent=2))
    return code
