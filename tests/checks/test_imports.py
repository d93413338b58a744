"""smoke.checks.imports: `imports declared` (issue 28), on the real wheels of 1.0.0 to 1.5.1 and their mutants,
through the check function and ``python -m smoke inspect``; the scan under hypothesis."""

from __future__ import annotations

import ast
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
from tests.helpers import REPO, examples, release_wheel

RELEASES = REPO / ".gate" / "release-table" / "wheels"

ROW = ROWS["cpu_x86_64"]


# --- imports declared ---------------------------------------------------------------------------------


def _requires(drop: str):
    def edit(text: str) -> str:
        assert f"Requires-Dist: {drop}" in text
        return "\n".join(line for line in text.splitlines() if not line.startswith(f"Requires-Dist: {drop}")) + "\n"
    return edit


@pytest.mark.slow
@pytest.mark.parametrize("release", ["1.0.1", "1.1.0", "1.2.0", "1.3.1", "1.4.0", "1.4.1"])
def test_the_releases_that_declare_torch_pass(release):
    path = release_wheel(release)
    result = imports.check_imports_declared(read_wheel(path), ROW, None)
    assert result.status is Status.PASS, result.reason


@pytest.mark.slow
def test_1_5_1_imports_torch_without_declaring_it_and_passes_once_declared(wheel_x86_64, declared_x86_64):
    result = imports.check_imports_declared(read_wheel(wheel_x86_64), ROW, None)
    assert result.line().startswith("FAIL imports declared: 1 third-party module imported when the package is imported, not in "
                                    "Requires-Dist: torch (imported by executorch/exir/__init__.py line 30, reached by import "
                                    "executorch.exir); declare each")
    result = imports.check_imports_declared(read_wheel(declared_x86_64), ROW, None)
    assert result.status is Status.PASS
    assert result.measured["third_party"] == ["flatbuffers", "huggingface_hub", "hydra", "numpy", "omegaconf", "pandas",
                                              "pytorch_tokenizers", "ruamel", "sympy", "tabulate", "torch", "torchao",
                                              "torchgen", "typing_extensions"]


def _torch_for(system: str):
    def edit(text: str) -> str:
        return text.replace("Requires-Dist: expecttest", f'Requires-Dist: torch>=2.13.0a0; platform_system == "{system}"\n'
                                                         "Requires-Dist: expecttest", 1)
    return edit


@pytest.mark.slow
def test_macos_and_windows_wheels_are_judged_too_with_their_own_markers(macos_1_5_1, tmp_path):
    """Issue 48: imports declared never ran on macOS or Windows wheels, and no line said so (docs/checks.md says they
    are judged by the same checks). PyPI's 1.5.1 for each imports torch undeclared, as on Linux: the inspect line FAILs
    it. A torch declared for that system alone passes it, and one declared for the other system does not: each is
    judged with its own system's markers (platform_system Darwin, Windows)."""
    from tests.helpers import platform_wheel, smoke

    wheels = {"cpu_macos_arm64": (macos_1_5_1, "Darwin", "Windows"),
              "cpu_windows_x86_64": (platform_wheel("win_amd64", "1.5.1"), "Windows", "Darwin")}
    for row, (wheel, own, other) in wheels.items():
        lines = [line for line in smoke("inspect", wheel).stdout.splitlines() if line.startswith(("PASS imports declared",
                                                                                                  "FAIL imports declared"))]
        assert len(lines) == 1 and lines[0].startswith("FAIL imports declared: 1 third-party module imported when the package "
                                                       "is imported, not in Requires-Dist: torch (imported by "
                                                       "executorch/exir/__init__.py line 30"), (row, lines)
        for system, status in ((own, Status.PASS), (other, Status.FAIL)):
            edited = rewrite_wheel(wheel, tmp_path / f"{row}-{system}", metadata=_torch_for(system))
            result = imports.check_imports_declared(read_wheel(edited), ROWS[row], None)
            assert result.status is status, (row, system, result.line())


@pytest.mark.slow
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


@pytest.mark.slow
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
    third, reached, broken, optional = imports.scan(members, text.__getitem__, {"pkg"}, ["pkg"])
    assert sorted(third) == ["inclass", "numpy", "sklearn", "strict", "yaml"] and sorted(optional) == ["optional"]
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


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_any_module_text_is_scanned_or_listed_as_not_python(text):
    _scan_bounded(text)


