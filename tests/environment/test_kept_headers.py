"""The headers' verdict kept across environments (smoke.environment.consumer: headers_key, kept_headers, keep_headers):
taken only for the same bytes, links, compiler and compile variables, and only from a whole file the gate wrote for
that key; a failure is never kept; a FIFO, an oversized or a foreign file at the key's name is no verdict. And the
consumer's deployment (consumer.deploy): it copies only the libraries the wheel ships."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from smoke.environment import consumer
from smoke.environment.consumer import Headers, headers_key, keep_headers, kept_headers

COMPILER = consumer.find_compiler()
pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C++ compiler here (the key holds what --version says)")
ENV = {"PATH": os.environ.get("PATH", "")}


def _site(tmp_path: Path, name: str = "site") -> Path:
    include = tmp_path / name / "executorch" / "include" / "executorch" / "runtime"
    include.mkdir(parents=True)
    (include / "a.h").write_text("#pragma once\nint a();\n")
    (include / "b.h").write_text('#pragma once\n#include "executorch/runtime/a.h"\n')
    os.symlink("a.h", include / "c.h")
    return tmp_path / name


def test_the_same_headers_in_another_folder_give_the_same_key_and_any_change_another(tmp_path):
    first, second = _site(tmp_path, "one"), _site(tmp_path, "two")
    key = headers_key(first, COMPILER, ENV)
    assert key is not None and len(key) == 64 and headers_key(second, COMPILER, ENV) == key
    runtime = second / "executorch" / "include" / "executorch" / "runtime"
    (runtime / "b.h").write_text('#pragma once\n#include "executorch/runtime/a.h" \n')  # one byte more
    assert headers_key(second, COMPILER, ENV) not in (key, None)
    (runtime / "b.h").write_text('#pragma once\n#include "executorch/runtime/a.h"\n')
    assert headers_key(second, COMPILER, ENV) == key
    (runtime / "c.h").unlink()
    os.symlink("b.h", runtime / "c.h")  # a link's text
    assert headers_key(second, COMPILER, ENV) != key
    assert headers_key(first, COMPILER, {**ENV, "CPATH": str(tmp_path)}) != key  # a variable the compiles read
    (first / "executorch" / "include" / "executorch" / "runtime" / "d.h").write_text("")  # a header added
    assert headers_key(first, COMPILER, ENV) != key


def test_a_verdict_kept_is_taken_whole_for_its_key_only(tmp_path):
    kept, key = tmp_path / "kept", headers_key(_site(tmp_path), COMPILER, ENV)
    assert kept_headers(key, kept) is None  # nothing kept yet
    keep_headers(key, Headers(3, (), (("x.h", "cuda_runtime.h"),)), kept)
    assert [p.name for p in kept.iterdir()] == [f"{key}.json"]  # no temporary file left beside it
    taken = kept_headers(key, kept)
    assert taken == Headers(3, (), (("x.h", "cuda_runtime.h"),), earlier=str(kept / f"{key}.json"))
    assert kept_headers("0" * 64, kept) is None

    # A file at another key's name holding this key's verdict (copied, or written by anything but the gate) is none.
    shutil.copy(kept / f"{key}.json", kept / f"{'1' * 64}.json")
    assert kept_headers("1" * 64, kept) is None


def test_a_failure_is_never_kept_and_a_kept_failure_is_never_taken(tmp_path):
    kept, key = tmp_path / "kept", headers_key(_site(tmp_path), COMPILER, ENV)
    keep_headers(key, Headers(3, ("executorch/runtime/b.h: fatal error: a.h: No such file or directory",)), kept)
    assert not kept.exists() or not list(kept.iterdir())
    kept.mkdir(exist_ok=True)
    (kept / f"{key}.json").write_text(json.dumps({"key": key, "count": 3, "failures": ["b.h: error"], "unjudged": []}))
    assert kept_headers(key, kept) is None


@pytest.mark.parametrize("what", ["fifo", "oversized", "not json", "a folder", "a link"])
def test_what_is_not_a_verdict_at_the_keys_name_is_none_and_never_blocks(tmp_path, what):
    kept, key = tmp_path / "kept", headers_key(_site(tmp_path), COMPILER, ENV)
    kept.mkdir()
    path = kept / f"{key}.json"
    verdict = json.dumps({"key": key, "count": 3, "failures": [], "unjudged": []})
    if what == "fifo":
        os.mkfifo(path)  # no writer: a blocking open would wait forever
    elif what == "oversized":
        path.write_text(verdict + " " * consumer.KEPT_BYTES)
    elif what == "not json":
        path.write_bytes(b"\xff\x00{")
    elif what == "a folder":
        path.mkdir()
    else:
        (tmp_path / "elsewhere.json").write_text(verdict)
        os.symlink(tmp_path / "elsewhere.json", path)
    assert kept_headers(key, kept) is None


def test_a_folder_that_cannot_be_written_keeps_nothing_and_says_nothing(tmp_path):
    kept, key = tmp_path / "kept", headers_key(_site(tmp_path), COMPILER, ENV)
    kept.write_text("a file where the folder would be")
    keep_headers(key, Headers(3, ()), kept)  # no exception: the run's verdict is its own either way
    assert kept.read_text() == "a file where the folder would be"


def test_the_deployment_copies_only_the_libraries_the_wheel_ships(tmp_path, wheel_x86_64):
    """Issue 58: every *.so* under the installed executorch/ was copied, what the wheel's code wrote there at run time
    too, and a sparse file came out dense (1 GiB of zeros kept with the environment)."""
    from smoke.readers.wheel import read_wheel

    if consumer.find_patchelf() is None:
        pytest.skip("no patchelf")
    shipped = consumer.shipped_libraries(read_wheel(wheel_x86_64).files)
    assert len(shipped) == 18 and "executorch/lib/libexecutorch.so" in shipped  # 1.5.1's, as its row deploys them
    assert not any("/include/" in path for path in shipped)
    site = tmp_path / "site"
    (site / "executorch" / "lib").mkdir(parents=True)
    (site / "executorch" / "lib" / "libexecutorch.so").write_bytes(b"not an ELF file, copied as it is")
    with open(site / "executorch" / "lib" / "libwritten_at_run_time.so", "wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GiB that takes no disk until copied
    binary = tmp_path / "consumer"
    binary.write_bytes(b"#!/bin/sh\n")
    done = consumer.deploy(binary, site, tmp_path / "folder", ENV, ["executorch/lib/libexecutorch.so"])
    assert done.said == "the consumer and 1 libraries copied, their search paths $ORIGIN-relative only", done.said
    copied = sorted(p.name for p in (tmp_path / "folder" / "deployed" / "executorch" / "lib").iterdir())
    assert copied == ["libexecutorch.so"]


def test_a_system_include_folder_changed_since_gives_another_key(tmp_path):
    """The key holds the compiler's header search folders with their times: an upgrade of the C++ library's headers
    (files replaced in /usr/include/c++/N) changes its folder's time, and a verdict kept before it is not taken."""
    site = _site(tmp_path)
    extra = tmp_path / "system-headers"
    extra.mkdir()
    env = {**ENV, "CPLUS_INCLUDE_PATH": str(extra)}  # a search folder this test can touch, as an upgrade would
    searched = consumer.headers._system_include_folders(COMPILER, env)
    assert searched is not None and str(extra) in [folder for folder, _ in searched]
    key = headers_key(site, COMPILER, env)
    os.utime(extra, ns=(1, 1))
    assert headers_key(site, COMPILER, env) not in (key, None)
