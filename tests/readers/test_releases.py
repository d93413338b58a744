"""smoke.readers.releases: what the gate knows per release line is one data file, each entry with its upstream
source, and the checks read it from there."""

from __future__ import annotations

import ast
import json
import re

from smoke.backends import cuda_checks
from smoke.checks import foreign, owners
from smoke.readers import releases
from tests.helpers import REPO


def test_every_entry_names_its_upstream_source():
    data = json.loads(releases.RELEASES.read_text())
    assert set(data) == {"about", "lines", "layouts"}
    for line, entry in data["lines"].items():
        assert entry["torch"] and entry["source"], line
    assert set(data["layouts"]) == {"cuda_delegate_libraries", "runtime_split", "shipped_on_purpose", "runtime_owners"}
    for name, entry in data["layouts"].items():
        assert entry["about"] and entry["source"], name


def test_the_checks_read_the_layouts_from_the_data():
    assert cuda_checks.LAYOUTS == releases.cuda_delegate_libraries()
    assert [line for line, _ in cuda_checks.LAYOUTS] == ["1.2", "1.4", "1.5"]  # oldest first, as the check walks them
    assert str(owners.SPLIT) == "1.5" and owners.SPLIT == releases.runtime_split()
    assert foreign.SHIPPED_WITH == {"executorch/data/lib/aoti_cuda_shims.lib": "executorch/backends/cuda/libaoti_cuda_shims.so"}


def test_no_module_says_a_layouts_file_again():
    """A file a layout names is said in releases.json only: a check that names it again holds a second copy."""
    named = {f for _, files in releases.cuda_delegate_libraries() for f in files} - {"executorch/lib/libexecutorch.so"}
    named |= set(releases.shipped_on_purpose())
    named |= {c["owner"] for c in releases.layout("runtime_owners")["components"]} - {"executorch/lib/libexecutorch.so"}
    found = [f"{path.relative_to(REPO)}: {text}" for path in sorted((REPO / "smoke").rglob("*.py"))
             for text in _code_strings(path) if any(name in text for name in named)]
    assert not found, found


def _code_strings(path):
    """The string constants of a module's code, its docstrings left out (they may name a file to explain it)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_the_check_would_find_a_file_said_again(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""names executorch/lib/x.so"""\nOWNER = "executorch/lib/x.so"\n')
    assert _code_strings(module) == ["executorch/lib/x.so"]


def test_what_each_dependency_wheel_ships_names_the_wheel_it_was_read_from():
    """dependency_files.json (written by .ci/read-dependency-wheels): every entry names its wheel file and sha256,
    and the torch lines of the releases the gate runs end to end here (1.4, 1.5) were read for both machines."""
    data = json.loads(releases.DEPENDENCY_FILES.read_text())
    assert data["about"] and data["source"]
    for project, entries in data["packages"].items():
        for entry in entries:
            assert entry["wheel"].endswith(".whl") and re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]), entry
            assert entry["machines"] and all(f.count("/") >= 1 for f in entry["files"]), entry
    torch = releases.dependency_wheels("torch")
    assert all(w.variant for w in torch)
    for line in ("2.13", "2.14"):
        assert {m for w in torch if w.line == line for m in w.machines} == {"x86_64", "aarch64"}, line
        assert all("torch/lib/libtorch.so" in w.files for w in torch if w.line == line)
    assert releases.dependency_wheels("nvidia-cuda-runtime")[0].files == frozenset({"nvidia/cu13/lib/libcudart.so.13"})
    assert releases.dependency_wheels("not-a-package") == ()
