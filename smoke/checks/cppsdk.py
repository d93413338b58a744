"""The wheel's C++ SDK, judged as its consumers use it (issue 49; the consumer: ``smoke.environment.consumer``).

- ``C++ consumer with data file``: a C++ program built out of tree with CMake against the installed wheel's package
  config (``find_package(executorch REQUIRED COMPONENTS runtime ...)``), run with none of the caller's loader
  variables (``loaderenv.clean``), loads the row's
  weighted program with its data file (``Module(program, data_file)``, the C++ runners' way) and gives eager's answer,
  computed apart from the wheel's code, within the Python run's tolerance (``smoke.checks.outputs``). A build that
  fails is this check's FAIL, naming the first errors (a config naming a library the wheel lacks, a header that does
  not compile).
- ``C++ consumer without data file``: the same program without it, in a process of its own, must not give eager's
  answer (a crash or an error is the expected outcome), as the Python negative control.

Each SKIPs, saying why, where there is nothing to judge: a wheel with no C++ runtime (1.4's layout), no CMake 3.28
or no C++ compiler on the machine (the line names the fix), no weighted program exported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smoke import tensors
from smoke.checks.outputs import compare
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import CPP_NEGATIVE, CPP_RUN


def skip_both(why: str) -> list[CheckResult]:
    return [skipped(CPP_RUN.name, why), skipped(CPP_NEGATIVE.name, why)]


def judge_with(said: dict[str, Any], data_file: str, eager: list[tensors.Output], built: str) -> CheckResult:
    name = CPP_RUN.name
    how = f"Module(model.pte, {data_file})"
    if "outputs" in said:
        return compare(name, said["outputs"], eager, f"{data_file} by a C++ consumer ({how})", consumer=built)
    if "signal" in said:
        return failed(name, f"the C++ consumer ({how}) was ended by {said['signal']}", consumer=built)
    return failed(name, f"the C++ consumer ({how}): {said.get('error') or said.get('failed')}", consumer=built)


def judge_without(said: dict[str, Any], data_file: str, eager: list[tensors.Output]) -> CheckResult:
    name = CPP_NEGATIVE.name
    if "signal" in said:
        return passed(name, f"the load without {data_file} ended the C++ consumer with {said['signal']}, as expected",
                      outcome=said["signal"])
    if "error" in said:
        return passed(name, f"loading or running without {data_file} failed, as expected: {said['error']}", outcome="error")
    if "outputs" in said:
        try:
            found = tensors.close(tensors.decode(said["outputs"]), eager, tensors.RTOL, tensors.ATOL)
        except tensors.NotOutputs as exc:
            return failed(name, f"ran without {data_file} and gave no outputs the gate reads: {exc}")
        if found.matched:
            return failed(name, f"ran without {data_file} and matched eager (max abs diff {found.max_abs_diff:.3g}): the "
                                f"weights are not coming from the data file", outcome="matched")
        return passed(name, f"ran without {data_file} and did not match eager (max abs diff {found.max_abs_diff:.3g}), as "
                            f"expected", outcome="mismatch")
    return failed(name, f"the C++ consumer without {data_file}: {said.get('failed')}")


def weighted_program(workdir: Path, data_file: str) -> tuple[Path, Path] | None:
    folder = workdir / "weighted"
    pte, ptd = folder / "model.pte", folder / data_file
    return (pte, ptd) if pte.is_file() and ptd.is_file() else None
