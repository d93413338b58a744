"""The controls (issue 56): each PASSes only with its twin passed, says where and how it failed by the release's
rule, and FAILs where the rule says the release must fail otherwise (``smoke.checks.controls``)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from smoke import tensors
from smoke.backends import Cuda, Xnnpack
from smoke.checks import controls
from smoke.results import Status, failed, passed
from smoke.stages import CORRUPT, NEGATIVE
from tests.helpers import DATA

EAGER = tensors.decode([{"shape": [2], "dtype": "torch.float32", "values": [1.0, 2.0]}])
OTHER = {"outputs": [{"shape": [2], "dtype": "torch.float32", "values": [0.0, 0.5]}]}
SAME = {"outputs": [{"shape": [2], "dtype": "torch.float32", "values": [1.0, 2.0]}]}
TWIN = passed("run with data file (weighted)", "matched eager")
FIXED, OLD = Cuda.missing_data(Version("1.6.0")), Cuda.missing_data(Version("1.2.0+cu130"))


@pytest.mark.parametrize(("version", "has"), [
    ("1.2.0+cu130", False), ("1.4.1", False), ("1.5.1", False), ("1.5.0a0+git1234", False),
    ("1.5.0.dev20260822+cu130", False), ("1.5.0.dev20260901+cu130", True), ("1.6.0.dev20261201+cu130", True),
    ("1.6.0", True), ("1.6.0rc1", False), ("2.0.0", True),
])
def test_which_releases_carry_the_fix_for_a_missing_blob(version, has):
    from smoke.backends.cuda import has_fix_22311

    assert has_fix_22311(Version(version)) is has


def judge(said, rule=OLD, twin=TWIN):
    return controls.judge_missing(NEGATIVE.name, said, twin, rule, "aoti_cuda_blob.ptd", EAGER)


def test_a_release_with_the_fix_must_fail_the_load_with_not_found():
    ok = judge({"stage": "method load", "error": "Failed to load method forward, error: 0x20"}, FIXED)
    assert ok.status is Status.PASS and "NotFound (0x20) at method load" in ok.reason
    crash = judge({"stage": "execute", "signal": "SIGSEGV"}, FIXED)
    assert crash.status is Status.FAIL and "executorch#22311" in crash.reason and "SIGSEGV at execute" in crash.reason
    late = judge({"stage": "execute", "error": "Failed to execute method forward, error: 0x1"}, FIXED)
    assert late.status is Status.FAIL and "then failed at execute" in late.reason and "executorch#22311" in late.reason
    ran = judge(OTHER, FIXED)
    assert ran.status is Status.FAIL and "must fail the load with NotFound" in ran.reason
    other = judge({"stage": "method load", "error": "Failed to load method forward, error: 0x14"}, FIXED)
    assert other.status is Status.WARN and "where NotFound was expected" in other.reason


def test_an_older_release_crashing_at_first_execute_is_a_warning_naming_the_fix():
    crash = judge({"stage": "execute", "signal": "SIGABRT"}, OLD)
    assert crash.status is Status.WARN and "executorch#22311" in crash.reason and "SIGABRT at execute" in crash.reason
    error = judge({"stage": "execute", "error": "Failed to execute method forward, error: 0x1"}, OLD)
    assert error.status is Status.PASS and "Internal (0x1) at execute" in error.reason
    assert judge(SAME, OLD).status is Status.FAIL


def test_a_control_whose_twin_failed_is_a_skip_naming_the_twin():
    twin = failed("run with data file (weighted)", "loading or running raised RuntimeError: error: 0x14")
    for said in ({"stage": "method load", "error": "error: 0x14"}, {"signal": "SIGSEGV"}, OTHER):
        found = judge(said, OLD, twin)
        assert found.status is Status.SKIP, found.line()
        assert "run with data file (weighted) FAILed: loading or running raised" in found.reason
    assert judge({"signal": "SIGSEGV"}, Xnnpack.missing_data(None), None).status is Status.SKIP


def corrupt(truncated, cut, rule=Xnnpack.missing_data(None), twin=TWIN):
    return controls.judge_corrupt({"truncated": truncated, "cut": cut}, twin, rule, "model.ptd", EAGER)


def test_a_corrupt_data_file_must_end_in_a_clean_error():
    clean = {"stage": "program load", "error": "Failed to load data map from x, error: 0x:24"}
    good = corrupt(clean, clean)
    assert good.status is Status.PASS and good.reason.count("InvalidExternalData (0x24) at program load") == 2
    eager = corrupt(clean, SAME)
    assert eager.status is Status.FAIL and "cut (its named data cut short, the header intact): loaded and ran, giving eager's" in eager.reason
    assert corrupt(OTHER, clean).status is Status.FAIL
    crash = {"stage": "method load", "signal": "SIGSEGV"}
    assert corrupt(clean, crash).status is Status.FAIL  # XNNPACK: the data map refuses it before any delegate reads it
    assert corrupt(clean, crash, FIXED).status is Status.FAIL
    assert corrupt(clean, crash, OLD).status is Status.WARN
    assert corrupt(clean, clean, twin=failed("run with data file (weighted)", "x")).status is Status.SKIP
    assert corrupt({"failed": "no copy"}, clean).status is Status.FAIL
    assert controls.judge_corrupt({"skipped": "not run: why"}, TWIN, OLD, "model.ptd", EAGER).name == CORRUPT.name


def test_the_damaged_copies_of_a_real_data_file_are_what_they_say(tmp_path):
    """main's CUDA export (H200): the truncated copy is cut inside its table, the cut copy keeps the header and table
    and ends inside its weights blob; the gate's own reader refuses both."""
    from smoke.artifacts import read_data_file
    from smoke.readers.tables import ArtifactError

    ptd = DATA / "h200-executorch-main" / "weighted" / "aoti_cuda_blob.ptd"
    read = read_data_file(ptd)
    made = controls.write_damaged(ptd, tmp_path)
    truncated, cut = (tmp_path / "truncated" / ptd.name).read_bytes(), (tmp_path / "cut" / ptd.name).read_bytes()
    assert made == {"truncated": str(tmp_path / "truncated" / ptd.name), "cut": str(tmp_path / "cut" / ptd.name)}
    assert read.flatbuffer_offset < len(truncated) < read.flatbuffer_offset + read.flatbuffer_size
    blob = max(read.blobs, key=lambda b: b.size)
    assert len(cut) == blob.start + blob.size // 2 and cut[:len(truncated)] == truncated
    for path in made.values():
        with pytest.raises(ArtifactError):
            read_data_file(path)
    assert controls.write_damaged(tmp_path / "truncated" / ptd.name, tmp_path / "again") == {}


def test_a_runtime_error_is_named_and_a_missing_operator_names_what_registers_it():
    assert controls.error_name("Failed to execute method forward, error: 0x14") == "OperatorMissing (0x14)"
    assert controls.error_name("Failed to load data map from x, error: 0x:24") == "InvalidExternalData (0x24)"
    assert controls.error_name("no code here") == ""
    said = controls.missing_operators(["et_copy::_d2h_copy.out", "et_copy::_h2d_copy.out"], {"runtime", "backend_cuda"})
    assert said == ("the program leaves 2 operators outside its delegates: et_copy::_d2h_copy.out, et_copy::_h2d_copy.out "
                    "(registered by executorch::kernels_optimized, libexecutorch_kernels_optimized.so, which the wheel does not "
                    "ship); the wheel's C++ SDK cannot run a program its own exporter writes: upstream's wheel ships "
                    "executorch::kernels_optimized (setup.py, with the pybind preset's EXECUTORCH_BUILD_KERNELS_OPTIMIZED=ON)")
    assert controls.missing_operators(["my_ops::mul3.out"]).endswith("my_ops::mul3.out (no library of the wheel's known "
                                                                      "to register them)")
