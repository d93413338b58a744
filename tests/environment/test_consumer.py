"""The C++ consumer (issue 49), built for real against a copy of the installed 1.5.1 SDK (its include/, lib/ and
share/cmake), and each of its checks shown to FAIL on a mutant: a header another includes removed, the delegate's
library the config would define a target from removed, the config naming a library the wheel lacks, the data file's
payload zeroed, a program that keeps its weights, a config whose targets give no $ORIGIN search path, a second
backend registry loaded with the delegate, the quantized kernels library emptied."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from smoke.backends import Xnnpack
from smoke.checks import cppsdk
from smoke.environment import consumer, loaderenv
from smoke.readers.wheel import read_wheel
from smoke.results import Status

pytestmark = pytest.mark.slow  # each builds a C++ program

ENV = loaderenv.clean(os.environ).env  # the clean loader environment the row gives it


def _installed() -> Path:
    spec = importlib.util.find_spec("executorch")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def _site(tmp_path: Path) -> Path:
    """A site-packages holding a copy of the installed wheel's C++ SDK alone."""
    site = tmp_path / "site"
    for part in ("include", "lib", "share"):
        shutil.copytree(_installed() / part, site / "executorch" / part, symlinks=True)
    return site


@pytest.fixture(scope="session")
def kept(tmp_path_factory) -> Path:
    """The headers' verdicts kept for this session's consumers, every worker's (the shared base folder): a mutant that
    leaves the headers as shipped takes the verdict one build of them kept (consumer.kept_headers)."""
    return tmp_path_factory.getbasetemp().parent / "cpp-headers"


def _built(wheel_x86_64, site: Path, tmp_path: Path, kept: Path | None = None) -> consumer.Built:
    if consumer.find_cmake()[0] is None or consumer.find_compiler() is None:
        pytest.skip(consumer.find_cmake()[1])
    return consumer.Consumer(read_wheel(wheel_x86_64), site, tmp_path / "consumer", "xnnpack", ENV, kept=kept).start().built(600)


def _eager():
    from smoke import tensors
    from smoke.child.reference import answers

    inputs: dict = {}
    found = answers(inputs)
    return ({label: tensors.decode(v) for label, v in found.items()}, {label: tensors.decode(v) for label, v in inputs.items()})


def _runs(built: consumer.Built, folder: Path, tmp_path: Path):
    eager, inputs = _eager()
    given = tmp_path / "inputs.txt"
    consumer.write_inputs(given, inputs["weighted"])
    with_data = cppsdk.judge_with(consumer.run(built.binary, folder / "model.pte", folder / "model.ptd", given, ENV), "model.ptd",
                                  eager["weighted"], built.said)
    without = cppsdk.judge_without(consumer.run(built.binary, folder / "model.pte", None, given, ENV), "model.ptd", eager["weighted"],
                                   with_data, Xnnpack.missing_data(None))
    return with_data, without


def _deployed_and_core(built: consumer.Built, folder: Path, tmp_path: Path):
    eager, inputs = _eager()
    given = tmp_path / "inputs.txt"
    consumer.write_inputs(given, inputs["weighted"])
    assert built.deployed is not None and built.deployed.binary is not None, built.deployed
    deployed = cppsdk.judge_deployed(consumer.run(built.deployed.binary, folder / "model.pte", folder / "model.ptd", given, ENV),
                                     "model.ptd", eager["weighted"], built.deployed.said)
    said = consumer.run(built.binary, folder / "model.pte", folder / "model.ptd", given, ENV)
    return deployed, cppsdk.judge_core(said["loaded"])


