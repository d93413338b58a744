"""The wheel's C++ SDK, judged as its consumers use it (issue 49; the consumer: ``smoke.environment.consumer``).

- ``C++ consumer with data file``: a C++ program built out of tree with CMake against the installed wheel's package
  config (``find_package(executorch REQUIRED COMPONENTS runtime ...)``), run with none of the caller's loader
  variables (``loaderenv.clean``), loads the row's
  weighted program with its data file (``Module(program, data_file)``, the C++ runners' way) and gives eager's answer,
  computed apart from the wheel's code, within the Python run's tolerance (``smoke.checks.outputs``). A build that
  fails is this check's FAIL, naming the first errors (a config naming a library the wheel lacks, a header that does
  not compile).
- ``C++ consumer without data file``: the same program without it, in a process of its own: a control, judged with
  its twin (the consumer with the data file) by the release's rule, as the Python negative control
  (``smoke.checks.controls``). A failure of either names its stage and the runtime's error; an OperatorMissing names
  the operators the program leaves outside its delegates and the component that registers each.

- ``C++ headers compile alone``: every header under ``executorch/include`` compiles on its own (upstream's
  test_cpp_sdk.py compiles them so); a header that needs one the wheel does not ship and this machine lacks is said,
  not judged.
- ``C++ consumer deployed``: the consumer copied beside a copy of the wheel's libraries, with only the ``$ORIGIN``
  entries of their search paths (upstream's ``_assert_runs_relocated``), runs the weighted program with its data file
  and gives eager's answer: the package config's targets make a consumer relocatable.
- ``C++ quantized kernels``: the consumer, linking the quantized kernels component where the wheel ships its library,
  runs ``quantized kernels``' program (an int8 quantize and dequantize, then a Linear, no delegate) and gives eager's
  answer: upstream's test_cpp_sdk.py asks that the quantized kernels component runs a model.
- ``C++ one runtime core``: in the C++ consumer's process, after it ran, one loaded object defines each component
  with process-wide state (the backend and operator registries, the thread pool, ...: ``smoke.checks.owners``'
  table, read from the objects the process loaded, as the loader listed them). A second registry is one a backend
  can register into and nothing reads.

Each SKIPs, saying why, where there is nothing to judge: a wheel with no C++ runtime (1.4's layout), no CMake 3.28
or no C++ compiler on the machine (the line names the fix), no weighted program exported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smoke import tensors
from smoke.checks import controls, owners
from smoke.checks.exported import program_facts
from smoke.checks.outputs import compare
from smoke.readers import elf, filekind
from smoke.results import CheckResult, failed, passed, skipped
from smoke.stages import CPP_CHECKS, CPP_CORE, CPP_DEPLOYED, CPP_HEADERS, CPP_NEGATIVE, CPP_QUANTIZED, CPP_RUN, MissingData

LOADED_BYTES = 1 << 30  # an object the process loaded is read whole for its symbols; larger than this, it is named unread


def skip_both(why: str) -> list[CheckResult]:
    """Every C++ check, skipped for one reason."""
    return [skipped(check.name, why) for check in CPP_CHECKS]


def fail_unbuildable(why: str) -> list[CheckResult]:
    """A C++ runtime no consumer can build against (``consumer.missing_config``): the consumer's FAIL, the rest not run."""
    later = "not run: no C++ consumer can be built against the wheel (see C++ consumer with data file)"
    return [skipped(CPP_HEADERS.name, "not run: the wheel ships no package config to give the headers' include folders "
                                      "and definitions (see C++ consumer with data file)"),
            failed(CPP_RUN.name, why), *(skipped(check.name, later) for check in CPP_CHECKS[2:])]


def judge_headers(count: int, failures: tuple[str, ...], unjudged: tuple[tuple[str, str], ...],
                  earlier: str | None = None) -> CheckResult:
    """Every installed header compiles alone (``smoke.environment.consumer.headers_alone``); ``earlier``: the verdict
    was an earlier run's on the same headers and compiler, kept there (``consumer.kept_headers``), and the line says so."""
    name = CPP_HEADERS.name
    needs = sorted({need for _, need in unjudged})
    aside = (f"; {len(unjudged)} not judged here: they include {', '.join(needs[:3])}"
             f"{f' (and {len(needs) - 3} more)' if len(needs) > 3 else ''}, which the wheel does not ship and this "
             f"machine lacks" if unjudged else "")
    measured = {"headers": count, "failures": list(failures), "unjudged": [list(pair) for pair in unjudged], "kept": earlier}
    if earlier is not None:
        aside += f"; the verdict of an earlier run of the same headers and compiler, kept in {earlier}"
    if failures:
        return failed(name, f"{len(failures)} of {count} headers do not compile alone: {'; '.join(failures[:3])}"
                            f"{f' (and {len(failures) - 3} more)' if len(failures) > 3 else ''}{aside}", **measured)
    if count == len(unjudged):
        return skipped(name, f"not judged: {count} headers under executorch/include{aside}", **measured)
    return passed(name, f"{count - len(unjudged)} headers under executorch/include compile alone (C++17, the config's "
                        f"include folders and definitions){aside}", **measured)


def judge_deployed(said: dict[str, Any], data_file: str, eager: list[tensors.Output], how: str) -> CheckResult:
    """The deployed consumer (``smoke.environment.consumer.deploy``) on the weighted program with its data file."""
    return _ran(CPP_DEPLOYED.name, said, eager, f"{data_file} by the deployed C++ consumer ({how})",
                f"the deployed C++ consumer ({how})")


