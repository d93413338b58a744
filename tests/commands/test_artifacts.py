"""``python -m smoke artifacts`` and ``python -m smoke.artifacts`` (smoke.commands.artifacts): what the gate read from real programs and data files,
and what is not a program or data file: a device, a FIFO, a directory, an 8 GB sparse file, truncated real
.pte/.ptd, a PNG, a wheel, an empty file, a header that claims too much. Each is one ERROR line and exit 2,
quickly, in bounded memory, with no traceback, however the module is started.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smoke import artifacts
from smoke.cli import artifacts_main
from smoke.readers.tables import ArtifactError
from tests.helpers import CPU, H200, H200_MAIN, REPO, WHEEL_CACHE


def test_command_line_prints_what_the_gate_judges(capsys):
    code = artifacts_main([str(H200 / "weighted" / "model.pte"), str(H200 / "weighted" / "aoti_cuda_blob.ptd")])
    out = capsys.readouterr().out
    assert code == 0
    assert "plan 'forward': delegates ['CudaBackend'], operators left []" in out
    assert "'forward_weights_blob': 128 B" in out
    assert "segment base offset 256, segment data size 128" in out


def test_command_line_error_is_one_line_not_a_traceback(tmp_path, capsys):
    bad = tmp_path / "x.ptd"
    bad.write_bytes(b"garbage!")
    assert artifacts_main([str(bad)]) == 2  # a file that cannot be read as a .pte or .ptd: exit 2, as the gate's ERROR
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_json_output_holds_what_the_gate_judged(capsys):
    paths = [H200 / "weightless" / "model.pte", H200 / "weightless" / "aoti_cuda_blob.ptd",
             H200 / "weighted" / "aoti_cuda_blob.ptd", CPU / "weighted" / "model.pte", CPU / "weighted" / "model.ptd"]
    assert artifacts_main([*map(str, paths), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in records] == ["program", "datafile", "datafile", "program", "datafile", "pairing", "pairing"]
    cuda_program, weightless, weighted, cpu_program, cpu_data, *pairings = records
    assert [p["missing"] for p in pairings] == [[], []]  # each program with the data file of its own folder
    assert cuda_program["plans"] == [{"name": "forward", "delegate_ids": ["CudaBackend"], "operators": [], "target_devices": []}]
    # each blob where it starts in the file: after the 256 B the segments are aligned to (1.2.0's CUDA export, H200)
    assert weightless["blobs"] == [{"key": "forward_weights_blob", "size": 0, "all_zero": True, "start": 256}]
    assert weighted["blobs"] == [{"key": "forward_weights_blob", "size": 128, "all_zero": False, "start": 256}]
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
    assert artifacts_main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and message in err and "Traceback" not in err


def test_mains_program_and_data_file_are_read_with_every_key_present(capsys):
    """The CUDA build of main on the H200: the data file holds the weights key, the program the shared object's."""
    assert artifacts_main([str(H200_MAIN / "weightless"), str(H200_MAIN / "weighted")]) == 0
    out = capsys.readouterr().out
    for label in ("weightless", "weighted"):
        assert f"{label}/model.pte with aoti_cuda_blob.ptd: every key it expects is present (2)" in out
    assert ("plan 'forward': delegates ['CudaBackend'] (target device cuda:0), operators left "
            "['et_copy::_h2d_copy.out', 'et_copy::_d2h_copy.out']") in out


def test_a_program_with_its_data_file_is_matched_key_by_key(tmp_path, capsys):
    assert artifacts_main([str(CPU / "weighted" / "model.pte"), str(CPU / "weighted" / "model.ptd")]) == 0
    assert "model.pte with model.ptd: every key it expects is present (2)" in capsys.readouterr().out
    # The CUDA program beside the XNNPACK data file: the weights key is missing, and the exit says so.
    (tmp_path / "model.pte").write_bytes((H200 / "weighted" / "model.pte").read_bytes())
    (tmp_path / "model.ptd").write_bytes((CPU / "weighted" / "model.ptd").read_bytes())
    assert artifacts_main([str(tmp_path / "model.pte"), str(tmp_path / "model.ptd"), "--json"]) == 1
    pairing = json.loads(capsys.readouterr().out)[-1]
    assert pairing["kind"] == "pairing" and pairing["missing"] == ["forward_weights_blob"]

PTE = CPU / "weighted" / "model.pte"
PTD = CPU / "weighted" / "model.ptd"
CUDA_PTE = H200 / "weighted" / "model.pte"
CUDA_PTD = H200 / "weighted" / "aoti_cuda_blob.ptd"


def command(*paths, timeout=60) -> subprocess.CompletedProcess:
    """The command as a user runs it, under /usr/bin/time for its peak memory when that is there."""
    return subprocess.run([sys.executable, "-m", "smoke.artifacts", *map(str, paths)], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout)


