"""smoke.checks.pipeline: the checks declared once, and every real report's checks among them."""

from __future__ import annotations

import json

from smoke import stages
from smoke.backends import cuda_checks
from smoke.checks import pipeline
from smoke.rows import ROWS
from tests.helpers import REPO

H200_REPORT = REPO / "docs" / "records" / "runs" / "2026-12-03-h200-cuda-benchmark" / "reports" / "cuda_x86_64.json"


# Declared after that run (issue "A PASS means the wheel works where its tag says").
ADDED_SINCE = {"platform tag", "architecture", "libraries resolve", "dependency libraries installed", "portable kernels"}


def test_the_h200_runs_checks_are_exactly_the_cuda_rows_declared_ones():
    report = json.loads(H200_REPORT.read_text())
    ran = {c["name"] for c in report["checks"]}
    declared = set(pipeline.result_names(ROWS["cuda_x86_64"]))
    assert ran < declared and ADDED_SINCE <= declared - ran


def test_each_row_runs_the_common_checks_and_only_its_own_backends():
    cpu, gpu = pipeline.result_names(ROWS["cpu_x86_64"]), pipeline.result_names(ROWS["cuda_x86_64"])
    assert {"platform tag", "architecture", "libraries resolve", "dependency libraries installed"} <= set(cpu)
    assert set(cpu) < set(gpu)
    assert set(gpu) - set(cpu) == {c.name for c in ROWS["cuda_x86_64"].backend.checks}
    assert (gpu.index("platform tag") < gpu.index("CUDA build") < gpu.index("library RUNPATH") < gpu.index("libraries resolve")
            < gpu.index("device code") < gpu.index("wheel RECORD"))


def test_a_results_name_leads_back_to_its_declaration():
    assert pipeline.declared("data file (weighted)") is stages.DATA_FILE
    assert pipeline.declared("CUDA libraries resolve") is cuda_checks.CUDA_LIBRARIES_RESOLVE
    assert pipeline.declared("data file (heavy)") is None  # no such model
    assert pipeline.declared("data file") is None  # a per-model check has no bare result


def test_must_execute_names_declared_results():
    seed = (stages.EXPORT, stages.DELEGATE, stages.DATA_FILE, stages.WEIGHTS, stages.RUN, stages.NEGATIVE, stages.PORTABLE)
    assert all(pipeline.declared(name) in seed for name in stages.MUST_EXECUTE)
    # every result of the seed's checks, both models of each per-model one
    assert {name for check in seed for name in check.names()} == set(stages.MUST_EXECUTE)
