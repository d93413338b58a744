"""smoke.checks.exported: each artifact check passes on real artifacts and fails on a copy with one thing changed;
the parent judges what the child wrote (main's real H200 pair)."""

from __future__ import annotations

import pytest

from smoke.checks.exported import check_data_file, check_delegated, check_weights_in_data_file
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import (
    CPU,
    H200,
    H200_MAIN,
)


def test_delegated_passes_on_the_h200_program():
    result = check_delegated("weighted", H200 / "weighted" / "model.pte", "CudaBackend")
    assert result.status is Status.PASS, result.reason
    assert result.measured["delegates"] == {"forward": ["CudaBackend"]}


def test_delegated_fails_when_another_delegate_ran():
    # An XNNPACK program presented as a CUDA export: the partitioner that ran is not the row's.
    result = check_delegated("weighted", CPU / "weighted" / "model.pte", "CudaBackend")
    assert result.status is Status.FAIL
    assert "has delegates ['XnnpackBackend'], not CudaBackend" in result.reason


def test_delegated_fails_on_a_damaged_program(tmp_path):
    path = tmp_path / "model.pte"
    path.write_bytes((H200 / "weighted" / "model.pte").read_bytes()[:64])
    result = check_delegated("weighted", path, "CudaBackend")
    assert result.status is Status.FAIL and "cannot read the program" in result.reason


def test_data_file_present(copy_artifacts):
    result = check_data_file("weighted", H200 / "weighted", "aoti_cuda_blob.ptd", required=True)
    assert result.status is Status.PASS
    assert result.measured["data_file_bytes"] == 384


@pytest.mark.parametrize("source", [H200 / "weighted", CPU / "weighted"], ids=["cuda", "xnnpack"])
@pytest.mark.parametrize("change", ["remove", "rename", "empty", "truncate"])
def test_data_file_fails_when_missing_renamed_empty_or_truncated(copy_artifacts, source, change):
    folder = copy_artifacts(source)
    name = next(p.name for p in source.iterdir() if p.suffix == ".ptd")
    path = folder / name
    if change == "remove":
        path.unlink()
    elif change == "rename":
        path.rename(folder / "weights.ptd")
    elif change == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(path.read_bytes()[:200])
    result = check_data_file("weighted", folder, name, required=True)
    assert result.status is Status.FAIL, result.reason


def test_data_file_optional_counts_zero(tmp_path):
    result = check_data_file("weightless", CPU / "weightless", "model.ptd", required=False)
    assert result.status is Status.PASS
    assert result.measured["data_file_bytes"] == 0
    assert "counted as 0 B" in result.reason


@pytest.mark.parametrize(
    ("weighted", "weightless", "weight", "status"),
    [
        (384, 256, 128, Status.PASS),  # H200, Linear(8, 4): exactly the weight matrix
        (131_840, 256, 131_072, Status.PASS),  # H200, Linear(256, 128): weight and bias
        (256, 256, 128, Status.FAIL),  # an empty container for the weighted model
        (383, 256, 128, Status.FAIL),  # one byte short
        (528, 0, 128, Status.PASS),  # XNNPACK: no weightless data file, counted as 0 B
    ],
)
def test_weights_in_data_file_is_a_difference(weighted, weightless, weight, status):
    result = check_weights_in_data_file("aoti_cuda_blob.ptd", weighted, weightless, weight)
    assert result.status is status
    assert result.measured["difference_bytes"] == weighted - weightless


def test_weights_rule_line_states_measured_numbers():
    result = check_weights_in_data_file("aoti_cuda_blob.ptd", 384, 256, 128)
    assert result.line() == (
        "PASS weights in the data file: aoti_cuda_blob.ptd is 384 B, 128 B over the weightless model's 256 B, "
        "≥ the 128 B weight matrix"
    )