def one_error(proc: subprocess.CompletedProcess, text: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ERROR "), proc.stderr
    assert text in proc.stderr, proc.stderr


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "model.pte"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(("path", "text"), [
    ("/dev/zero", "'/dev/zero' is a character device, not a .pte or .ptd file"),  # read whole: 10 GB in 20 s, then killed
    ("/dev/urandom", "'/dev/urandom' is a character device, not a .pte or .ptd file"),
    ("/dev/null", "'/dev/null' is a character device, not a .pte or .ptd file"),
])
def test_a_device_is_refused_without_reading_it(path, text):
    one_error(command(path, timeout=30), text)


def test_a_fifo_is_refused_without_waiting_for_a_writer(fifo):
    one_error(command(fifo, timeout=30), f"'{fifo}' is a FIFO, not a .pte or .ptd file")  # hung before


def test_a_directory_and_a_missing_path_are_one_error_each(tmp_path):
    proc = command(tmp_path, tmp_path / "absent.pte")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [f"ERROR '{tmp_path}' is a folder with no .pte or .ptd file in it: pass the folder "
                                        f"the gate kept (it prints 'artifacts kept in …'), one of its model folders, or the files",
                                        f"ERROR '{tmp_path / 'absent.pte'}' cannot be read: No such file or directory"]


def _peak_kb(pid_status: str) -> int:
    return int(next(line.split()[1] for line in pid_status.splitlines() if line.startswith("VmHWM:")))


def _run_measured(path: Path, timeout: float = 60) -> tuple[subprocess.CompletedProcess, int, float]:
    """The command on ``path`` in a child that reports its own peak resident memory (VmHWM) as it ends."""
    code = ("import sys, atexit\n"
            "atexit.register(lambda: sys.stderr.write('PEAK ' + open('/proc/self/status').read().split('VmHWM:')[1].split()[0] + '\\n'))\n"
            "from smoke.cli import artifacts_main as main\n"
            f"sys.exit(main([{str(path)!r}]))\n")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=timeout)
    seconds = time.monotonic() - start
    peak = int(next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("PEAK ")))
    proc.stderr = "".join(line + "\n" for line in proc.stderr.splitlines() if not line.startswith("PEAK "))
    return proc, peak, seconds


PEAK_KB = 200 * 1024  # the interpreter and flatbuffers take about 30 MB; an 8 GB file read whole would take 8 GB


@pytest.mark.parametrize("name", ["model.pte", "model.ptd"])
def test_an_8_gb_sparse_file_is_refused_from_its_first_bytes(tmp_path, name):
    path = tmp_path / name
    with open(path, "wb") as handle:
        handle.truncate(8 << 30)
    proc, peak, seconds = _run_measured(path)
    one_error(proc, f"'{path}' has file identifier b'\\x00\\x00\\x00\\x00', expected")
    assert peak < PEAK_KB and seconds < 30, (peak, seconds)


def test_a_real_program_grown_to_8_gb_is_read_from_the_ranges_its_header_names(tmp_path):
    path = tmp_path / "model.pte"
    path.write_bytes(PTE.read_bytes())
    with open(path, "r+b") as handle:
        handle.truncate(8 << 30)
    proc, peak, seconds = _run_measured(path)
    assert proc.returncode == 0, proc.stderr
    assert f"{path}: program, {8 << 30} B" in proc.stdout
    assert peak < PEAK_KB and seconds < 30, (peak, seconds)


@pytest.mark.parametrize(("source", "cut", "text"), [
    (CUDA_PTD, 300, "header says segments end at byte 384, the file is 300 B"),
    (CUDA_PTD, 20, "root table offset 68 points past the end (20 B)"),
    (PTD, 100, "the file is 100 B"),
    (CUDA_PTE, 2000, "segment 1 ends at byte 2318608, the file is 2000 B (truncated?)"),
    (PTE, 7, "is 7 B, too short for a FlatBuffer"),
    (PTE, 600, "B, the file is 600 B (truncated?)"),
])
def test_a_truncated_real_file_is_one_error(tmp_path, source, cut, text):
    path = tmp_path / source.name
    path.write_bytes(source.read_bytes()[:cut])
    one_error(command(path), text)


@pytest.mark.parametrize(("name", "data", "text"), [
    ("image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64), "has file identifier b'\\r\\n\\x1a\\n', expected b'ET12': it is not an "
                                                                   "ExecuTorch program (.pte); pass a .pte or .ptd that ExecuTorch's exporter wrote"),
    ("empty.pte", b"", "is 0 B, too short for a FlatBuffer"),
    ("empty.ptd", b"", "is 0 B, too short for a FlatBuffer"),
])
def test_a_file_of_another_kind_is_one_error(tmp_path, name, data, text):
    path = tmp_path / name
    path.write_bytes(data)
    one_error(command(path), text)