def test_the_real_sdk_builds_a_consumer_that_runs_the_weighted_program_with_its_data_file(wheel_x86_64, exported, tmp_path):
    built = _built(wheel_x86_64, _site(tmp_path), tmp_path, kept=tmp_path / "kept")
    assert built.binary is not None, built.said
    assert built.headers is not None and built.headers.earlier is None  # compiled here: nothing was kept before
    assert built.said.startswith("built with CMake 3.")
    assert ("linking executorch::runtime, executorch::kernels_optimized, executorch::kernels_quantized, "
            "executorch::backend_xnnpack") in built.said
    with_data, without = _runs(built, exported["weighted"], tmp_path)
    assert with_data.status is Status.PASS, with_data.reason
    assert without.status is Status.PASS and without.reason.startswith("the load without model.ptd ended the C++ consumer with SIG")
    assert built.headers is not None and built.headers.count > 100 and not built.headers.failures, built.headers
    assert cppsdk.judge_headers(built.headers.count, built.headers.failures, built.headers.unjudged).status is Status.PASS
    deployed, core = _deployed_and_core(built, exported["weighted"], tmp_path)
    assert deployed.status is Status.PASS, deployed.reason
    assert deployed.reason.startswith("loaded with model.ptd by the deployed C++ consumer (the consumer and ")
    assert core.status is Status.PASS and "the backend registry, kernel registry, thread pool in libexecutorch.so, " \
                                          "libexecutorch_threadpool.so" in core.reason, core.reason
    again = consumer.Consumer(read_wheel(wheel_x86_64), tmp_path / "site", tmp_path / "consumer", "xnnpack", ENV,
                              kept=tmp_path / "kept").start().built(600)
    assert again.said.startswith("built in an earlier run of this environment")  # a warm run only runs it
    # Another environment holding the same headers (a copy): its build takes the verdict this one kept, and says so.
    shutil.copytree(tmp_path / "site", tmp_path / "other-site", symlinks=True)
    other = _built(wheel_x86_64, tmp_path / "other-site", tmp_path / "other", kept=tmp_path / "kept")
    assert other.binary is not None and other.headers is not None, other.said
    assert other.headers.earlier is not None and Path(other.headers.earlier).parent == tmp_path / "kept"
    line = cppsdk.judge_headers(other.headers.count, other.headers.failures, other.headers.unjudged, other.headers.earlier)
    assert line.status is Status.PASS and line.reason.startswith(f"{built.headers.count} headers under executorch/include compile alone")
    assert line.reason.endswith(f"; the verdict of an earlier run of the same headers and compiler, kept in {other.headers.earlier}")


def test_a_header_another_includes_removed_fails_the_build_naming_it(wheel_x86_64, tmp_path):
    site = _site(tmp_path)
    (site / "executorch/include/executorch/runtime/core/error.h").unlink()
    built = _built(wheel_x86_64, site, tmp_path)
    assert built.binary is None and built.failed
    assert built.said.startswith("the consumer's build against the installed package config "
                                 "(runtime kernels_optimized kernels_quantized backend_xnnpack) exited")
    assert "error.h" in built.said
    assert built.headers is not None
    headers = cppsdk.judge_headers(built.headers.count, built.headers.failures, built.headers.unjudged)
    assert headers.status is Status.FAIL and "executorch/runtime/core/error.h: No such file or directory" in headers.reason


def test_the_delegates_library_removed_fails_the_configure_naming_the_component(wheel_x86_64, tmp_path, kept):
    site = _site(tmp_path)
    (site / "executorch/lib/libexecutorch_backend_xnnpack.so").unlink()
    built = _built(wheel_x86_64, site, tmp_path, kept=kept)
    assert built.binary is None and built.failed
    assert built.said.startswith("the consumer's configure against the installed package config") and "backend_xnnpack" in built.said


def test_a_config_naming_a_library_the_wheel_lacks_fails(wheel_x86_64, tmp_path, kept):
    site = _site(tmp_path)
    (site / "executorch/lib/libexecutorch_kernels_optimized.so").rename(site / "executorch/lib/libexecutorch_kernels_opt.so")
    built = _built(wheel_x86_64, site, tmp_path, kept=kept)
    assert built.binary is None and built.failed and "kernels_optimized" in built.said