@pytest.mark.slow
@settings(max_examples=examples(3000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_any_module_text_is_scanned_or_listed_as_not_python_many(text):
    _scan_bounded(text)


@pytest.mark.slow
def test_a_module_that_is_not_python_is_said_in_the_pass(declared_x86_64, tmp_path):
    # executorch/exir/tracer.py is reached from executorch.exir; its bytes replaced by what no Python parses.
    path = rewrite_wheel(declared_x86_64, tmp_path, add={"executorch/exir/tracer.py": b"def (:\n"},
                         keep=lambda name: name.endswith(".py") or ".dist-info/" in name)
    result = imports.check_imports_declared(read_wheel(path), ROW, None)
    assert result.status is Status.PASS and result.measured["unparsed"] == ["executorch/exir/tracer.py"]
    assert result.reason.endswith("; 1 reached modules not scanned (not Python to this interpreter, or over 4194304 B): "
                                  "executorch/exir/tracer.py")


# --- issue 37: the guards, own packages and the LLM export path ------------------------------------------------
# Each on a real release with one reached module changed: PyPI's 1.4.1 (which declares every import it makes, so
# PASSes) with text appended to executorch/exir/tracer.py (reached from executorch.exir). Only the modules the scan
# reaches from the public ones and .dist-info are kept (made once per session): the check reads nothing else, and
# each copy is then small.

TRACER = "executorch/exir/tracer.py"
# What a cp311 wheel on the CPU x86_64 row is judged for.
FACTS = imports.Facts(((3, 11),), {"sys_platform": "linux", "os_name": "posix", "platform_system": "Linux",
                                   "platform_machine": "x86_64"})
SLIM: dict[str, object] = {}


@pytest.fixture(scope="module")
def slim(tmp_path_factory):
    def made(release: str):
        if release not in SLIM:
            source = release_wheel(release)
            sources = imports.module_names(read_wheel(source).files)
            with zipfile.ZipFile(source) as archive:
                scanned = imports.scan(sources, archive.read, {"executorch"}, [m for m in imports.PUBLIC if m in sources], FACTS)
            kept = {sources[module] for module in scanned.reached}
            SLIM[release] = rewrite_wheel(source, tmp_path_factory.mktemp(f"slim-{release}"),
                                          keep=lambda name: name in kept or ".dist-info/" in name)
        return SLIM[release]
    return made


@pytest.fixture
def appended(slim, tmp_path):
    def made(text: str, *, release="1.4.1", folder="mutant", metadata=None, new_name=None, add=None):
        source = slim(release)
        with zipfile.ZipFile(source) as archive:
            module = archive.read(TRACER)
        return rewrite_wheel(source, tmp_path / folder, add={TRACER: module + b"\n" + text.encode(), **(add or {})},
                             metadata=metadata, new_name=new_name)
    return made


def _judged(path):
    return imports.check_imports_declared(read_wheel(path), ROW, None)


def _fails_on(result, top: str) -> bool:
    return result.status is Status.FAIL and top in result.measured["undeclared"] and \
        f"not in Requires-Dist: {top} (imported by {TRACER} line " in result.line()


@pytest.mark.slow
@pytest.mark.parametrize("handler", ['raise ImportError("install transformers for the LLM path")', "raise",
                                     "raise RuntimeError('no transformers') from None",
                                     "import logging\n    logging.error('no transformers')\n    raise",
                                     "import sys\n    sys.exit(1)"])
def test_an_import_whose_handler_re_raises_is_required(appended, handler):
    # A handler that cannot complete does not let the package import without the module: the import is required.
    path = appended(f"try:\n    import transformers\nexcept ImportError:\n    {handler}\n")
    result = _judged(path)
    assert _fails_on(result, "transformers"), result.line()
    assert result.line().startswith("FAIL imports declared: 1 third-party module imported when the package is imported, not in "
                                    f"Requires-Dist: transformers (imported by {TRACER} line ")


@pytest.mark.slow
def test_a_handler_that_can_complete_keeps_the_import_optional(appended):
    path = appended("try:\n    import transformers\nexcept ImportError:\n    if STRICT:\n        raise\n"
                                        "    transformers = None\n")
    result = _judged(path)
    assert result.status is Status.PASS and "transformers" in result.measured["optional"], result.line()


@pytest.mark.parametrize("case", ["case 'llm'", "case _"])
def test_an_import_under_a_module_level_match_is_required(appended, case):
    path = appended(f"import os\nmatch os.environ.get('MODE'):\n    {case}:\n        import transformers\n")
    assert _fails_on(_judged(path), "transformers")


@pytest.mark.parametrize("guard", ["import contextlib\nwith contextlib.suppress(ImportError):",
                                   "from contextlib import suppress\nwith suppress(ModuleNotFoundError, OSError):",
                                   "import contextlib as cl\nwith open(__file__), cl.suppress(ImportError):"])
def test_an_import_under_contextlib_suppress_is_optional(appended, guard):
    path = appended(f"{guard}\n    import transformers\n")
    result = _judged(path)
    assert result.status is Status.PASS and "transformers" in result.measured["optional"], result.line()
    assert "transformers" not in result.measured["third_party"]


def test_suppress_of_another_exception_does_not_guard_an_import(appended):
    path = appended("from contextlib import suppress\nwith suppress(ValueError):\n    import transformers\n")
    assert _fails_on(_judged(path), "transformers")


TOMLI = "import sys\nif sys.version_info >= (3, 11):\n    import tomllib\nelse:\n    import tomli as tomllib\n"


@pytest.mark.slow
def test_a_version_guard_is_judged_for_the_wheels_python(appended):
    # cp311: the tomli branch never runs, so tomli need not be declared (it would be, with python_version < "3.11").
    result = _judged(appended(TOMLI, folder="cp311"))
    assert result.status is Status.PASS and "tomli" not in result.measured["third_party"], result.line()
    # The same files tagged cp310: the branch runs there, and tomli is undeclared.
    cp310 = appended(TOMLI, folder="cp310", new_name="executorch-1.4.1-cp310-cp310-manylinux_2_28_x86_64.whl")
    assert _fails_on(_judged(cp310), "tomli")
    # A guard that admits 3.11 makes its import required there.
    assert _fails_on(_judged(appended("import sys\nif sys.version_info[:2] < (3, 12):\n    import tomli\n", folder="lt312")),
                     "tomli")


@pytest.mark.parametrize(("guard", "required"), [("sys.platform == 'win32'", False), ("sys.platform.startswith('linux')", True),
                                                 ("os.name == 'nt'", False), ("platform.system() != 'Linux'", False),
                                                 ("sys.platform in ('darwin', 'win32')", False),
                                                 ("not sys.platform.startswith('linux')", False)])
def test_a_platform_guard_is_judged_for_the_rows_linux(appended, guard, required):
    path = appended(f"import os, platform, sys\nif {guard}:\n    import win32api\n")
    result = _judged(path)
    assert (_fails_on(result, "win32api") if required else result.status is Status.PASS), result.line()


@pytest.mark.slow
def test_empty_files_under_torch_do_not_make_torch_the_wheels_own(slim, tmp_path):
    # 1.5.1 declares no torch: placeholders under torch/ (empty, or comments alone) ship no torch, and the FAIL stays.
    placeholders = {"torch/__init__.py": b"", "torch/nn/__init__.py": b"# placeholder\n\n", "torch/version.py": b""}
    path = rewrite_wheel(slim("1.5.1"), tmp_path, add=placeholders)
    result = _judged(path)
    assert result.line().startswith("FAIL imports declared: 1 third-party module imported when the package is imported, not in "
                                    "Requires-Dist: torch (imported by executorch/exir/__init__.py line 30"), result.line()


def test_a_top_level_package_with_code_is_the_wheels_own(appended):
    # The rule's other side: a package the wheel really ships (a module with code) needs no declaration.
    path = appended("import transformers\n", add={"transformers/__init__.py": b"VERSION = '0'\n"})
    result = _judged(path)
    assert result.status is Status.PASS and "transformers" not in result.measured["third_party"], result.line()


def test_1_0_0_fails_on_the_llm_export_path_that_executorch_15283_reports():
    # `python -m executorch.extension.llm.export.export_llm` imports extension.llm.export.builder, whose line 36 imports
    # pytorch_tokenizers at module level; 1.0.0 declares neither it nor huggingface_hub (examples' hf_download).
    result = _judged(release_wheel("1.0.0"))
    assert result.status is Status.FAIL and sorted(result.measured["undeclared"]) == ["huggingface_hub", "pytorch_tokenizers"]
    assert ("pytorch_tokenizers (imported by executorch/extension/llm/export/builder.py line 36, reached by import "
            "executorch.extension.llm.export.export_llm -> executorch.examples.models.llama.export_llama_lib -> "
            "executorch.extension.llm.export.builder)") in result.line()


def test_1_0_1_declares_pytorch_tokenizers_which_brings_huggingface_hub():
    result = _judged(release_wheel("1.0.1"))
    assert result.status is Status.PASS, result.line()
    assert result.line().endswith("(huggingface_hub only through a declared dependency: pytorch-tokenizers -> tokenizers -> "
                                  "huggingface-hub)")


@pytest.mark.slow
def test_pytorch_tokenizers_taken_out_of_1_4_1_fails_naming_both(slim, tmp_path):
    path = rewrite_wheel(slim("1.4.1"), tmp_path, metadata=_requires("pytorch-tokenizers"))
    result = _judged(path)
    assert result.status is Status.FAIL and sorted(result.measured["undeclared"]) == ["huggingface_hub", "pytorch_tokenizers"]


# The guard logic under hypothesis: an import wrapped in generated statements, each a guard or not; the scan
# never raises, never counts a guarded import required, and always counts an unguarded one required.
PRELUDE = "import contextlib, os, platform, sys\nfrom contextlib import suppress\nfrom typing import TYPE_CHECKING\n"
# (header lines before the block, lines after it, whether it guards): the block is indented under the last header line.
WRAPPERS = [
    (["if x:"], [], False), (["if x:", "    pass", "else:"], [], False), (["for _ in range(1):"], [], False),
    (["while x:"], [], False), (["class C:"], [], False), (["with open(x):"], [], False),
    (["match x:", "    case 1:"], [], False), (["match x:", "    case [a, *_] if a:"], [], False),
    (["try:"], ["except KeyError:", "    pass"], False), (["try:"], ["except ImportError:", "    raise"], False),
    (["try:"], ["except (ImportError, OSError) as e:", "    raise RuntimeError() from e"], False),
    (["try:"], ["except Exception:", "    sys.exit(1)"], False), (["try:"], ["finally:", "    pass"], False),
    (["try:", "    pass", "finally:"], [], False), (["try:", "    pass", "except KeyError:", "    pass", "else:"], [], False),
    (["with suppress(ValueError):"], [], False), (["if sys.version_info >= (3, 11):"], [], False),
    (["if sys.version_info[:2] < (3, 12):"], [], False), (["if sys.platform.startswith('linux'):"], [], False),
    (["if sys.version_info < (3, 11):", "    pass", "else:"], [], False),
    (["if True:"], [], False),
    (["def f():"], [], True), (["async def f():"], [], True), (["class C:", "    def m(self):"], [], True),
    (["if TYPE_CHECKING:"], [], True), (["if not TYPE_CHECKING:", "    pass", "else:"], [], True),
    (["try:"], ["except ImportError:", "    pass"], True), (["try:"], ["except ModuleNotFoundError:", "    x = None"], True),
    (["try:"], ["except:", "    pass"], True), (["try:"], ["except (OSError, Exception):", "    pass"], True),
    (["try:"], ["except ImportError:", "    if x:", "        raise"], True),
    (["try:"], ["except KeyError:", "    raise", "except BaseException:", "    pass"], True),
    (["try:", "    pass", "except ImportError:"], [], True), (["with contextlib.suppress(ImportError):"], [], True),
    (["with suppress(ValueError, ModuleNotFoundError):"], [], True), (["if sys.version_info < (3, 11):"], [], True),
    (["if sys.version_info >= (3, 11):", "    pass", "else:"], [], True), (["if sys.platform == 'win32':"], [], True),
    (["if os.name == 'nt' or sys.platform == 'darwin':"], [], True), (["if platform.system() == 'Windows':"], [], True),
    (["if False:"], [], True),
]


def _nest(wrappers, statement: str) -> str:
    block = [statement]
    for header, after, _guards in reversed(wrappers):
        indent = " " * (len(header[-1]) - len(header[-1].lstrip()) + 4)
        block = [*header, *(indent + line for line in block), *after]
    return PRELUDE + "\n".join(block) + "\n"


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(WRAPPERS), max_size=5),
       st.sampled_from(["import target", "import target.sub as t", "from target import thing", "from target.sub import a as b, c"]),
       st.sampled_from(["", "x = 1\n", "import numpy\n"]))