def test_a_wheel_is_one_error():
    wheel = sorted(WHEEL_CACHE.glob("executorch-*.whl"))
    if not wheel:
        pytest.skip("no cached wheel")
    one_error(command(wheel[0]), "expected b'ET12'")


def test_the_command_line_names_one_exception_class_however_it_is_started(tmp_path):
    # As `python -m smoke.artifacts` the module runs as __main__; the readers it calls are still smoke.artifacts',
    # and what they raise, whatever is wrong, is smoke.readers.tables.ArtifactError (OSError included).
    for path in ("/dev/zero", tmp_path, tmp_path / "absent.pte"):
        with pytest.raises(ArtifactError):
            artifacts.read(path)
    code = ("import runpy, sys\n"
            "sys.argv = ['smoke.artifacts', '--json', " + repr(str(PTE)) + "]\n"
            "runpy.run_module('smoke.artifacts', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0 and '"kind": "program"' in proc.stdout, proc.stderr


def test_a_bad_option_is_one_error_line_and_exit_2():
    proc = subprocess.run([sys.executable, "-m", "smoke.artifacts", "--bogus", str(PTE)], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("ERROR ") and proc.stderr.count("\n") == 1, proc.stderr


def test_a_missing_key_is_still_exit_1_and_an_unreadable_file_beside_it_exit_2(tmp_path):
    (tmp_path / "model.pte").write_bytes(CUDA_PTE.read_bytes())
    (tmp_path / "model.ptd").write_bytes(PTD.read_bytes())
    proc = command(tmp_path / "model.pte", tmp_path / "model.ptd")
    assert proc.returncode == 1 and "missing ['forward_weights_blob']" in proc.stdout
    proc = command(tmp_path / "model.pte", tmp_path / "model.ptd", "/dev/zero")
    assert proc.returncode == 2 and proc.stderr.startswith("ERROR '/dev/zero' is a character device")


def test_a_damaged_delegate_blob_is_an_error_naming_the_file(tmp_path):
    # Found by the slow property test: the XNNPACK blob's reader raised with no file name ("ERROR an XnnpackBackend blob ...").
    data = bytearray(PTE.read_bytes())
    data[116] = 0
    path = tmp_path / "model.pte"
    path.write_bytes(bytes(data))
    one_error(command(path), f"ERROR '{path}': an XnnpackBackend blob without its b'XH00' header")


def test_a_folder_the_gate_kept_is_read_whole_and_a_program_alone_brings_its_data_file(tmp_path):
    """Issue 24: `python -m smoke.artifacts DIR` on what the gate kept reads the .pte and its .ptd; a .pte alone
    also reads the .ptd beside it, and says so."""
    import shutil

    kept = tmp_path / "gate-cpu_x86_64-kept"
    shutil.copytree(CPU / "weighted", kept / "weighted")
    shutil.copytree(CPU / "weightless", kept / "weightless")
    proc = command(kept / "weighted")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{kept / 'weighted' / 'model.pte'} with model.ptd: every key it expects is present (2)" in proc.stdout
    proc = command(kept)  # the work folder itself: a folder per model
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{kept / 'weighted' / 'model.pte'} with model.ptd: every key it expects is present (2)" in proc.stdout
    proc = command(kept / "weighted" / "model.pte")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{kept / 'weighted' / 'model.pte'}: also reading the data file beside it: model.ptd" in proc.stdout
    assert f"{kept / 'weighted' / 'model.pte'} with model.ptd: every key it expects is present (2)" in proc.stdout


# --- the reader's bounds ----------------------------------------------------------------------

def artifacts_command(*paths):
    return subprocess.run([sys.executable, "-m", "smoke.artifacts", *map(str, paths)], capture_output=True, text=True, cwd=REPO)


def test_a_data_file_claiming_a_huge_flatbuffer_is_refused(tmp_path):
    data = bytearray((H200 / "weighted" / "aoti_cuda_blob.ptd").read_bytes())
    struct.pack_into("<Q", data, 24, 1 << 60)  # at 8 the FH01 header: magic, u32 length, u64 flatbuffer offset, u64 size
    path = tmp_path / "aoti_cuda_blob.ptd"
    path.write_bytes(bytes(data))
    proc = artifacts_command(path)
    assert proc.returncode == 2 and proc.stderr.startswith("ERROR ") and proc.stderr.count("\n") == 1
    assert f"header says the flatbuffer is {1 << 60} B at byte 48" in proc.stderr


def test_a_data_file_with_a_broken_identifier_is_told_the_data_files(tmp_path):
    data = bytearray((CPU / "weighted" / "model.ptd").read_bytes())
    data[4:8] = b"XX01"
    path = tmp_path / "model.ptd"
    path.write_bytes(bytes(data))
    proc = artifacts_command(path)
    assert proc.returncode == 2
    assert "has file identifier b'XX01', expected b'FT01'" in proc.stderr
