"""`.ci/release-shape` on a real wheel whose libraries search their build machine: PyPI's 1.2.0,
renamed as `pip wheel` names a raw build (linux_x86_64). What it prints, and what the gate's file
checks then say of the wheel it writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from smoke.backends import cuda_checks
from smoke.checks import shipped
from smoke.readers.wheel import read_wheel
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import REPO, patchelf_path

SCRIPT = REPO / ".ci" / "release-shape"
CUDA_ROW = ROWS["cuda_x86_64"]




@pytest.fixture(scope="module")
def shaped(wheel_1_2_0, tmp_path_factory):
    folder = tmp_path_factory.mktemp("shape")
    raw = folder / "executorch-1.2.0-cp312-cp312-linux_x86_64.whl"
    shutil.copy(wheel_1_2_0, raw)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(raw), str(folder / "out"), "--patchelf", patchelf_path()],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return read_wheel(proc.stdout.strip().splitlines()[-1]), proc.stdout


@pytest.mark.slow
def test_it_says_each_change(shaped):
    wheel, out = shaped
    # The tag auditwheel's policy gives for the newest versions its files need, not a default.
    assert ("release-shape: the ELF files need GLIBC_2.27, GLIBCXX_3.4.22, CXXABI_1.3.11, GCC_3.4: auditwheel's policy for "
            "that is manylinux_2_27_x86_64") in out
    assert wheel.filename == "executorch-1.2.0+cu130-cp312-cp312-manylinux_2_27_x86_64.whl"
    assert ("release-shape: METADATA: Version 1.2.0 -> 1.2.0+cu130; added Requires-Dist: nvidia-cuda-runtime<14,>=13; "
            "platform_system == \"Linux\"") in out
    assert "release-shape: WHEEL: Tag cp312-cp312-linux_x86_64 -> cp312-cp312-manylinux_2_27_x86_64" in out
    line = next(l for l in out.splitlines() if l.startswith("release-shape: RUNPATH executorch/extension/pybindings/_portable_lib"))
    assert "/__w/executorch" in line.split(" -> ")[0] and line.split(" -> ")[1] == "$ORIGIN/../../../torch/lib:$ORIGIN/../../backends/qualcomm"


@pytest.mark.slow
def test_the_shaped_wheel_passes_the_checks_shaping_is_for(shaped):
    wheel, _ = shaped
    libraries = shipped.read_libraries(wheel)
    assert cuda_checks.check_cuda_build(wheel, CUDA_ROW, libraries).status is Status.PASS
    assert cuda_checks.check_cuda_runtime_declared(wheel, CUDA_ROW, libraries).status is Status.PASS
    assert shipped.check_record(wheel, CUDA_ROW, libraries).status is Status.PASS
    runpath = shipped.check_library_runpath(wheel, ROWS["cpu_x86_64"], libraries)
    assert runpath.status is Status.PASS, runpath.reason  # before: five libraries searched the build machine
    with zipfile.ZipFile(wheel.path) as archive:  # flatc stays an executable regular file
        assert archive.getinfo("executorch/data/bin/flatc").external_attr >> 16 == 0o100755


@pytest.mark.slow
def test_a_wheel_labelled_with_another_train_is_refused(shaped, tmp_path):
    wheel, _ = shaped
    proc = subprocess.run([sys.executable, str(SCRIPT), str(wheel.path), str(tmp_path), "--patchelf", patchelf_path(), "--label", "cu126"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"ERROR: {wheel.filename} is labelled +cu130, not +cu126; pass --label cu130, or the raw build")


@pytest.mark.slow
def test_a_build_that_labels_itself_and_declares_the_runtime_keeps_both(shaped, tmp_path):
    """A build of main names itself +cu130 and declares nvidia-cuda-runtime (setup.py): shaping it again keeps
    the version and adds no second requirement (here the shaped 1.2.0, which has both)."""
    wheel, _ = shaped
    proc = subprocess.run([sys.executable, str(SCRIPT), str(wheel.path), str(tmp_path), "--patchelf", patchelf_path()],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ('release-shape: METADATA: Version 1.2.0+cu130 kept; kept Requires-Dist: nvidia-cuda-runtime<14,>=13; '
            'platform_system == "Linux"') in proc.stdout
    again = read_wheel(proc.stdout.strip().splitlines()[-1])
    assert again.filename == wheel.filename
    assert [str(r) for r in again.requires_dist if r.name == "nvidia-cuda-runtime"] == [
        'nvidia-cuda-runtime<14,>=13; platform_system == "Linux"']
    libraries = shipped.read_libraries(again)
    assert cuda_checks.check_cuda_runtime_declared(again, CUDA_ROW, libraries).status is Status.PASS
    assert shipped.check_record(again, CUDA_ROW, libraries).status is Status.PASS


@pytest.mark.slow
def test_a_forced_older_tag_is_said_and_fails_the_gates_platform_tag_check(wheel_1_2_0, tmp_path):
    from smoke.checks import policy

    raw = tmp_path / "executorch-1.2.0-cp312-cp312-linux_x86_64.whl"
    shutil.copy(wheel_1_2_0, raw)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(raw), str(tmp_path / "out"), "--patchelf", patchelf_path(),
                           "--platform", "manylinux_2_17_x86_64"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("release-shape: WARNING: --platform manylinux_2_17_x86_64 replaces manylinux_2_27_x86_64, the tag the libraries "
            "allow; if it is older, the gate's platform tag check fails the wheel") in proc.stdout
    wheel = read_wheel(proc.stdout.strip().splitlines()[-1])
    result = policy.check_platform_tag(wheel, CUDA_ROW, shipped.read_libraries(wheel))
    assert result.status is Status.FAIL and "which manylinux_2_17_x86_64 does not allow: the tag would be manylinux_2_27_x86_64" in result.reason