def test_a_guarded_import_is_never_required_and_an_unguarded_one_always(wrappers, statement, filler):
    text = _nest(wrappers, statement) + filler
    compile(text, "pkg/__init__.py", "exec")  # the generated module is Python
    third, _reached, broken, _optional = imports.scan({"pkg": "pkg/__init__.py"}, lambda member: text.encode(), {"pkg"},
                                                      ["pkg"], FACTS)
    guarded = any(guards for _header, _after, guards in wrappers)
    assert broken == [] and ("target" in third) is not guarded, text


# truth() against Python itself: wherever it answers, the answer is what the test evaluates to on every CPython 3.11.x
# of the row's Linux (sys, os and platform stood in for); where it cannot tell, it says None.
class _Stand:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


OPERANDS = st.one_of(
    st.sampled_from(["sys.version_info", "sys.version_info[:1]", "sys.version_info[:2]", "sys.version_info[:3]",
                     "sys.version_info[0]", "sys.version_info[1]", "sys.version_info[2]", "sys.version_info[-1]",
                     "sys.version_info.major", "sys.version_info.minor", "sys.version_info.micro",
                     "sys.platform", "os.name", "platform.system()", "platform.machine()"]),
    st.lists(st.integers(0, 13), min_size=0, max_size=4).map(lambda v: repr(tuple(v))),
    st.integers(-1, 13).map(repr),
    st.sampled_from(["'linux'", "'win32'", "'posix'", "'Linux'", "'x86_64'", "('linux', 'darwin')", "['nt']"]),
)
OPS = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not in"])


