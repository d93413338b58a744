"""The C++ SDK as a capability of the row (issue 49; issue 59 moved it out of the row's steps): the consumer's build,
started beside the child (``started``), and its checks judged once the child's weighted program and eager's answer are
there (``judged``). The build and the runs are ``smoke.environment.consumer``'s; the verdicts ``smoke.checks.cppsdk``'s."""

from __future__ import annotations

import contextlib
from pathlib import Path

from smoke import stages
from smoke.checks import cppsdk, outputs
from smoke.console import phase, say
from smoke.engine.machine import machine
from smoke.environment import build, consumer, reference
from smoke.readers.wheel import Wheel
from smoke.report import Run
from smoke.results import CheckResult, failed, skipped
from smoke.rows import Row


def started(row: Row, wheel: Wheel, location: Path, env: dict[str, str],
            stack: contextlib.ExitStack) -> consumer.Consumer | consumer.NoConfig | str:
    """The C++ consumer's build, started (in the environment's folder, kept there for later runs), or why the wheel
    has none to build."""
    why = consumer.nothing_to_judge(wheel) or consumer.missing_delegate(wheel, row.backend.name)
    if why is not None:
        return f"not run: {why}"
    if (unbuildable := consumer.missing_config(wheel)) is not None:
        return consumer.NoConfig(unbuildable)
    site = build.site_packages_holding(location, "executorch")
    if site is None:
        return f"not run: no site-packages holding executorch in {location}"
    made = consumer.Consumer(wheel, site, location / ".gate-cpp-consumer" / row.name, row.backend.name, env)
    stack.callback(made.stop)
    if made.cleared:
        say(f"C++ build environment: without the caller's {', '.join(made.cleared)}")
    return made  # started as the child's imports end (RowEvents.probe), or when it is needed


def judged(run: Run, row: Row, sdk: consumer.Consumer | consumer.NoConfig | str, workdir: Path, eager: reference.Later,
           timeout: float) -> list[CheckResult]:
    """The C++ SDK's checks (``smoke.checks.cppsdk``), on the weighted program the child exported."""
    if isinstance(sdk, str):
        return cppsdk.skip_both(sdk)
    if isinstance(sdk, consumer.NoConfig):
        return cppsdk.fail_unbuildable(sdk.why)
    data_file = row.backend.data_file
    program = cppsdk.weighted_program(workdir, data_file)
    made = sdk.built(consumer.BUILD_SECONDS * 2)
    headers = (cppsdk.judge_headers(made.headers.count, made.headers.failures, made.headers.unjudged,
                                         made.headers.earlier) if made.headers
               else skipped(stages.CPP_HEADERS.name, f"not run: {made.said}"))
    runs = (stages.CPP_RUN, stages.CPP_NEGATIVE, stages.CPP_DEPLOYED, stages.CPP_CORE, stages.CPP_QUANTIZED)
    if made.binary is None:
        if made.failed:
            return [headers, failed(stages.CPP_RUN.name, made.said),
                    *(skipped(check.name, "not run: the consumer did not build") for check in runs[1:])]
        return [headers, *(skipped(check.name, f"not run: {made.said}") for check in runs)]
    if program is None:
        why = f"not run: no weighted program with its {data_file} (see {stages.EXPORT.of('weighted')})"
        return [headers, *(skipped(check.name, why) for check in runs)]
    answers = eager.answers(timeout)
    if answers.error or not answers.inputs or "weighted" not in answers.inputs:
        why = answers.error or "eager's answer came without its inputs"
        return [headers, failed(stages.CPP_RUN.name, f"its outputs cannot be judged: {why}"),
                *(skipped(check.name, "not run: no eager answer to hold it to") for check in runs[1:])]
    inputs = workdir / "cpp-consumer-inputs.txt"
    with machine("the work folder", workdir, "--workdir"):
        consumer.write_inputs(inputs, answers.inputs["weighted"])
    pte, ptd = program
    expected = answers.outputs["weighted"]
    with phase(run, "the C++ consumer"):
        said = consumer.run(made.binary, pte, ptd, inputs, sdk.run_env)
        linked = set(consumer.components(sdk.wheel, sdk.backend))
        twin = cppsdk.judge_with(said, data_file, expected, made.said, pte=pte, linked=linked)
        rule = row.backend.missing_data(sdk.wheel.version)
        found = [headers, twin, cppsdk.judge_without(consumer.run(made.binary, pte, None, inputs, sdk.run_env), data_file,
                                                     expected, twin, rule)]
        deployed = made.deployed
        if deployed is None or deployed.binary is None:
            why = deployed.said if deployed else "the deployed copy of an earlier run is not readable: remove the environment"
            found.append(failed(stages.CPP_DEPLOYED.name, why) if deployed and deployed.failed
                         else skipped(stages.CPP_DEPLOYED.name, f"not run: {why}"))
        else:
            found.append(cppsdk.judge_deployed(consumer.run(deployed.binary, pte, ptd, inputs, sdk.run_env), data_file, expected,
                                               deployed.said))
        found.append(cppsdk.judge_core(said["loaded"]) if "loaded" in said else
                     skipped(stages.CPP_CORE.name, "not run: the C++ consumer did not end its run (see C++ consumer with "
                                                   "data file)"))
        found.append(_quantized(sdk, made.binary, workdir, answers))
        return found


def _quantized(sdk: consumer.Consumer, binary: Path, workdir: Path, answers: reference.Answers) -> CheckResult:
    """The quantized kernels component runs the quantized program (``quantized kernels``' own) in the consumer."""
    name = stages.CPP_QUANTIZED.name
    component = consumer.QUANTIZED_KERNELS
    if consumer.library_of(component) not in sdk.wheel.files:
        return skipped(name, f"not run: the wheel's C++ SDK has no executorch::{component} "
                             f"({consumer.library_of(component)} is not shipped)")
    pte = workdir / outputs.QUANTIZED_LABEL / "model.pte"
    if not pte.is_file():
        return skipped(name, f"not run: no quantized program was exported (see {stages.QUANTIZED.name})")
    label = outputs.QUANTIZED_LABEL
    if label not in answers.outputs or not answers.inputs or label not in answers.inputs:
        return skipped(name, f"not run: {answers.unbuilt.get(label, 'eager gave no answer for it')}")
    inputs = workdir / "cpp-quantized-inputs.txt"
    with machine("the work folder", workdir, "--workdir"):
        consumer.write_inputs(inputs, answers.inputs[label])
    return cppsdk.judge_quantized(consumer.run(binary, pte, None, inputs, sdk.run_env), answers.outputs[label], pte,
                                  set(consumer.components(sdk.wheel, sdk.backend)))
