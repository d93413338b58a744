"""The .pte/.ptd reader on real programs and data files, and on damaged copies of them."""

from __future__ import annotations

import json

import pytest

from smoke import artifacts
from smoke.artifacts import ArtifactError, read_data_file, read_program
from tests.helpers import CPU, H200, H200_MAIN


@pytest.mark.parametrize(
    ("path", "delegates", "named_data"),
    [
        (H200 / "weightless" / "model.pte", ["CudaBackend"], ["forward_so_blob"]),
        (H200 / "weighted" / "model.pte", ["CudaBackend"], ["forward_so_blob"]),
        (CPU / "weighted" / "model.pte", ["XnnpackBackend"], []),
    ],
)
def test_program_delegates_and_no_operators_left(path, delegates, named_data):
    program = read_program(path)
    assert [plan.name for plan in program.plans] == ["forward"]
    assert list(program.plans[0].delegate_ids) == delegates
    assert program.plans[0].operators == ()
    assert list(program.named_data_keys) == named_data
    assert program.size == path.stat().st_size


@pytest.mark.parametrize(
    ("path", "size", "blobs", "segment_data"),
    [
        (H200 / "weightless" / "aoti_cuda_blob.ptd", 256, {"forward_weights_blob": 0}, 0),
        (H200 / "weighted" / "aoti_cuda_blob.ptd", 384, {"forward_weights_blob": 128}, 128),
    ],
)
def test_cuda_data_file_header_and_payload(path, size, blobs, segment_data):
    data = read_data_file(path)
    assert data.size == size
    assert {b.key: b.size for b in data.blobs} == blobs
    assert data.header_length == 40
    assert data.segment_base_offset == 256
    assert data.segment_data_size == segment_data


def test_weighted_payload_is_not_zero_and_zeroed_copy_is(tmp_path):
    original = (H200 / "weighted" / "aoti_cuda_blob.ptd").read_bytes()
    assert not read_data_file(H200 / "weighted" / "aoti_cuda_blob.ptd").blobs[0].all_zero
    zeroed = tmp_path / "aoti_cuda_blob.ptd"
    zeroed.write_bytes(original[:256] + bytes(len(original) - 256))
    assert read_data_file(zeroed).blobs[0].all_zero


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:6], "too short"),
        (lambda b: b[:4] + b"XX01" + b[8:], "file identifier"),
        (lambda b: b[:8] + b"ZZ01" + b[12:], "header magic"),
        (lambda b: b[:300], "the file is 300 B"),
        (lambda b: (10_000).to_bytes(4, "little") + b[4:], "points past the end"),
    ],
)
def test_damaged_data_file_is_a_clear_error(tmp_path, damage, message):
    path = tmp_path / "aoti_cuda_blob.ptd"
    path.write_bytes(damage((H200 / "weighted" / "aoti_cuda_blob.ptd").read_bytes()))
    with pytest.raises(ArtifactError, match=message):
        read_data_file(path)


def test_truncated_program_is_a_clear_error(tmp_path):
    path = tmp_path / "model.pte"
    path.write_bytes((H200 / "weighted" / "model.pte").read_bytes()[:100])
    with pytest.raises(ArtifactError):
        read_program(path)


def test_command_line_prints_what_the_gate_judges(capsys):
    code = artifacts.main([str(H200 / "weighted" / "model.pte"), str(H200 / "weighted" / "aoti_cuda_blob.ptd")])
    out = capsys.readouterr().out
    assert code == 0
    assert "plan 'forward': delegates ['CudaBackend'], operators left []" in out
    assert "'forward_weights_blob': 128 B" in out
    assert "segment base offset 256, segment data size 128" in out