def test_weights_rule_fails_on_real_files_when_payload_dropped():
    # The real weightless file stands in for a weighted one whose delegate wrote nothing.
    empty = check_data_file("weighted", H200 / "weightless", "aoti_cuda_blob.ptd", required=True)
    base = check_data_file("weightless", H200 / "weightless", "aoti_cuda_blob.ptd", required=True)
    result = check_weights_in_data_file("aoti_cuda_blob.ptd", empty.measured["data_file_bytes"], base.measured["data_file_bytes"], 128)
    assert result.status is Status.FAIL and "< the 128 B weight matrix" in result.reason

CUDA = ROWS["cuda_x86_64"]


# --- the parent judges what the child wrote (smoke.child.ask "exported"): main's real H200 pair ------------

def test_the_parent_judges_mains_real_pair_and_answers_each_data_files_verdict(tmp_path):
    """main's weightless and weighted exports from the H200: delegate, data file and weights PASS, and the answer
    the child waits for says both data files passed."""
    import shutil

    from smoke.checks.exported import judge_exports

    for label in ("weightless", "weighted"):
        shutil.copytree(H200_MAIN / label, tmp_path / label)
    results, answer = judge_exports(CUDA.backend, tmp_path, {"exported": {"weightless": True, "weighted": True},
                                                             "weight_matrix_bytes": 128})
    assert [(r.name, r.status) for r in results] == [
        ("delegate (weightless)", Status.PASS), ("data file (weightless)", Status.PASS),
        ("delegate (weighted)", Status.PASS), ("data file (weighted)", Status.PASS), ("weights in the data file", Status.PASS)]
    assert results[-1].reason == "aoti_cuda_blob.ptd is 384 B, 128 B over the weightless model's 256 B, ≥ the 128 B weight matrix"
    assert answer == {"data_file": {"weightless": "pass", "weighted": "pass"}}
    # The weighted program with the weightless model's data file: the weights key is missing; its run must not be tried.
    shutil.copy(H200_MAIN / "weightless" / "aoti_cuda_blob.ptd", tmp_path / "weighted" / "aoti_cuda_blob.ptd")
    results, answer = judge_exports(CUDA.backend, tmp_path, {"exported": {"weightless": True, "weighted": True},
                                                             "weight_matrix_bytes": 128})
    by_name = {r.name: r for r in results}
    assert by_name["data file (weighted)"].status is Status.FAIL
    assert "lacks the named data its program expects: 2fde66a9" in by_name["data file (weighted)"].reason
    assert by_name["weights in the data file"].status is Status.SKIP
    assert answer == {"data_file": {"weightless": "pass", "weighted": "fail"}}
    # An export that did not happen: its checks are skipped, saying so, and so is its run.
    results, answer = judge_exports(CUDA.backend, tmp_path, {"exported": {"weightless": False, "weighted": False}})
    assert [r.line() for r in results[:2]] == ["SKIP delegate (weightless): not run: export (weightless) did not happen",
                                               "SKIP data file (weightless): not run: export (weightless) did not happen"]
    assert answer == {"data_file": {"weightless": "skip", "weighted": "skip"}}


def test_weights_missing_from_a_1_2_data_file_fail_by_the_difference_not_the_keys(tmp_path):
    """1.2.0 keys the weights by method name (forward_weights_blob), and its weightless model's data file holds that
    key with an empty blob: the weighted program beside it finds every key (data file PASSes, as on the H100 on
    2026-12-05), and the difference measured in the same run fails it. The seed's reason for the difference."""
    import shutil

    shutil.copy(H200 / "weighted" / "model.pte", tmp_path / "model.pte")
    shutil.copy(H200 / "weightless" / CUDA.backend.data_file, tmp_path / CUDA.backend.data_file)
    data = check_data_file("weighted", tmp_path, CUDA.backend.data_file, required=True)
    assert data.status is Status.PASS, data.reason  # the weighted program asks for forward_weights_blob: it is there
    weightless = check_data_file("weightless", H200 / "weightless", CUDA.backend.data_file, required=True)
    result = check_weights_in_data_file(CUDA.backend.data_file, data.measured["data_file_bytes"],
                                        weightless.measured["data_file_bytes"], 128)
    assert result.status is Status.FAIL
    assert result.line().startswith("FAIL weights in the data file: aoti_cuda_blob.ptd is 256 B, 0 B over the weightless")