def judge_quantized(said: dict[str, Any], eager: list[tensors.Output], pte: Path | None = None,
                    linked: set[str] | None = None) -> CheckResult:
    """The consumer, linking ``executorch::kernels_quantized``, on the quantized program (no delegate, no data file)."""
    how = "executorch::kernels_quantized linked, Module(quantized model.pte)"
    return _ran(CPP_QUANTIZED.name, said, eager, f"no delegate by a C++ consumer ({how})", f"the C++ consumer ({how})",
                pte=pte, linked=linked)


def judge_core(loaded: Any, read=None) -> CheckResult:
    """One definer of each component with process-wide state among the objects the C++ process loaded
    (``smoke.checks.owners``' components; ``read`` reads one object: a path to ``elf.Library``)."""
    name = CPP_CORE.name
    if not isinstance(loaded, list) or not all(isinstance(path, str) for path in loaded):
        return failed(name, "the C++ consumer listed no objects it loaded the gate reads")
    read = read or _read_loaded
    defines: dict[str, dict[str, bool]] = {}
    unread = []
    for path in dict.fromkeys(loaded):
        if "/" not in path:
            continue  # the kernel's vDSO (linux-vdso.so.1): no file, and not the wheel's
        library = read(path)
        if isinstance(library, str):
            unread.append(library)
        else:
            defines[path] = owners.components_defined(library)
    found = {component: owners._definers(defines, defines, component) for component in owners.BY_NAME}
    two = {component: definers for component, definers in found.items() if len(definers) > 1}
    measured = {"loaded": loaded, "definers": {c: [p for p, _ in d] for c, d in found.items() if d}, "unread": unread}
    if two:
        shown = "; ".join(f"the {component}: {owners._names(d)}" for component, d in list(two.items())[:3])
        return failed(name, f"the C++ consumer's process holds two copies of the runtime's state: {shown}"
                            f"{f' (and {len(two) - 3} more)' if len(two) > 3 else ''}; one owner each, upstream's "
                            f"test_cpp_sdk.py (a backend registers into a table nothing reads)", **measured)
    held = [c for c in ("backend registry", "kernel registry", "thread pool") if found.get(c)]
    where = sorted({Path(path).name for c in held for path, _ in found[c]})
    more = f"; {len(unread)} not read: {'; '.join(unread[:2])}" if unread else ""
    return passed(name, f"one definer of each component among the {len(loaded)} objects the C++ consumer loaded: the "
                        f"{', '.join(held) or 'no registry'} in {', '.join(where) or 'none'}{more}", **measured)


def _read_loaded(path: str) -> elf.Library | str:
    """One object the consumer said it loaded, read bounded and by kind (``filekind.read_regular``): a FIFO or a device
    at its path is said not read, never waited on."""
    try:
        data = filekind.read_regular(path, LOADED_BYTES)
    except filekind.Unreadable as exc:
        return f"{path}: {exc}"
    if not elf.is_elf(data):
        return f"{path}: not an ELF file"
    try:
        return elf.read_library(path, data)
    except ValueError as exc:  # elf.ElfError, and what its layout checks raise
        return f"{path}: {exc}"


def _ran(name: str, said: dict[str, Any], eager: list[tensors.Output], loaded_with: str, who: str,
         pte: Path | None = None, linked: set[str] | None = None, **measured: Any) -> CheckResult:
    """A consumer's run held to eager's answer: its outputs compared, or how it ended (``who``: the consumer, in words),
    at which stage, with the runtime's error named; for OperatorMissing, the operators ``pte`` leaves outside its
    delegates and the component that registers each (``linked``: the components the consumer linked)."""
    if "outputs" in said:
        return compare(name, said["outputs"], eager, loaded_with, **measured)
    where = f" at {controls.stage_of(said)}" if "stage" in said else ""
    if "signal" in said:
        return failed(name, f"{who} was ended by {said['signal']}{where}", **measured)
    error = str(said.get("error") or said.get("failed"))
    why = ""
    if controls.error_code(error) == 0x14 and pte is not None:  # OperatorMissing
        program = program_facts(pte)
        operators = sorted({op for plan in program.get("plans", []) for op in plan["operators"]})
        why = f": {controls.missing_operators(operators, linked)}"
        measured["operators"] = operators
    return failed(name, f"{who}{where}: {controls.named(error)}{why}", **measured)


def judge_with(said: dict[str, Any], data_file: str, eager: list[tensors.Output], built: str, pte: Path | None = None,
               linked: set[str] | None = None) -> CheckResult:
    how = f"Module(model.pte, {data_file})"
    return _ran(CPP_RUN.name, said, eager, f"{data_file} by a C++ consumer ({how})", f"the C++ consumer ({how})",
                pte=pte, linked=linked, consumer=built)


def judge_without(said: dict[str, Any], data_file: str, eager: list[tensors.Output], twin: CheckResult | None,
                  rule: MissingData) -> CheckResult:
    """The consumer without the data file: a control, judged with its twin, ``C++ consumer with data file``, by the
    release's rule (``smoke.checks.controls``)."""
    return controls.judge_missing(CPP_NEGATIVE.name, said, twin, rule, data_file, eager, who="the C++ consumer")


def weighted_program(workdir: Path, data_file: str) -> tuple[Path, Path] | None:
    folder = workdir / "weighted"
    pte, ptd = folder / "model.pte", folder / data_file
    return (pte, ptd) if pte.is_file() and ptd.is_file() else None
