"""The layers are the code's: the import-linter contract in pyproject.toml holds, and no circle of imports.

Imports made inside functions count (grimp reads them), and so do annotations under TYPE_CHECKING (issue 46): a
circle through annotations is a circle for a reader and a type checker, if not for the running gate.
"""

from __future__ import annotations

import sys

import grimp
from importlinter.cli import lint_imports

from tests.helpers import REPO


def test_the_layers_contract_is_kept(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    code = lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True, no_logo=True)
    assert code == 0, capsys.readouterr().out


def test_no_module_of_smoke_imports_itself_back(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    graph = grimp.build_graph("smoke", exclude_type_checking_imports=False, cache_dir=None)
    circles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                circles.append(" -> ".join((importer, *back)))
    assert not circles, "\n".join(circles)


def test_the_child_imports_no_reader_of_the_gates_own():
    """The child runs inside the wheel's environment, which has torch and executorch but not the gate's
    own tools: importing it (and its backends) must pull in neither packaging nor pyelftools."""
    import subprocess

    code = ("import sys, smoke.child.run, smoke.child.exports, smoke.child.negative; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'packaging', 'elftools', 'torch', 'executorch'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout
    assert out.strip() == "[]"


def _ci_scripts() -> list:
    """The Python scripts of .ci/: the *.py files, and those whose first line runs python."""
    return sorted(path for path in (REPO / ".ci").iterdir() if path.is_file() and (
        path.suffix == ".py" or path.read_bytes()[:2] == b"#!" and b"python" in path.read_bytes().split(b"\n", 1)[0]))


def test_every_name_a_ci_script_takes_from_the_gate_exists():
    """.ci/'s scripts import the gate's modules (the GPU machine's calls, the release tools) and run where no test runs
    them end to end: each name they take from smoke must exist, so that a refactor of the gate that drops or moves one
    fails here, not on a GPU call (stages.run_check, once, would have)."""
    import ast
    import importlib

    sys.path.insert(0, str(REPO))
    missing = []
    scripts = _ci_scripts()
    assert {path.name for path in scripts} >= {"device_mutants.py", "device_code_on_torch.py", "release-shape"}
    for path in scripts:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "smoke" and not node.level:
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if not hasattr(module, alias.name):
                        try:
                            importlib.import_module(f"{node.module}.{alias.name}")
                        except ImportError:
                            missing.append(f"{path.name}:{node.lineno} {node.module}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "smoke":
                        importlib.import_module(alias.name)
    assert missing == []
