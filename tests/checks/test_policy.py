"""smoke.checks.policy: platform tag and architecture.

Each check passes on a real wheel (PyPI's 1.5.1 with the torch requirement it lacks) and fails on a
mutant of it with one defect: a tag its libraries break, a library of another machine.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from smoke.checks import policy
from smoke.results import Status
from smoke.rows import ROWS
from tests.helpers import DATA, THREADPOOL, judge, nox, rewrite_wheel

NEEDS_2_34 = DATA / "glibc" / "libneeds_glibc_2_34.so"  # built on glibc 2.36 (tests/data/glibc/build.sh)


def renamed(wheel_path: Path, folder: Path, platform: str, **changes) -> Path:
    return rewrite_wheel(wheel_path, folder, new_name=wheel_path.name.replace("manylinux_2_28_x86_64", platform), **changes)


# --- platform tag -----------------------------------------------------------------------------

@pytest.mark.slow
def test_the_real_wheel_keeps_its_manylinux_2_28_tag(declared_slim):
    result = judge(policy.PLATFORM_TAG, declared_slim)
    assert result.status is Status.PASS, result.reason
    # 18: the slim copy keeps the .so files only (the whole wheel has the flatc executable too).
    assert result.reason == ("18 ELF files within manylinux_2_28_x86_64 (newest needed: GLIBC_2.27, GLIBCXX_3.4.22, "
                             "CXXABI_1.3.11, GCC_4.0.0)")
    # auditwheel says the files would be good for manylinux_2_27 too: the tag is true (and modest).
    assert result.measured["true_tags"] == {"manylinux_2_28_x86_64": "manylinux_2_27_x86_64"}


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["manylinux_2_17_x86_64", "manylinux2014_x86_64"])
def test_the_same_files_under_an_older_tag_fail_naming_the_version_and_the_true_tag(declared_slim, tmp_path, tag):
    # manylinux2014 is the legacy alias of manylinux_2_17: auditwheel's table says so, not ours.
    result = judge(policy.PLATFORM_TAG, renamed(declared_slim, tmp_path, tag))
    assert result.status is Status.FAIL
    assert re.search(rf"executorch/lib/libexecutorch\.so needs GLIBC_2\.27, GLIBCXX_3\.4\.2\d, CXXABI_1\.3\.\d+, which {tag} "
                     r"does not allow: the tag would be manylinux_2_2[4-7]_x86_64", " ".join(result.measured["problems"])), result.reason


@pytest.mark.slow
def test_a_library_built_on_a_newer_glibc_fails_the_tag(declared_slim, tmp_path):
    wheel = rewrite_wheel(declared_slim, tmp_path, add={THREADPOOL: NEEDS_2_34.read_bytes()})
    result = judge(policy.PLATFORM_TAG, wheel)
    assert result.status is Status.FAIL
    assert (f"{THREADPOOL} needs GLIBC_2.34, which manylinux_2_28_x86_64 does not allow: the tag would be "
            "manylinux_2_34_x86_64") in result.reason


@pytest.mark.slow
def test_a_linux_tag_is_not_publishable(declared_slim, tmp_path):
    result = judge(policy.PLATFORM_TAG, renamed(declared_slim, tmp_path, "linux_x86_64"))
    assert result.status is Status.FAIL
    assert result.reason.startswith("linux_x86_64 is not a publishable platform tag (PyPI refuses it, and pip installs it "
                                    "only where it was built): its libraries allow manylinux_2_27_x86_64")


@pytest.mark.slow
def test_a_tag_auditwheel_has_no_policy_for_is_one_error_line(declared_slim, tmp_path):
    proc = nox("-s", "inspect", "--", str(renamed(declared_slim, tmp_path, "manylinux_2_99_x86_64")), "--row", "cpu_x86_64")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    assert errors == [f"ERROR auditwheel {policy.auditwheel_version()} has no policy named 'manylinux_2_99_x86_64': a tag newer "
                      "than its tables or not a real one; upgrade auditwheel (pip install -U auditwheel) or fix the tag"], proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


# --- architecture -------------------------------------------------------------------------

@pytest.mark.slow
def test_every_elf_file_of_the_real_wheels_is_of_its_tags_machine(declared_slim, wheel_aarch64):
    assert judge(policy.ARCHITECTURE, declared_slim).reason == "18 ELF files, each x86_64"
    result = judge(policy.ARCHITECTURE, wheel_aarch64, ROWS["cpu_aarch64"])
    assert result.status is Status.PASS and result.reason.endswith("ELF files, each aarch64")


@pytest.mark.slow
def test_an_aarch64_library_in_an_x86_64_wheel_fails_naming_both(declared_slim, wheel_aarch64, tmp_path):
    with zipfile.ZipFile(wheel_aarch64) as archive:
        arm = archive.read(THREADPOOL)
    result = judge(policy.ARCHITECTURE, rewrite_wheel(declared_slim, tmp_path, add={THREADPOOL: arm}))
    assert result.status is Status.FAIL
    assert result.reason == (f"{THREADPOOL} is aarch64 (EM_AARCH64, 64-bit, little-endian), the tag manylinux_2_28_x86_64 "
                             "says x86_64")


@pytest.mark.slow
def test_an_aarch64_build_renamed_x86_64_fails(wheel_aarch64, tmp_path):
    name = wheel_aarch64.name.replace("aarch64", "x86_64")
    result = judge(policy.ARCHITECTURE, rewrite_wheel(wheel_aarch64, tmp_path, new_name=name))
    assert result.status is Status.FAIL and "is aarch64 (EM_AARCH64" in result.reason and "(and " in result.reason


@pytest.mark.slow
def test_a_library_that_is_not_elf_fails_naming_it(declared_slim, tmp_path):
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n"
    result = judge(policy.ARCHITECTURE, rewrite_wheel(declared_slim, tmp_path, add={THREADPOOL: pointer}))
    assert result.status is Status.FAIL
    assert result.reason == f"{THREADPOOL} is named as a shared library but is not an ELF file"


# --- real libraries built on the H200 (glibc 2.39): tests/data/cuda-executorch-1.2.0/h200-glibc-2.39--* --------

H200_BUILD = DATA / "cuda-executorch-1.2.0"


def test_the_h200_builds_portable_lib_needs_glibc_2_38_so_manylinux_2_28_is_false():
    from smoke.readers import elf

    path = "executorch/extension/pybindings/_portable_lib.cpython-312-x86_64-linux-gnu.so"
    lib = elf.read_library(path, (H200_BUILD / f"h200-glibc-2.39--{path.replace('/', '--')}").read_bytes())
    judged = policy.tag_policy("manylinux_2_28_x86_64")
    needs = policy.external_versions(lib, shipped=set())
    assert policy.newest_per_family(policy.too_new(needs, judged.policy)) == ["GLIBC_2.38"]
    assert policy.true_tag(judged.policies, needs) == "manylinux_2_38_x86_64"
    assert policy.too_new(needs, policy.tag_policy("manylinux_2_38_x86_64").policy) == []
    # The AOTI shims of the same build: the libstdc++ of Ubuntu 24.04 (GLIBCXX_3.4.29 is GCC 11's).
    path = "executorch/backends/cuda/libaoti_cuda_shims.so"
    shims = elf.read_library(path, (H200_BUILD / f"h200-glibc-2.39--{path.replace('/', '--')}").read_bytes())
    needs = policy.external_versions(shims, shipped=set())
    assert policy.newest_per_family(policy.too_new(needs, judged.policy)) == ["GLIBCXX_3.4.29"]
    assert policy.true_tag(judged.policies, needs) == "manylinux_2_34_x86_64"


@pytest.mark.slow
def test_one_set_of_files_tagged_for_two_machines_fails(wheel_aarch64, tmp_path):
    name = wheel_aarch64.name.replace("manylinux_2_28_aarch64", "manylinux_2_28_aarch64.manylinux_2_28_x86_64")
    result = judge(policy.ARCHITECTURE, rewrite_wheel(wheel_aarch64, tmp_path, new_name=name), ROWS["cpu_aarch64"])
    assert result.status is Status.FAIL
    assert result.reason.startswith("the tags manylinux_2_28_aarch64, manylinux_2_28_x86_64 name 2 architectures (aarch64, x86_64)")


@pytest.mark.slow
def test_linux_elf_files_tagged_for_macos_too_fail(declared_slim, tmp_path):
    result = judge(policy.PLATFORM_TAG, renamed(declared_slim, tmp_path, "manylinux_2_28_x86_64.macosx_14_0_x86_64"))
    assert result.status is Status.FAIL
    assert result.reason == "the wheel ships 18 Linux ELF files but is also tagged macosx_14_0_x86_64"