def test_a_zeroed_data_file_and_weights_in_the_program_fail_their_checks(wheel_x86_64, exported, tmp_path, kept):
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from smoke.artifacts import read_data_file
    from smoke.child.models import models

    built = _built(wheel_x86_64, _site(tmp_path), tmp_path, kept=kept)
    zeroed = tmp_path / "zeroed"
    shutil.copytree(exported["weighted"], zeroed)
    base = read_data_file(zeroed / "model.ptd").segment_base_offset
    raw = bytearray((zeroed / "model.ptd").read_bytes())
    raw[base:] = bytes(len(raw) - base)
    (zeroed / "model.ptd").write_bytes(raw)
    with_data, _ = _runs(built, zeroed, tmp_path)
    assert with_data.status is Status.FAIL and "output differs from eager" in with_data.reason

    baked = tmp_path / "baked"
    baked.mkdir()
    model, example = models()["weighted"]
    program = to_edge_transform_and_lower(torch.export.export(model, example), partitioner=[XnnpackPartitioner()]).to_executorch()
    (baked / "model.pte").write_bytes(program.buffer)
    (baked / "model.ptd").write_bytes((exported["weighted"] / "model.ptd").read_bytes())
    _, without = _runs(built, baked, tmp_path)
    assert without.status is Status.FAIL and without.reason.endswith("the weights are not coming from the data file")


def test_a_config_whose_targets_give_no_origin_search_path_fails_the_deployed_run(wheel_x86_64, exported, tmp_path, kept):
    """The installed consumer still runs (its absolute folder finds the runtime); its copy cannot be deployed."""
    site = _site(tmp_path)
    config = site / "executorch/share/cmake/executorch-config.cmake"
    text = config.read_text()
    assert text.count('"LINKER:-rpath,$ORIGIN"') == 2
    config.write_text(text.replace('"LINKER:-rpath,$ORIGIN/../lib"', "").replace('"LINKER:-rpath,$ORIGIN"', ""))
    built = _built(wheel_x86_64, site, tmp_path, kept=kept)
    assert built.binary is not None, built.said
    with_data, _ = _runs(built, exported["weighted"], tmp_path)
    assert with_data.status is Status.PASS, with_data.reason
    assert built.deployed is not None and built.deployed.binary is None and built.deployed.failed
    assert built.deployed.said.startswith("the consumer's RUNPATH (") and "has no $ORIGIN entry, so it cannot be deployed" \
        in built.deployed.said


def test_a_second_backend_registry_loaded_with_the_delegate_fails_one_runtime_core_in_the_cpp_process(wheel_x86_64, exported,
                                                                                                      tmp_path, patchelf, kept):
    """A library defining the backend registry's functions, needed by the shipped XNNPACK delegate's library."""
    import subprocess

    site = _site(tmp_path)
    lib = site / "executorch/lib"
    source = tmp_path / "second.cpp"
    source.write_text("namespace executorch { namespace runtime { struct Backend;\n"
                      "int register_backend(const Backend&) { return 0; }\n"
                      "unsigned long get_num_registered_backends() { return 0; } } }\n")
    compiler = consumer.find_compiler()
    assert compiler is not None
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(lib / "libsecond_registry.so"), str(source)], check=True)
    subprocess.run([patchelf, "--add-needed", "libsecond_registry.so", str(lib / "libexecutorch_backend_xnnpack.so")], check=True)
    built = _built(wheel_x86_64, site, tmp_path, kept=kept)
    assert built.binary is not None, built.said
    _, core = _deployed_and_core(built, exported["weighted"], tmp_path)
    assert core.status is Status.FAIL
    assert core.reason.startswith("the C++ consumer's process holds two copies of the runtime's state: the backend registry: ")
    assert "libexecutorch.so and libsecond_registry.so" in core.reason


def _quantized(tmp_path: Path):
    """``quantized kernels``' program, exported here as the child exports it, with eager's answer and its inputs."""
    from smoke import tensors
    from smoke.child.portable import check_quantized, quantized_model

    ran = check_quantized(tmp_path / "quantized")
    assert "outputs" in ran, ran
    model, example = quantized_model()
    given = tmp_path / "quantized-inputs.txt"
    consumer.write_inputs(given, tensors.decode(tensors.encode_all(list(example))))
    return tmp_path / "quantized" / "model.pte", given, tensors.decode(tensors.encode_all(model(*example)))


