"""Each artifact check passes on real artifacts and fails on a copy with one thing changed."""

from __future__ import annotations

import pytest

from smoke.checks.exported import check_data_file, check_delegated, check_weights_in_data_file
from smoke.results import Status
from tests.helpers import CPU, H200


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