@st.composite
def _tests(draw, depth=0):
    kind = draw(st.integers(0, 5 if depth < 2 else 2))
    if kind <= 1:
        parts = [draw(OPERANDS)]
        for _ in range(draw(st.integers(1, 2))):
            parts += [draw(OPS), draw(OPERANDS)]
        return " ".join(parts)
    if kind == 2:
        subject, method, argument = draw(st.sampled_from(["sys.platform", "os.name", "platform.system()", "sys.version_info"])), \
            draw(st.sampled_from(["startswith", "endswith"])), draw(st.sampled_from(["'lin'", "'32'", "('dar', 'lin')", "1"]))
        return f"{subject}.{method}({argument})"
    if kind == 3:
        return f"not ({draw(_tests(depth + 1))})"
    return f"({draw(_tests(depth + 1))}) {draw(st.sampled_from(['and', 'or']))} ({draw(_tests(depth + 1))})"


@settings(max_examples=examples(600), deadline=None)
@given(_tests())
def test_a_guard_is_judged_as_python_would_judge_it(test):
    text = f"import os, platform, sys\nif {test}:\n    import taken\nelse:\n    import other\n"
    answer = imports.truth(ast.parse(text).body[1].test, {"os": "os", "platform": "platform", "sys": "sys"}, FACTS)
    # The scan follows the answer: the branch that runs is required, both where it cannot tell.
    third, _reached, broken, _optional = imports.scan({"pkg": "pkg/__init__.py"}, lambda member: text.encode(), {"pkg"},
                                                      ["pkg"], FACTS)
    assert broken == [] and sorted(third) == {True: ["taken"], False: ["other"], None: ["other", "taken"]}[answer]
    if answer is None:
        return
    for micro in range(0, 40):
        stand_ins = {"sys": _Stand(version_info=_VersionInfo((3, 11, micro, "final", 0)), platform="linux"),
                     "os": _Stand(name="posix"), "platform": _Stand(system=lambda: "Linux", machine=lambda: "x86_64")}
        try:
            expected = bool(eval(test, stand_ins))  # noqa: S307 - the generated test, on stand-ins
        except (TypeError, AttributeError):
            continue  # the module would not import at all: neither branch runs, whatever the answer
        assert answer is expected, (test, micro)


class _VersionInfo(tuple):
    """A sys.version_info of another micro version: a tuple with major, minor and micro by name."""
    major = property(lambda self: self[0])
    minor = property(lambda self: self[1])
    micro = property(lambda self: self[2])
