"""smoke.readers.macho (and smoke.readers.pe): a Mach-O file mutated as a linker would, read back; hostile
Mach-O and PE bytes are the readers' own errors only, bounded (issue 27)."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smoke.readers import macho, pe
from tests.helpers import (
    C_EXT,
    add_rpath,
    examples,
    fat_hot_ranges,
    fat_seed,
    hot_mutations,
    member,
    pe_import_ranges,
    platform_wheel,
    set_minimum_macos,
)

pytestmark = pytest.mark.network


def test_the_mach_o_mutations_read_back():
    data = member(platform_wheel("macosx_14_0_arm64", "1.5.1"), C_EXT)
    changed = macho.read_macho(C_EXT, set_minimum_macos(add_rpath(data, "/opt/conda/lib"), 15, 0)).slices[0]
    assert changed.rpaths[-1] == "/opt/conda/lib" and str(changed.minimum_macos) == "15.0"


# --- hostile bytes: only the readers' own error, bounded


def _mutations(seed: bytes):
    return st.tuples(st.integers(0, len(seed) - 1), st.binary(min_size=1, max_size=8)).map(
        lambda cut: seed[:cut[0]] + cut[1] + seed[cut[0] + len(cut[1]):])


def _seed() -> tuple[bytes, bytes]:
    macos = platform_wheel("macosx_14_0_arm64", "1.5.1")
    windows = platform_wheel("win_amd64", "1.0.0")
    # The head of each (the load commands; the headers and import directory) keeps examples fast.
    return member(macos, "executorch/lib/libexecutorch_etdump.dylib"), member(windows, "executorch/data/bin/flatc.exe")


def _judge(data: bytes, head: bytes) -> None:
    for reader, error in ((macho.read_macho, macho.MachOError), (pe.read_pe, pe.PeError)):
        try:
            reader("mutant", data)
        except error:
            pass
    macho.is_macho(head[:8]), pe.is_pe(head)


def _property(count: int):
    dylib, exe = _seed()
    sources = st.one_of(_mutations(dylib[:65536]), _mutations(exe[:65536]), st.binary(max_size=512),
                        st.binary(max_size=64).map(lambda b: b"\xcf\xfa\xed\xfe" + b), st.binary(max_size=256).map(lambda b: b"MZ" + b))

    @settings(max_examples=examples(count), deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(sources)
    def check(data):
        tracemalloc.start()
        start = time.monotonic()
        try:
            _judge(data, data[:pe.PE_HEAD_SIZE])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 32 << 20, peak
        assert time.monotonic() - start < 5

    check()


@pytest.mark.slow
def test_hostile_mach_o_and_pe_bytes_are_the_readers_errors_only():
    _property(40)  # the fast tier's sample (300 took 106 s of its 809 s, 2026-12-06); the thousand below run in CI


@pytest.mark.slow
def test_hostile_mach_o_and_pe_bytes_are_the_readers_errors_only_thousands():
    _property(1000)  # 3000 took 563 s here; a thousand keeps CI inside its time


# --- hostile bytes where the issue-37 paths read: a fat file's header and each slice's load commands, a PE file's
# import directory and the DLL names it points to

def fat_and_pe_seeds() -> tuple[bytes, bytes]:
    """A fat file of two real slices (arm64, and a copy labelled x86_64 that lost an LC_RPATH), and a real .pyd."""
    universal = fat_seed(member(platform_wheel("macosx_14_0_arm64", "1.5.1"), C_EXT), "@loader_path/../../lib")
    pyd = member(platform_wheel("win_amd64", "1.5.1"), "executorch/extension/pybindings/data_loader.cp311-win_amd64.pyd")
    return universal, pyd


def hostile_fat_and_pe():
    universal, pyd = fat_and_pe_seeds()
    return st.one_of(hot_mutations(universal, fat_hot_ranges(universal)), hot_mutations(pyd, pe_import_ranges(pyd)),
                     st.binary(max_size=256).map(lambda b: b"\xca\xfe\xba\xbe\x00\x00\x00\x02" + b))


def _fat_and_pe_property(count: int):
    @settings(max_examples=examples(count), deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(hostile_fat_and_pe())
    def check(data):
        _judge(data, data[:pe.PE_HEAD_SIZE])

    check()


@pytest.mark.slow
def test_hostile_fat_slices_and_pe_imports_are_the_readers_errors_only():
    _fat_and_pe_property(60)  # pefile reads a .pyd's import directory in about 30 ms here


@pytest.mark.slow
def test_hostile_fat_slices_and_pe_imports_are_the_readers_errors_only_thousands():
    _fat_and_pe_property(1000)  # 2000 took 193 s here