def test_the_quantized_kernels_component_runs_the_quantized_program_and_an_emptied_one_fails(wheel_x86_64, tmp_path, kept):
    from tests.helpers import empty_library

    pte, given, eager = _quantized(tmp_path)
    built = _built(wheel_x86_64, _site(tmp_path / "real"), tmp_path / "real", kept=kept)
    assert "executorch::kernels_quantized" in built.said
    good = cppsdk.judge_quantized(consumer.run(built.binary, pte, None, given, ENV), eager)
    assert good.status is Status.PASS, good.reason
    assert good.reason.startswith("loaded with no delegate by a C++ consumer (executorch::kernels_quantized linked")

    site = _site(tmp_path / "emptied")
    library = site / "executorch/lib/libexecutorch_kernels_quantized.so"
    library.write_bytes(empty_library(library.name, tmp_path / "cc"))
    emptied = _built(wheel_x86_64, site, tmp_path / "emptied", kept=kept)
    assert emptied.binary is not None, emptied.said  # it links: the library is there, with nothing in it
    bad = cppsdk.judge_quantized(consumer.run(emptied.binary, pte, None, given, ENV), eager)
    assert bad.status is Status.FAIL
    assert bad.reason.startswith("the C++ consumer (executorch::kernels_quantized linked, Module(quantized model.pte)) at "
                                 "method load: Module::load_method(forward) returned error 0x14 [OperatorMissing (0x14)]"), bad.reason


def test_a_header_the_wheel_lacks_on_the_callers_include_path_still_fails_the_build_and_the_headers(wheel_x86_64, tmp_path):
    """Issue 58: CPATH (and CPLUS_INCLUDE_PATH, CXXFLAGS, ...) reached the headers' compiles and the consumer's build, so
    a wheel missing a header another includes PASSed both where the caller's include path held a copy of it."""
    site = _site(tmp_path)
    header = "executorch/runtime/core/error.h"
    copies = tmp_path / "caller-include"
    (copies / header).parent.mkdir(parents=True)
    shutil.copy(site / "executorch/include" / header, copies / header)
    (site / "executorch/include" / header).unlink()
    if consumer.find_cmake()[0] is None or consumer.find_compiler() is None:
        pytest.skip(consumer.find_cmake()[1])
    env = {**ENV, "CPATH": str(copies), "CPLUS_INCLUDE_PATH": str(copies), "CXXFLAGS": f"-I{copies}"}
    made = consumer.Consumer(read_wheel(wheel_x86_64), site, tmp_path / "consumer", "xnnpack", env, kept=None)
    assert made.cleared == ("CPATH", "CPLUS_INCLUDE_PATH", "CXXFLAGS")
    built = made.start().built(600)
    assert built.binary is None and built.failed and "error.h" in built.said, built.said
    assert built.headers is not None
    headers = cppsdk.judge_headers(built.headers.count, built.headers.failures, built.headers.unjudged)
    assert headers.status is Status.FAIL and "executorch/runtime/core/error.h: No such file or directory" in headers.reason


def test_the_wheels_own_scripts_on_the_environments_path_are_not_the_builds_tools(wheel_x86_64, tmp_path):
    """Issue 58: the build inherited a PATH starting with the environment's bin, where a wheel's .data/scripts land;
    CMake's Makefile generator finds make there by name (GCC, as and ld), so the wheel's script built the consumer."""
    if consumer.find_cmake()[0] is None or consumer.find_compiler() is None:
        pytest.skip(consumer.find_cmake()[1])
    venv = tmp_path / "env"
    site = _site(venv / "lib" / "python3.11")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin").mkdir()
    marker = tmp_path / "the-wheels-tool-ran"
    for tool in ("make", "gmake", "ld", "as", "c++", "cc"):
        (venv / "bin" / tool).write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\nexit 1\n")
        (venv / "bin" / tool).chmod(0o755)
    env = {**ENV, "PATH": f"{venv / 'bin'}:{ENV.get('PATH', os.defpath)}"}
    built = consumer.Consumer(read_wheel(wheel_x86_64), site, tmp_path / "consumer", "xnnpack", env,
                              kept=None).start().built(600)
    assert not marker.exists(), marker.read_text()
    assert built.binary is not None, built.said
