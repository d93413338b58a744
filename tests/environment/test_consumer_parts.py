"""The C++ consumer's parts that need no wheel (issue 49): every header compiled alone, told apart by whose header is
missing, with the host's real compiler on a small include tree made here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from smoke.environment import consumer, loaderenv

ENV = loaderenv.clean(os.environ).env


def _tree(site: Path, headers: dict[str, str]) -> None:
    for name, text in headers.items():
        path = site / "executorch" / "include" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_each_header_is_compiled_alone_and_a_missing_one_is_the_wheels_only_under_its_own_folders(tmp_path):
    compiler = consumer.find_compiler()
    if compiler is None:
        pytest.skip("no C++ compiler")
    _tree(tmp_path, {
        "executorch/runtime/good.h": "#pragma once\ninline int good() { return 1; }\n",
        "executorch/runtime/uses_good.h": "#pragma once\n#include <executorch/runtime/good.h>\ninline int two() { return good() + 1; }\n",
        "executorch/runtime/needs_removed.h": "#pragma once\n#include <executorch/runtime/removed.h>\n",
        "executorch/runtime/broken.h": "#pragma once\ninline int broken() { return undeclared_name; }\n",
        "executorch/extension/cuda/needs_toolkit.h": "#pragma once\n#include <gate_no_such_toolkit_runtime.h>\n",
        "executorch/runtime/core/portable_type/c10/c10/util/part.h":
            "#ifndef WHOLE\n#error this header is not meant to be individually included\n#endif\n",
    })
    found = consumer.headers_alone(tmp_path, compiler, ENV)
    assert found.count == 5  # part.h guards itself against being included alone: left out
    assert sorted(f.split(":", 1)[0] for f in found.failures) == ["executorch/runtime/broken.h", "executorch/runtime/needs_removed.h"]
    assert any("executorch/runtime/removed.h" in f for f in found.failures)
    assert found.unjudged == (("executorch/extension/cuda/needs_toolkit.h", "gate_no_such_toolkit_runtime.h"),)


def test_a_wheel_with_no_include_folder_has_no_headers(tmp_path):
    assert consumer.headers_alone(tmp_path, "c++", ENV) == consumer.Headers(0, ())


def test_a_kept_build_is_of_the_components_it_links(wheel_x86_64, tmp_path):
    """A build kept from a gate that linked other components is not reused (one that did not link the quantized
    kernels FAILed C++ quantized kernels with OperatorMissing, 0x14, on a working wheel)."""
    import dataclasses

    from smoke.readers.wheel import read_wheel

    wheel = read_wheel(wheel_x86_64)
    fewer = dataclasses.replace(wheel, files=tuple(f for f in wheel.files if f != consumer.library_of("kernels_quantized")))
    keys = [consumer.Consumer(w, tmp_path, tmp_path / "c", "xnnpack", ENV)._key("cmake", "c++") for w in (wheel, fewer)]
    assert keys[0] != keys[1]
    assert keys[0] == consumer.Consumer(wheel, tmp_path, tmp_path / "c", "xnnpack", ENV)._key("cmake", "c++")


def test_no_cmake_or_no_compiler_is_one_line_naming_the_fix(wheel_x86_64, tmp_path, monkeypatch):
    from smoke.readers.wheel import read_wheel

    old = tmp_path / "bin"
    old.mkdir()
    fake = old / "cmake"
    fake.write_text("#!/bin/sh\necho 'cmake version 3.22.1'\n")
    fake.chmod(0o755)
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))  # nothing beside it
    monkeypatch.setenv("PATH", str(old))
    found, said = consumer.find_cmake()
    assert found is None
    assert said == f"no CMake 3.28 or newer ({fake} (3.22)): pip install 'cmake>=3.28,<4' into the interpreter that runs the gate"
    built = consumer.Consumer(read_wheel(wheel_x86_64), tmp_path, tmp_path / "c", "xnnpack", ENV).start().built(60)
    assert built.binary is None and not built.failed and built.said == said and built.headers is None
    # a wheel that ships a C++ runtime: the machine's ERROR, naming the fix (issue 56); a wheel with none: nothing lacks
    assert consumer.machine_lacks(read_wheel(wheel_x86_64), "xnnpack") == (
        f"the wheel ships a C++ runtime (executorch/lib/libexecutorch.so), whose checks must run here, and this machine "
        f"has {said}")
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CXX", raising=False)
    assert consumer.find_compiler() is None


def test_a_failed_build_names_its_first_error_and_its_log(tmp_path):
    """Issue 56: the line stopped at 'CMake Error at CMakeLists.txt:2 (project):', its cause in a log no line named."""
    log = tmp_path / "build.log"
    log.write_text("-- The CXX compiler identification is unknown\n"
                   "CMake Error at CMakeLists.txt:2 (project):\n"
                   "  The CMAKE_CXX_COMPILER:\n\n    /nonexistent/g++\n\n  is not a full path to an existing compiler tool.\n")
    assert consumer.build._errors(log) == ("CMake Error at CMakeLists.txt:2 (project): The CMAKE_CXX_COMPILER: /nonexistent/g++ is "
                                     f"not a full path to an existing compiler tool. (the whole log: {log})")
    log.write_text("[ 50%] Building CXX object consumer.o\nIn file included from consumer.cpp:9:\n"
                   "/x/module.h:12:10: fatal error: executorch/runtime/core/tag.h: No such file or directory\n"
                   "make[2]: *** [consumer.o] Error 1\n")
    assert consumer.build._errors(log) == ("/x/module.h:12:10: fatal error: executorch/runtime/core/tag.h: No such file or "
                                     f"directory (the whole log: {log})")


def test_stopping_the_compiles_ends_the_one_running_and_starts_no_other():
    """An interrupt of the gate stops the consumer's build: the headers' pool compiled its whole queue for seconds after
    the run said every process was ended. Now a running compile is ended and none starts after it."""
    import threading
    import time

    compiles = consumer.Compiles()
    said: list = []
    worker = threading.Thread(target=lambda: said.append(compiles.run(["sleep", "30"], "sleeping", ENV, 60)))
    began = time.monotonic()
    worker.start()
    time.sleep(0.5)
    compiles.stop()
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - began < 10
    code, _stderr = said[0]
    assert code < 0  # ended by a signal, not run to its end
    assert compiles.run(["true"], "after", ENV, 60) is None
