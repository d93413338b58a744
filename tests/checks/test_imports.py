"""smoke.checks.imports: `imports declared` (issue 28), on the real wheels of 1.0.0 to 1.5.1 and their mutants,
through the check function and ``python -m smoke inspect``; the scan under hypothesis."""

from __future__ import annotations

import subprocess
import sys
import time
import tracemalloc
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke.checks import imports
from smoke.errors import GateError
from smoke.readers.wheel import read_wheel
from smoke.readers.wheelcopy import rewrite_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import REPO, release_wheel

RELEASES = REPO / ".gate" / "release-table" / "wheels"

ROW = ROWS["cpu_x86_64"]


# --- imports declared ---------------------------------------------------------------------------------


def _requires(drop: str):
    def edit(text: str) -> str:
        assert f"Requires-Dist: {drop}" in text
        return "\n".join(line for line in text.splitlines() if not line.startswith(f"Requires-Dist: {drop}")) + "\n"
    return edit


@pytest.mark.parametrize("release", ["1.0.0", "1.0.1", "1.1.0", "1.2.0", "1.3.1", "1.4.0", "1.4.1"])
def test_the_releases_that_declare_torch_pass(release):
    path = release_wheel(release)
    result = imports.check_imports_declared(read_wheel(path), ROW, None)
    assert result.status is Status.PASS, result.reason


def test_1_5_1_imports_torch_without_declaring_it_and_passes_once_declared(wheel_x86_64, declared_x86_64):
    result = imports.check_imports_declared(read_wheel(wheel_x86_64), ROW, None)
    assert result.line().startswith("FAIL imports declared: 1 third-party module imported when the package is imported, not in "
                                    "Requires-Dist: torch (imported by executorch/exir/__init__.py line 30, reached by import "
                                    "executorch.exir); declare each")
    result = imports.check_imports_declared(read_wheel(declared_x86_64), ROW, None)
    assert result.status is Status.PASS
    assert result.measured["third_party"] == ["flatbuffers", "numpy", "pandas", "ruamel", "sympy", "tabulate", "torch", "torchao",
                                              "torchgen", "typing_extensions"]


@pytest.mark.parametrize("drop", ["torchao", "tabulate", "ruamel.yaml"])
def test_a_requirement_taken_out_fails_naming_the_import(declared_x86_64, tmp_path, drop):
    # executorch#22180: torchao imported by the package, not declared.
    path = rewrite_wheel(declared_x86_64, tmp_path, metadata=_requires(drop),
                         keep=lambda name: name.endswith(".py") or ".dist-info/" in name)
    result = imports.check_imports_declared(read_wheel(path), ROW, None)
    top = {"ruamel.yaml": "ruamel"}.get(drop, drop)
    assert result.status is Status.FAIL and list(result.measured["undeclared"]) == [top], result.reason
    said = {"ruamel": "ruamel (of ruamel-yaml)"}.get(top, top)  # the distribution named where the import name is not it
    assert result.reason.startswith(f"1 third-party module imported when the package is imported, not in Requires-Dist: {said} (imported by ")


