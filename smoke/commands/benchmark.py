"""``nox -s benchmark -- WHEEL [--row ROW] [--runs N]``: time the gate's phases over several runs.

It times reading the wheel and refusing it for another architecture, one cold run that builds the
environment (unless ``--no-cold``), and ``--runs`` warm runs of each variant, interleaved (``overlap``, ``overlap,
exports at once`` on 4+ cores, ``serial``), so each change has its before and after from one run. It prints
min/median/max per phase and the gate's overhead over a floor: one import of torch and executorch timed alone
(``IMPORT_ALONE``) plus the run's exports and loads, since the child's own import is slowed by the gate's work beside
it (issue 35). Unknown options go to the row; ``--output FILE`` appends the Markdown to a document.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from smoke import markup, paths, proc, stages
from smoke import options as opts
from smoke.environment import build, loaderenv
from smoke.errors import GateError, WrongPlatform
from smoke.readers import wheel as wheels
from smoke.rows import ROWS, check_machine

IMPORT = stages.IMPORT_PHASE
EXPORTS = stages.EXPORT.names()
LOADS = tuple(stages.load_phase(model) for model in stages.MODELS)
# Parent phases carry paths in their names; they are grouped by these prefixes.
_PREFIXES = ("reading the wheel", "checking what the wheel ships", "building the environment", "reusing the environment",
             "probing the environment")


def phase_key(name: str) -> str:
    return next((p for p in _PREFIXES if name.startswith(p)), name)


def spread(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def time_reading(path: Path, repeats: int) -> dict[str, list[float]]:
    wheel = wheels.read_wheel(path)
    other = next(r for r in ROWS.values() if r.machine not in wheel.machines)
    read, refuse = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        wheels.read_wheel(path)
        read.append(time.perf_counter() - t)
        t = time.perf_counter()
        try:
            check_machine(wheels.read_wheel(path), other)
        except WrongPlatform:
            pass
        refuse.append(time.perf_counter() - t)
    return {"read the wheel": read, f"read and refuse it for {other.name}": refuse}


# What the child's first phase imports (smoke.child.run: IMPORT_PHASE), and nothing else, timed inside the process
# as the child times that phase (the interpreter's start is not in it).
IMPORT_ALONE = ("import time; start = time.perf_counter(); import executorch.exir, torch; "
                "print(time.perf_counter() - start)")


def time_import_alone(env_dir: Path) -> float:
    """Seconds of ``IMPORT_ALONE``'s import in the row's environment, its clean loader environment, nothing else running."""
    python = build.environment_python(env_dir)
    env = loaderenv.for_environment(python, paths.HOME).env
    ran = proc.run([python, "-c", IMPORT_ALONE], what="importing torch and executorch alone", cwd=paths.HOME, env=env)
    try:
        return float(ran.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise GateError(f"importing torch and executorch alone printed no time: {proc.tail(ran.stdout + ran.stderr)}") from exc


def floor(run: dict, import_alone: float) -> float:
    """A run's floor: one import measured alone plus the run's own exports and loads."""
    return import_alone + run["unavoidable"]


def one_run(row: str, wheel: Path, env_dir: Path, extra: list[str], reuse: bool, overlap: bool,
            parallel: str | None = None, keep: Path | None = None) -> dict:
    """One run of the row, timed; ``keep``: a path without suffix, where its output (``.log``) and report (``.json``)
    are written too, so that what each check said in a measured run can be read."""
    with tempfile.TemporaryDirectory(prefix="gate-bench-") as reports:
        cmd = [sys.executable, "-m", "smoke", row, str(wheel), "--env-dir", str(env_dir), "--report-dir", reports, *extra]
        cmd += ["--reuse-env"] if reuse else []
        cmd += [] if overlap else ["--no-overlap"]
        cmd += [] if parallel is None else ["--parallel-exports", parallel]
        start = time.monotonic()
        # The run is in the gate's folder (paths.HOME); a relative path among the options passed on is the caller's (smoke.options.path).
        env = {**os.environ, paths.INVOKED_FROM: str(paths.invoked_from())}
        ran = proc.run(cmd, what=f"the {row} run", cwd=paths.HOME, env=env, check=False)
        wall = time.monotonic() - start
        report_path = Path(reports) / f"{row}.json"
        if not report_path.is_file():
            raise GateError(f"the {row} run wrote no report (exit {ran.returncode}): {proc.tail(ran.stdout + ran.stderr)}")
        report = json.loads(report_path.read_text())
        if keep is not None:
            keep.with_suffix(".log").write_text(ran.stdout + ran.stderr, encoding="utf-8")
            keep.with_suffix(".json").write_text(report_path.read_text(encoding="utf-8"), encoding="utf-8")
    phases: dict[str, float] = {}
    for entry in report["phases"]:
        phases[phase_key(entry["name"])] = phases.get(phase_key(entry["name"]), 0.0) + float(entry["seconds"] or 0)
    # Exports that ran at the same time (the weightless one in a process of its own) cost the
    # longer of the two, not their sum.
    together = any(c["name"] in EXPORTS and c["measured"].get("own_process") for c in report["checks"])
    exports = [phases.get(name, 0.0) for name in EXPORTS]
    loads = sum(phases.get(name, 0.0) for name in LOADS)
    unavoidable = (max(exports) if together else sum(exports)) + loads
    return {"wall": wall, "total": report["seconds"], "phases": phases, "unavoidable": unavoidable,
            "verdict": report["verdict"], "versions": report["versions"], "device": report["device"]}


def table(variants: dict[str, list[dict]], alone: list[float] | None = None) -> list[str]:
    names: list[str] = []
    for runs in variants.values():
        for run in runs:
            names += [n for n in run["phases"] if n not in names]
    lines = ["| phase (s: min / median / max) | " + " | ".join(f"{v} ({len(r)} runs)" for v, r in variants.items()) + " |",
             "|---" * (len(variants) + 1) + "|"]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(spread([r["phases"][name] for r in runs if name in r["phases"]])
                                                 for runs in variants.values()) + " |")
    lines.append("| **whole run** | " + " | ".join(spread([r["total"] for r in runs]) for runs in variants.values()) + " |")
    lines.append("| unavoidable (exports, the longer one where they ran at once, + loads) | "
                 + " | ".join(spread([r["unavoidable"] for r in runs]) for runs in variants.values()) + " |")
    lines.append("| **overhead**: whole over unavoidable | " + " | ".join(
        percent([r["total"] / r["unavoidable"] - 1 for r in runs if r["unavoidable"]]) for runs in variants.values()) + " |")
    if alone:
        once = statistics.median(alone)
        lines.append(f"| import of torch and executorch alone ({len(alone)} times, nothing of the gate's beside it) | "
                     + " | ".join(spread(alone) for _ in variants) + " |")
        lines.append("| floor: that import (median) + exports + loads | "
                     + " | ".join(spread([floor(r, once) for r in runs]) for runs in variants.values()) + " |")
        lines.append("| **whole run over the floor** | " + " | ".join(
            ratio([r["total"] / floor(r, once) for r in runs]) for runs in variants.values()) + " |")
    return lines


def ratio(values: list[float]) -> str:
    if not values:
        return "—"
    return " / ".join(f"{v:.2f}x" for v in (min(values), statistics.median(values), max(values)))


def percent(values: list[float]) -> str:
    if not values:
        return "—"
    return " / ".join(f"{100 * v:+.0f} %" for v in (min(values), statistics.median(values), max(values)))


def main(argv: list[str], prog: str = "nox -s benchmark --") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Time the gate's phases over several runs of one row: "
                                     "min, median and max of each, and the whole run over its floor (one import alone, "
                                     "the exports and the loads).")
    parser.add_argument("wheel", type=opts.path, help="the executorch wheel to run the row on")
    parser.add_argument("--row", choices=sorted(ROWS), default="cpu_x86_64", help="the platform row (default: cpu_x86_64)")
    parser.add_argument("--runs", type=int, default=3, help="warm runs of each variant (default: 3)")
    parser.add_argument("--env-dir", type=opts.path, help="default: .gate/bench/ROW")
    parser.add_argument("--no-cold", action="store_true", help="skip the run that builds the environment")
    parser.add_argument("--output", type=opts.path, help="append the Markdown to this file")
    parser.add_argument("--variants", choices=("all", "default"), default="all",
                        help="default: only the gate's default (the floor and the whole run side by side, fewer runs)")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="start no round of warm runs that would end past this many seconds from the start "
                             "(judged by the longest round so far); the table then shows the rounds that ran")
    parser.add_argument("--log-dir", type=opts.path, metavar="DIR",
                        help="keep each run's output and report in DIR (cold.log, VARIANT-N.log, .json), a folder the "
                             "benchmark makes; it must not exist")
    args, extra = parser.parse_known_args(argv)
    started = time.monotonic()
    if args.log_dir is not None:
        try:
            args.log_dir.mkdir(parents=True)
        except FileExistsError:
            raise GateError(f"--log-dir {args.log_dir} exists: name a folder that does not, the benchmark makes it") from None

    def kept(name: str) -> Path | None:
        return None if args.log_dir is None else args.log_dir / re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")

    # A GateError (the wheel refused, a build that failed) ends the run at the edge (smoke.cli): one ERROR line, exit 2.
    env_dir = args.env_dir or paths.BENCH / args.row
    reading = time_reading(args.wheel, 20)
    cold = None
    if not args.no_cold:
        print(f"cold run: {args.row}, building the environment in {env_dir}", flush=True)
        cold = one_run(args.row, args.wheel, env_dir, extra, reuse=False, overlap=True, keep=kept("cold"))
    kinds = [("overlap (default)", True, None), ("overlap, exports at once", True, "yes"), ("serial (--no-overlap)", False, None)]
    if (os.cpu_count() or 1) < 4:  # two exports at once on fewer cores: not worth a variant
        kinds.pop(1)
    if args.variants == "default":
        kinds = kinds[:1]
    variants: dict[str, list[dict]] = {name: [] for name, _, _ in kinds}
    longest, stopped, alone = 0.0, "", []
    for i in range(args.runs):
        used = time.monotonic() - started
        if args.budget is not None and i and used + longest > args.budget:
            stopped = (f"Stopped after {i} of {args.runs} rounds: the next would have ended past the budget "
                       f"({used:.0f} s used, the longest round took {longest:.0f} s, budget {args.budget:.0f} s).")
            print(stopped, flush=True)
            break
        round_start = time.monotonic()
        for name, overlap, parallel in kinds:
            run = one_run(args.row, args.wheel, env_dir, extra, reuse=True, overlap=overlap, parallel=parallel,
                          keep=kept(f"{name} {i + 1}"))
            variants[name].append(run)
            print(f"run {i + 1}/{args.runs} {name}: {run['total']:.1f} s, verdict {run['verdict']}", flush=True)
        alone.append(time_import_alone(env_dir))
        print(f"run {i + 1}/{args.runs} import of torch and executorch alone: {alone[-1]:.1f} s", flush=True)
        longest = max(longest, time.monotonic() - round_start)
    sample = variants["overlap (default)"][0]
    device = sample["device"] or {}
    lines = [
        f"### {args.row} on {markup.text(args.wheel.name)}, {datetime.date.today().isoformat()}",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; device {markup.text(device.get('name', 'none'))}. "
        + markup.text(f"executorch {sample['versions']['executorch']}, torch {sample['versions']['torch']}, "
                      f"Python {sample['versions']['python']}."),
        f"Command: {markup.code('python -m smoke benchmark ' + ' '.join(argv))}",
        "",
        "| reading (s: min / median / max, 20 times) | |",
        "|---|---|",
        *[f"| {name} | {spread(values)} |" for name, values in reading.items()],
        "",
    ]
    if cold is not None:
        built = cold["phases"].get("building the environment", 0.0)
        warm = statistics.median(r["total"] for r in variants["overlap (default)"])
        lines += [f"Cold run (environment built): whole run {cold['total']:.1f} s, of which building the environment "
                  f"{built:.1f} s; over the default variant's warm median ({warm:.1f} s) it took {cold['total'] - warm:.1f} s "
                  f"more, {cold['total'] - warm - built:+.1f} s besides the build.", ""]
    lines += ["Warm runs on the reused environment, the variants interleaved:", "", *table(variants, alone), ""]
    lines += [stopped, ""] if stopped else []
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output is not None:
        with args.output.open("a", encoding="utf-8") as handle:
            handle.write(text + "\n")
        print(f"appended to {args.output}")
    return 0