def test_command_line_error_is_one_line_not_a_traceback(tmp_path, capsys):
    bad = tmp_path / "x.ptd"
    bad.write_bytes(b"garbage!")
    assert artifacts.main([str(bad)]) == 2  # a file that cannot be read as a .pte or .ptd: exit 2, as the gate's ERROR
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_json_output_holds_what_the_gate_judged(capsys):
    paths = [H200 / "weightless" / "model.pte", H200 / "weightless" / "aoti_cuda_blob.ptd",
             H200 / "weighted" / "aoti_cuda_blob.ptd", CPU / "weighted" / "model.pte", CPU / "weighted" / "model.ptd"]
    assert artifacts.main([*map(str, paths), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in records] == ["program", "datafile", "datafile", "program", "datafile", "pairing", "pairing"]
    cuda_program, weightless, weighted, cpu_program, cpu_data, *pairings = records
    assert [p["missing"] for p in pairings] == [[], []]  # each program with the data file of its own folder
    assert cuda_program["plans"] == [{"name": "forward", "delegate_ids": ["CudaBackend"], "operators": [], "target_devices": []}]
    assert weightless["blobs"] == [{"key": "forward_weights_blob", "size": 0, "all_zero": True}]
    assert weighted["blobs"] == [{"key": "forward_weights_blob", "size": 128, "all_zero": False}]
    assert weighted["segment_data_size"] == 128 and weighted["header_length"] == 40
    assert cpu_program["plans"][0]["delegate_ids"] == ["XnnpackBackend"]
    assert cpu_data["size"] == (CPU / "weighted" / "model.ptd").stat().st_size
    assert sorted(b["size"] for b in cpu_data["blobs"]) == [16, 128]  # bias and weight of nn.Linear(8, 4)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:4] + b"XX12" + b[8:], "has file identifier b'XX12', expected b'ET12'"),
        (lambda b: (50_000_000).to_bytes(4, "little") + b[4:], "points past the end"),
        (lambda b: b[:2000], "segment 1 ends at byte 2318608, the file is 2000 B (truncated?)"),
    ],
)
def test_damaged_program_is_a_clear_error_on_the_command_line(tmp_path, capsys, damage, message):
    path = tmp_path / "model.pte"
    path.write_bytes(damage((H200 / "weighted" / "model.pte").read_bytes()))
    assert artifacts.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (H200 / "weightless" / "model.pte", ("forward_so_blob", "forward_weights_blob")),
        # main: the keys the delegate's processed bytes name, "<so key>\n<weights key>" (aoti_backend.py)
        (H200_MAIN / "weighted" / "model.pte", ("b7dda8b2db45e08af0da7fc3f91ed897b3fab5e3a72c7fd0673f62b9000a2da9_so_blob",
                                                "2fde66a9f2012fda28059b58e6b15d99c8e0829e2113e99d2e25d5bad3d852b3_weights_blob")),
        # main's weightless program: its weights key is the sha256 of no bytes (an empty blob)
        (H200_MAIN / "weightless" / "model.pte", ("e6c0894d4a18e0b86d20167e3865fbd9fe4a714db456423553d3aa94643896ae_so_blob",
                                                  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855_weights_blob")),
        (CPU / "weightless" / "model.pte", ()),
        (CPU / "weighted" / "model.pte", ("7bd1336255a603d084c99a85e4649ae413a650310db35d2868cab6e6905b8850",
                                          "abe91884182b2a066291092b80ecb9bf0224387425044e433e0cfe4cd16befa3")),
    ],
)
def test_the_keys_a_program_expects_are_read_from_its_delegates(path, expected):
    assert read_program(path).expected_keys == expected


def test_mains_program_and_data_file_are_read_with_every_key_present(capsys):
    """The CUDA build of main on the H200: the data file holds the weights key, the program the shared object's."""
    assert artifacts.main([str(H200_MAIN / "weightless"), str(H200_MAIN / "weighted")]) == 0
    out = capsys.readouterr().out
    for label in ("weightless", "weighted"):
        assert f"{label}/model.pte with aoti_cuda_blob.ptd: every key it expects is present (2)" in out
    assert ("plan 'forward': delegates ['CudaBackend'] (target device cuda:0), operators left "
            "['et_copy::_h2d_copy.out', 'et_copy::_d2h_copy.out']") in out


def test_a_program_with_its_data_file_is_matched_key_by_key(tmp_path, capsys):
    assert artifacts.main([str(CPU / "weighted" / "model.pte"), str(CPU / "weighted" / "model.ptd")]) == 0
    assert "model.pte with model.ptd: every key it expects is present (2)" in capsys.readouterr().out
    # The CUDA program beside the XNNPACK data file: the weights key is missing, and the exit says so.
    (tmp_path / "model.pte").write_bytes((H200 / "weighted" / "model.pte").read_bytes())
    (tmp_path / "model.ptd").write_bytes((CPU / "weighted" / "model.ptd").read_bytes())
    assert artifacts.main([str(tmp_path / "model.pte"), str(tmp_path / "model.ptd"), "--json"]) == 1
    pairing = json.loads(capsys.readouterr().out)[-1]
    assert pairing["kind"] == "pairing" and pairing["missing"] == ["forward_weights_blob"]


DECLINED = CPU / "declined" / "model.pte"  # x + y through 1.5.1's exporter with no partitioner: one empty segment, no eh00


def test_a_program_with_only_empty_segments_and_no_extended_header_is_read():
    """The runtime reads it (program.cpp: no header, the program is the whole file; it loads and
    matches eager): the reader must too, and the delegate check then fails it for what is wrong."""
    from smoke.checks.exported import check_delegated

    data = DECLINED.read_bytes()
    assert data[8:12] != b"eh00"
    program = read_program(DECLINED)
    assert program.plans[0].delegate_ids == () and program.plans[0].operators == ("aten::add.out",)
    result = check_delegated("weightless", DECLINED, "XnnpackBackend")
    assert result.status.value == "fail" and "has delegates [], not XnnpackBackend" in result.reason
    assert "leaves 1 operators outside the delegate: aten::add.out" in result.reason


def test_a_segment_with_data_and_no_extended_header_is_refused(tmp_path):
    """The weighted CPU program with its eh00 header wiped: its segment's bytes have no place."""
    data = bytearray((CPU / "weighted" / "model.pte").read_bytes())
    assert data[8:12] == b"eh00"
    data[8:12] = b"\0\0\0\0"
    path = tmp_path / "model.pte"
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=r"names 1 segments with data but has no b'eh00' header to place them"):
        read_program(path)
