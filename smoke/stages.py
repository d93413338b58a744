"""The gate's checks, declared once, as data: the vocabulary every stage and the reports share.

A ``Check`` is a name (what the reports, the summary, the release rule and the benchmark call it), the stage that
decides it, its place in that stage, and the parent's function that decides it (``None`` where the child does). The
stages run in order: the wheel file, the environment, the child. The child's checks are declared here, the others
beside their functions; ``smoke.checks.pipeline`` gathers a row's. This module imports nothing heavy: the child
imports it inside the gate's environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generic, TypeVar

if TYPE_CHECKING:
    from smoke.results import CheckResult

FILE, ENVIRONMENT, CHILD = "wheel file", "environment", "child"
STAGES = (FILE, ENVIRONMENT, CHILD)
# The child's two models, in the order it builds them: a weightless x + y and a seeded nn.Linear.
MODELS = ("weightless", "weighted")


# A check's function: its stage's signature (``smoke.checks.kinds``: ``FileCheck``, ``EnvironmentCheck``), which mypy
# holds each declared function to; a child's check has none.
F = TypeVar("F", bound="Callable[..., CheckResult]", covariant=True)


@dataclass(frozen=True)
class Check(Generic[F]):
    name: str
    stage: str
    order: int  # its place in its stage
    function: F | None = None
    per_model: bool = False  # one result per model: "NAME (weightless)", "NAME (weighted)"

    def of(self, model: str) -> str:
        return f"{self.name} ({model})"

    def names(self) -> tuple[str, ...]:
        return tuple(self.of(model) for model in MODELS) if self.per_model else (self.name,)


# A check the child decides (or the parent, of the child itself): it has no function of the parent's.
ChildCheck = Check["Callable[..., CheckResult]"]

# Decided in the child (smoke.child.run, smoke.checks.exported), and by the parent about the child itself.
CUDA_DEVICE: ChildCheck = Check("CUDA device", CHILD, 10)  # a CUDA row's: smoke.child.delegates judges it
EXPORT: ChildCheck = Check("export", CHILD, 20, per_model=True)
DELEGATE: ChildCheck = Check("delegate", CHILD, 30, per_model=True)
DATA_FILE: ChildCheck = Check("data file", CHILD, 40, per_model=True)
WEIGHTS: ChildCheck = Check("weights in the data file", CHILD, 50)
RUN: ChildCheck = Check("run with data file", CHILD, 60, per_model=True)
NEGATIVE: ChildCheck = Check("negative control (weighted, no data file)", CHILD, 70)
# The weighted program with its data file damaged (cut inside its table; its named data cut short, header intact), each
# in a process of its own: a clean error, never eager's answer (smoke.checks.controls).
CORRUPT: ChildCheck = Check("corrupt data file (weighted)", CHILD, 72)
# A program with no delegate, run on the wheel's portable kernels and compared with eager (smoke.child.portable).
PORTABLE: ChildCheck = Check("portable kernels", CHILD, 75)
# A program whose quantize/dequantize only the quantized kernels run, with no delegate (smoke.child.portable).
QUANTIZED: ChildCheck = Check("quantized kernels", CHILD, 76)
# A PT2E-quantized model lowered to XNNPACK with the release's quantizer, with its data file (smoke.child.xnnpack_quantized).
XNNPACK_QUANTIZED: ChildCheck = Check("XNNPACK quantized", CHILD, 77)
# The weightless model through the OpenVINO delegate where its runtime is installed (smoke.child.openvino).
OPENVINO_MODEL: ChildCheck = Check("OpenVINO model", CHILD, 78)
# Every *.cpython-*.so the wheel ships, each imported in a process of its own (smoke.child.extensions).
EXTENSIONS: ChildCheck = Check("extension modules import", CHILD, 80)
# The wheel's C++ SDK (issue 49), judged by the parent on what the child exported: a C++ consumer built out of tree
# against the installed package config loads the weighted program with its data file (smoke.checks.cppsdk).
CPP_HEADERS: ChildCheck = Check("C++ headers compile alone", CHILD, 84)
CPP_RUN: ChildCheck = Check("C++ consumer with data file", CHILD, 85)
CPP_NEGATIVE: ChildCheck = Check("C++ consumer without data file", CHILD, 86)
CPP_DEPLOYED: ChildCheck = Check("C++ consumer deployed", CHILD, 87)
CPP_CORE: ChildCheck = Check("C++ one runtime core", CHILD, 88)
CPP_QUANTIZED: ChildCheck = Check("C++ quantized kernels", CHILD, 89)
CPP_CHECKS = (CPP_HEADERS, CPP_RUN, CPP_NEGATIVE, CPP_DEPLOYED, CPP_CORE, CPP_QUANTIZED)
CHILD_PROCESS: ChildCheck = Check("child process", CHILD, 99)  # it crashed, hung or spoke garbage
CHILD_CHECKS = (EXPORT, DELEGATE, DATA_FILE, WEIGHTS, RUN, NEGATIVE, CORRUPT, PORTABLE, QUANTIZED, XNNPACK_QUANTIZED, OPENVINO_MODEL, EXTENSIONS,
                *CPP_CHECKS, CHILD_PROCESS)

# Phases the child times, by these names; an export's phase is named as its check's result is.
IMPORT_PHASE = "import torch and executorch"
NEGATIVE_PHASE = "negative control"
# The child's last phase: waiting for what ran beside its work (the extension modules' imports, the libraries' loads)
# and judging it; time the benchmark shows, not hidden between phases.
BESIDE_PHASE = "the work beside the exports, collected"


def load_phase(model: str) -> str:
    return f"load and run ({model})"


# The checks a row that must execute may not skip: a skip there is work that did not happen. The seed's
# own (both exports, the delegate by id, the data file under the runners' name, its size over the
# weightless one's, the loads with it equal to eager, the negative control), and the portable kernels.
# Not `corrupt data file`: the parent judges it with its twin, and it is skipped only with the weighted run FAILed or the
# weighted program not exported (each a FAIL already); reports of gates before it (issue 56) do not hold it, and the
# summary would fail their rows for its absence.
MUST_EXECUTE = (*EXPORT.names(), *DELEGATE.names(), *DATA_FILE.names(), WEIGHTS.name, *RUN.names(), NEGATIVE.name,
                PORTABLE.name)


# A control: a check whose PASS is an expected failure (the weighted program without its data file, or with it damaged),
# and its twin: the same program with its data file, which must have run and matched eager in the same run, or the
# control proves nothing and is a SKIP naming the twin's failure (smoke.checks.controls).
CONTROLS = {NEGATIVE.name: RUN.of("weighted"), CORRUPT.name: RUN.of("weighted"), CPP_NEGATIVE.name: CPP_RUN.name}


@dataclass(frozen=True)
class MissingData:
    """What a delegate's runtime does, in one release, with a weighted program whose data file is missing or damaged
    (a backend's ``missing_data``): the error its load must fail with (None where the release defines none), what a
    crash is (``pass``: the release's known behaviour; ``warn``: a bug upstream fixed later; ``fail``), and the
    upstream source of the rule, cited in the line."""
    load_error: str | None
    crash: str
    source: str
# A row that must execute and left one of MUST_EXECUTE unrun (skipped, or never reported) FAILs by this
# result, which names them: it never PASSes with skips (smoke.engine.row).
EXECUTED: ChildCheck = Check("must execute", CHILD, 98)
