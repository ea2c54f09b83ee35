"""The job on a 2-worker standalone cluster (loopback) and on local[2]: task-time spread per phase.

    python -m bench.bench_cluster [--persons N] [--ri PATH] [--config ...] [--partitions 8]
        [--results DIR]

Starts the loopback cluster (das.cluster.standalone, 2 workers of 1 core), runs
``spark-submit jobs/topdown.py`` on it with Spark's event log on, runs the same on
local[2], and reads both event logs. The driver names every Spark job after its phase
(``measure``, ``solve block``, ...; das/job/run.py), so each stage maps to a phase. Per phase:
tasks, task time min / median / p90 / max, max/median, and the straggler time: for each
stage, stage end minus the end of its second-to-last task (how long one task ran alone),
summed over the phase's stages. Default input: the RI 2010 blocks fixture with the
production config in test mode (seed 1); ``--persons N`` uses a synthetic state instead.
Results: ``cluster.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.harness import REPO_ROOT, RI, add_results_argument, print_table, write_results
from das.cluster import standalone
from das.fixtures.blocks import write_blocks_fixture
from das.fixtures.synthetic import write_synthetic_fixture

BIN = Path(sys.executable).parent


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def submit(master: str, args: argparse.Namespace, input_dir: Path, output: Path, events: Path) -> float:
    """Run the job by spark-submit with the event log in ``events``; its wall seconds."""
    events.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    command = [
        str(BIN / "spark-submit"),
        "--master", master,
        "--executor-memory", args.executor_memory,
        "--driver-memory", "2g",
        "--conf", "spark.eventLog.enabled=true",
        "--conf", f"spark.eventLog.dir={events.resolve().as_uri()}",
        "--conf", "spark.eventLog.compress=false",
        "--conf", "spark.eventLog.rolling.enabled=false",
        str(REPO_ROOT / "jobs" / "topdown.py"),
        args.config,
        "--input", str(input_dir),
        "--output", str(output),
        "--seed", "1",
        "--set", "run.production=false",
        "--set", f"spark.shuffle_partitions={args.partitions}",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=REPO_ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the job on {master} failed with exit code {done.returncode}")
    return time.perf_counter() - start


def read_events(events: Path) -> list[dict]:
    logs = [p for p in events.iterdir() if p.is_file() and not p.name.endswith(".inprogress")]
    if len(logs) != 1:
        raise SystemExit(f"expected one event log in {events}, found {[p.name for p in logs]}")
    with logs[0].open() as lines:
        return [json.loads(line) for line in lines]


def phase_stats(events: list[dict]) -> dict[str, dict]:
    """Per phase (Spark job description): task-time spread and straggler time."""
    phase_of_stage: dict[int, str] = {}
    tasks: dict[int, list[tuple[int, int]]] = defaultdict(list)  # stage -> (launch, finish) ms
    stage_end: dict[int, int] = {}
    for event in events:
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            phase = (event.get("Properties") or {}).get("spark.job.description") or "(none)"
            for stage in event["Stage IDs"]:
                phase_of_stage.setdefault(stage, phase)
        elif kind == "SparkListenerTaskEnd" and event["Task End Reason"]["Reason"] == "Success":
            info = event["Task Info"]
            tasks[event["Stage ID"]].append((info["Launch Time"], info["Finish Time"]))
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            if "Completion Time" in info:
                stage_end[info["Stage ID"]] = info["Completion Time"]
    phases: dict[str, dict] = {}
    for stage, phase in phase_of_stage.items():
        entry = phases.setdefault(phase, {"durations": [], "straggler_ms": 0, "stages": 0})
        spans = tasks.get(stage, [])
        if not spans:
            continue  # a skipped stage (its shuffle output was reused)
        entry["stages"] += 1
        entry["durations"] += [finish - launch for launch, finish in spans]
        ends = sorted(finish for _, finish in spans)
        if len(ends) >= 2 and stage in stage_end:
            entry["straggler_ms"] += stage_end[stage] - ends[-2]
    result = {}
    for phase, entry in phases.items():
        seconds = np.asarray(entry["durations"], dtype=float) / 1000
        if not len(seconds):
            continue
        median = float(np.median(seconds))
        result[phase] = {
            "stages": entry["stages"],
            "tasks": len(seconds),
            "min_s": float(seconds.min()),
            "median_s": median,
            "p90_s": float(np.quantile(seconds, 0.9)),
            "max_s": float(seconds.max()),
            "max_over_median": float(seconds.max() / median) if median > 0 else None,
            "straggler_s": entry["straggler_ms"] / 1000,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, help="a synthetic state of N persons instead of RI")
    parser.add_argument("--ri", default=str(RI), help="RI block-count file")
    parser.add_argument("--config", default="configs/pl94_2020_production.toml")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--executor-memory", default="2g")
    parser.add_argument("--worker-memory", default="3g")
    add_results_argument(parser)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    input_dir = work / "input"
    if args.persons:
        write_synthetic_fixture(args.persons, input_dir, seed=1)
        name = f"synthetic {args.persons:,}"
    else:
        write_blocks_fixture(Path(args.ri), input_dir, seed=1)
        name = "RI 2010 blocks"
    ports = free_ports(6)
    cluster = standalone.start_cluster(
        2, work / "cluster", ports[0], ports[1], ports[2:4], ports[4:6], 1, args.worker_memory
    )
    try:
        cluster_wall = submit(cluster.url, args, input_dir, work / "run_cluster", work / "ev_c")
    finally:
        standalone.stop_cluster(cluster)
    local_wall = submit("local[2]", args, input_dir, work / "run_local", work / "ev_l")
    modes = {
        "cluster": {"wall_s": cluster_wall, "phases": phase_stats(read_events(work / "ev_c"))},
        "local[2]": {"wall_s": local_wall, "phases": phase_stats(read_events(work / "ev_l"))},
    }
    headers = ["mode", "phase", "tasks", "min s", "median s", "p90 s", "max s", "max/med",
               "straggler s"]  # fmt: skip
    keys = ("tasks", "min_s", "median_s", "p90_s", "max_s", "max_over_median", "straggler_s")
    rows = [
        [mode, phase, *(s[k] for k in keys)]
        for mode, data in modes.items()
        for phase, s in data["phases"].items()
    ]
    print_table(headers, rows, title=f"\nTask times per phase, {name}")
    print(f"\nwall time: cluster (2 workers x 1 core) {cluster_wall:.1f} s, local[2] {local_wall:.1f} s")
    path = write_results(
        "cluster",
        {"input": name, "config": args.config, "partitions": args.partitions, "modes": modes},
        args.results,
    )
    print(f"results: {path} (work files in {work})")


if __name__ == "__main__":
    main()