def test_through_python_m_smoke_inspect_one_fail_line_names_the_import(declared_x86_64, tmp_path):
    path = rewrite_wheel(declared_x86_64, tmp_path, metadata=_requires("torchao"))
    ran = subprocess.run([sys.executable, "-m", "smoke", "inspect", str(path), "--row", "cpu_x86_64"], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    fails = [line for line in ran.stdout.splitlines() if line.startswith("FAIL ")]
    assert len(fails) == 1 and fails[0].startswith("FAIL imports declared: 1 third-party module imported when the package is "
                                                   "imported, not in Requires-Dist: torchao (imported by executorch/")
    assert "PASS no duplicate content: " in ran.stdout


SOURCES = {
    "pkg": "import os\nfrom . import a, guarded\nfrom pkg.b import thing\n",
    "pkg.a": "import numpy.linalg\nclass C:\n    import inclass\nif TYPE_CHECKING:\n    import typed\n"
             "def f():\n    import later\n",
    "pkg.guarded": "try:\n    import optional\nexcept (ModuleNotFoundError, OSError):\n    optional = None\n"
                   "try:\n    import strict\nexcept KeyError:\n    pass\n",
    "pkg.b": "from ..outside import x\nfrom .c import *\nimport yaml\n",
    "pkg.b.c": "import sklearn\n",
    "pkg.unreached": "import never\n",
}


def test_the_scan_follows_only_what_runs_at_import_time():
    packages = {"pkg", "pkg.b"}
    members = {name: name.replace(".", "/") + ("/__init__.py" if name in packages else ".py") for name in SOURCES}
    assert imports.module_names(list(members.values())) == members
    text = {member: SOURCES[name].encode() for name, member in members.items()}
    third, reached, broken = imports.scan(members, text.__getitem__, {"pkg"}, ["pkg"])
    assert sorted(third) == ["inclass", "numpy", "sklearn", "strict", "yaml"]
    assert third["sklearn"] == imports.Found("sklearn", "pkg.b.c", 1)
    assert imports.chain(reached, "pkg.b.c") == ["pkg", "pkg.b", "pkg.b.c"]
    assert "pkg.unreached" not in reached and broken == []
    declared = {"numpy", "pyyaml", "scikit-learn"}
    assert [top for top in sorted(third) if not imports.covered(top, declared)] == ["inclass", "strict"]


# Property tests: any module text (random, or a real module of the wheel mutated) is scanned without an
# exception, in bounded memory and time; a module Python cannot parse is listed as such.
REAL_MODULE = None


def _real_module() -> bytes:
    global REAL_MODULE
    if REAL_MODULE is None:
        with zipfile.ZipFile(release_wheel("1.5.1")) as archive:
            REAL_MODULE = archive.read("executorch/exir/__init__.py")
    return REAL_MODULE


texts = st.one_of(
    st.text(max_size=2000).map(str.encode),
    st.binary(max_size=2000),
    st.builds(lambda cut, junk, at: _real_module()[:at] + junk + _real_module()[at + cut:],
              st.integers(0, 200), st.binary(max_size=64), st.integers(0, 3000)),
    st.builds(lambda depth, word: ("if x:\n" + "".join(" " * (i + 1) + "if x:\n" for i in range(depth)) + " " * (depth + 1)
                                   + f"import {word}\n").encode(), st.integers(0, 120), st.sampled_from(["a", "b.c", "pkg"])),
    st.builds(lambda n: ("x = " + "(" * n + "1" + ")" * n + "\n").encode(), st.integers(0, 5000)),
    st.builds(lambda n: ("x = 1" + " + 1" * n + "\n").encode(), st.integers(0, 60000)),
)


def _scan_bounded(text: bytes) -> None:
    tracemalloc.start()
    start = time.monotonic()
    try:
        imports.scan({"pkg": "pkg/__init__.py", "pkg.m": "pkg/m.py"}, lambda member: text, {"pkg"}, ["pkg"])
    except GateError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 256 * 1024 * 1024 and time.monotonic() - start < 10


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_any_module_text_is_scanned_or_listed_as_not_python(text):
    _scan_bounded(text)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_any_module_text_is_scanned_or_listed_as_not_python_many(text):
    _scan_bounded(text)


def test_a_module_that_is_not_python_is_said_in_the_pass(declared_x86_64, tmp_path):
    # executorch/exir/tracer.py is reached from executorch.exir; its bytes replaced by what no Python parses.
    path = rewrite_wheel(declared_x86_64, tmp_path, add={"executorch/exir/tracer.py": b"def (:\n"},
                         keep=lambda name: name.endswith(".py") or ".dist-info/" in name)
    result = imports.check_imports_declared(read_wheel(path), ROW, None)
    assert result.status is Status.PASS and result.measured["unparsed"] == ["executorch/exir/tracer.py"]
    assert result.reason.endswith("; 1 reached modules not scanned (not Python to this interpreter, or over 4194304 B): "
                                  "executorch/exir/tracer.py")
