"""Eager's answers computed where the wheel's code does not run (issue 48): ``smoke.environment.reference`` starts
``smoke.child.reference`` isolated and without ``site``; its answers are eager's, and a process that loaded a file of
the wheel is refused, naming it."""

from __future__ import annotations

import dataclasses
import os
import sys
import sysconfig
from pathlib import Path

import pytest

from smoke import tensors
from smoke.environment import loaderenv, reference
from smoke.readers.wheel import read_wheel
from tests.helpers import REPO

pytestmark = pytest.mark.slow  # each starts an interpreter that imports torch


def _env(prefix: Path) -> dict[str, str]:
    return loaderenv.for_environment(prefix / "bin" / "python", REPO).env


def _fake_environment(tmp_path: Path, pth: str) -> Path:
    """An environment folder whose interpreter is this one and whose site-packages holds one ``.pth`` file: ``pth``
    (torch comes through its path line, as with --torch-from)."""
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    # A virtual environment's (``site.venv`` reads it): with ``site``, its site-packages' .pth files would run.
    (prefix / "pyvenv.cfg").write_text(f"home = {Path(os.path.realpath(sys.executable)).parent}\n"
                                       "include-system-site-packages = false\n")
    site = Path(sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["purelib"])
    site.mkdir(parents=True)
    (site / "zz-torch.pth").write_text(pth)
    return prefix


def _ours(python: Path, wheel) -> reference.Answers:
    eager = reference.start(python, REPO, _env(python.parent.parent), wheel)
    try:
        return eager.answers(300)
    finally:
        eager.end()


def test_eager_answers_are_the_models_own_and_no_pth_import_line_runs(declared_slim, tmp_path):
    torch = pytest.importorskip("torch")
    from smoke.child import xnnpack_quantized
    from smoke.child.models import models
    from smoke.child.portable import portable_model, quantized_model

    torch_site = str(Path(torch.__file__).parent.parent)
    # The import line would end the process at start-up with `site`; the reference never runs it.
    prefix = _fake_environment(tmp_path, f"import os; os._exit(3)\n{torch_site}\n")
    found = _ours(prefix / "bin" / "python", read_wheel(declared_slim))
    assert found.error == ""
    with torch.no_grad():
        expected = {label: tensors.decode(tensors.encode_all(model(*example))) for label, (model, example) in models().items()}
        model, example = portable_model()
        expected["portable"] = tensors.decode(tensors.encode_all(model(*example)))
        model, example = quantized_model()
        expected["quantized"] = tensors.decode(tensors.encode_all(model(*example)))
    # The PT2E-quantized model, through torchao's copy of the XNNPACK quantizer (torchao is beside torch here).
    answer, _inputs, step = xnnpack_quantized.answer()
    expected[xnnpack_quantized.LABEL] = tensors.decode(tensors.encode_all(answer))
    assert found.outputs == expected and found.unbuilt == {}
    assert found.steps == {xnnpack_quantized.LABEL: step} and 0 < step < 1
    assert found.inputs is not None and set(found.inputs) == {"weightless", "weighted", "quantized", xnnpack_quantized.LABEL}


def test_a_process_that_loads_a_file_of_the_wheel_is_refused_naming_it(declared_slim, tmp_path):
    torch = pytest.importorskip("torch")
    torch_site = str(Path(torch.__file__).parent.parent)
    prefix = _fake_environment(tmp_path, f"{torch_site}\n")
    # A wheel that ships torch/__init__.py (it would replace torch's own when installed): what the reference imported
    # is a file the wheel installs.
    wheel = dataclasses.replace(read_wheel(declared_slim), files=(*read_wheel(declared_slim).files, "torch/__init__.py"))
    found = _ours(prefix / "bin" / "python", wheel)
    assert found.outputs == {}
    assert found.error.startswith("importing torch alone loaded 1 of the wheel's own files (")
    assert "torch/__init__.py" in found.error and found.error.endswith("eager's answer cannot be computed apart from the wheel's code")


def test_a_reference_that_cannot_import_torch_says_why(declared_slim, tmp_path):
    prefix = _fake_environment(tmp_path, "# no torch here\n")
    found = _ours(prefix / "bin" / "python", read_wheel(declared_slim))
    assert found.outputs == {}
    assert found.error.startswith("the process computing eager's answer apart from the wheel's code exited 1: ")
    assert "No module named 'torch'" in found.error


def test_installed_files_follow_the_wheels_schemes(declared_slim):
    wheel = dataclasses.replace(read_wheel(declared_slim), files=(
        "executorch/__init__.py", "executorch-1.5.1.data/purelib/a/b.py", "executorch-1.5.1.data/data/lib/x.so",
        "executorch-1.5.1.data/scripts/tool"))
    in_site, in_prefix = reference.installed_files(wheel)
    assert in_site == {"executorch/__init__.py", "a/b.py"} and in_prefix == {"lib/x.so"}
    said = {"sites": ["/e/lib/python3.11/site-packages"], "prefix": "/e",
            "files": ["/e/lib/python3.11/site-packages/a/b.py", "/e/lib/x.so", "/e/lib/python3.11/site-packages/torch/x.py"]}
    assert reference.wheels_files_among(said, wheel) == ["/e/lib/python3.11/site-packages/a/b.py", "/e/lib/x.so"]


def test_the_environments_site_packages_are_found_whatever_the_interpreters_default_scheme(tmp_path, monkeypatch):
    """On the GPU machine the base interpreter is Ubuntu's python3.12, whose default scheme (posix_local) puts
    site-packages at local/lib/python3.12/dist-packages; without `site`, sysconfig does not know it runs in a virtual
    environment, so the default scheme found no site-packages and the reference no torch (2026-12-06, H100)."""
    import sysconfig as real

    from smoke.child import reference as ref

    site = tmp_path / "env" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    paths = real.get_paths

    def debian_like(scheme=None, vars=None, expand=True):  # the default scheme is not a venv's layout
        return paths(scheme or "posix_home", vars, expand)

    monkeypatch.setattr(real, "get_paths", debian_like)
    assert str(site) in ref.site_folders(str(tmp_path / "env"))


def test_a_torchao_without_the_quantizers_copy_leaves_that_answer_unbuilt_saying_why(monkeypatch):
    """The one answer that needs torchao's copy of the XNNPACK quantizer is left out, with why; the others stand, and
    the parent then says SKIP for that check alone (tests/checks/test_outputs.py)."""
    pytest.importorskip("torch")
    from smoke.child import reference as child_reference
    from smoke.child import xnnpack_quantized

    monkeypatch.setattr(xnnpack_quantized, "REFERENCE_QUANTIZER_MODULE", "torchao.testing.pt2e._no_such_quantizer")
    unbuilt: dict[str, str] = {}
    steps: dict[str, float] = {}
    found = child_reference.answers({}, unbuilt, steps)
    assert xnnpack_quantized.LABEL not in found and steps == {} and {"weighted", "portable", "quantized"} <= set(found)
    assert unbuilt[xnnpack_quantized.LABEL] == (
        "the quantized model's eager answer cannot be computed apart from the wheel here (torchao's "
        "torchao.testing.pt2e._no_such_quantizer): ModuleNotFoundError: No module named 'torchao.testing.pt2e._no_such_quantizer'")
