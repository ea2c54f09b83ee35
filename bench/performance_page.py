"""docs/performance.md, generated from the results files in bench/results.

    python -m bench.performance_page [--results bench/results] [--doc docs/performance.md]

Every figure on the page comes from one results file, and each section names the command
that reproduces it, the commit it measured and when; the machine is described from the
files themselves. The page holds the current figures only: a full benchmark run replaces
its file and ``make bench`` regenerates the page (a test holds the committed page equal to
what this module makes from the committed files).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.harness import REPO_ROOT, RESULTS_DIR
from bench.national_estimate import render as national_section
from das.input.describe import markdown_table

GIB = 1 << 30
MIB = 1 << 20


def provenance(data: Mapping[str, Any], command: str) -> str:
    """The line under a section's title: how to reproduce it, and what it measured."""
    commit = data.get("git_commit")
    code = f"commit `{commit[:7]}`" if commit else "commit not recorded"
    dirty = " with uncommitted changes" if data.get("dirty") else ""
    return f"`{command}`; {code}{dirty}, {data.get('timestamp', 'time not recorded')}."


def machine_lines(results: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The machine of the newest results file that describes one, and the files' loads."""
    described = [d for d in results.values() if d.get("machine")]
    if not described:
        return ["No results file describes its machine."]
    newest = max(described, key=lambda d: str(d.get("timestamp", "")))
    m = newest["machine"]
    cpu = f"{m['cpu']}, " if m.get("cpu") else ""
    versions = ", ".join(
        f"{name} {m[name]}" for name in ("python", "numpy", "pyspark", "pyarrow") if m.get(name)
    )
    loads = ", ".join(
        f"{name} {d['machine']['load_average'][0]:.1f}"
        for name, d in sorted(results.items())
        if d.get("machine", {}).get("load_average")
    )
    return [
        f"{cpu}{m['cpu_count']} cores ({m.get('usable_cpus')} usable), "
        f"{m['memory_bytes'] / GIB:.1f} GiB, {m['platform']}; {versions}. Spark runs "
        "`local[2]` unless a section says otherwise. The machine is shared: the load average "
        f"(1 minute) at each file's writing was {loads}; compare figures of one file only.",
    ]


def _f(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def e2e_section(data: Mapping[str, Any]) -> list[str]:
    rows = [
        [r["input"], f"{r['records']['output_records']:,}", _f(r["wall_s"], 0),
         _f(r["read_only_s"]), _f(r["job_over_read"], 2), f"{r['solves']:,}",
         _f(r["solves_per_s"]), f"{r['peak_rss_bytes']['all'] / GIB:.2f}"]
        for r in data["runs"]
    ]  # fmt: skip
    phases = list(dict.fromkeys(p for r in data["runs"] for p in r["phases_s"]))
    by_phase = [[p, *(_f(r["phases_s"].get(p)) for r in data["runs"])] for p in phases]
    return [
        "The production configuration (test mode, seed 1) end to end, beside the reader alone "
        "(the median of its fresh-process runs); peak memory of all processes at once.",
        "",
        markdown_table(
            ["input", "persons", "wall s", "read only s", "job / read only", "solves",
             "solves/s", "peak RSS GiB"],
            rows,
        ),
        "",
        "Wall seconds per phase (`validate`: the rest of the wall time):",
        "",
        markdown_table(["phase", *(r["input"] for r in data["runs"])], by_phase),
    ]


def read_section(data: Mapping[str, Any]) -> list[str]:
    rows = [
        [f"{r['persons']:,}", f"{r['blocks']:,}", _f(r.get("read_check_s")),
         _f(r.get("aggregate_s")), _f(r.get("total_s")), _f(r.get("persons_per_s"), 0),
         _f(r.get("driver_peak_rss_bytes", 0) / MIB, 0), _f(r.get("jvm_peak_rss_bytes", 0) / MIB, 0),
         r.get("error", "")]
        for r in data["runs"]
    ]  # fmt: skip
    return [
        f"The reader alone on synthetic states (`{data['config']}`): load and contract checks, "
        "then the histograms of every level.",
        "",
        markdown_table(
            ["persons", "blocks", "read + check s", "aggregate s", "total s", "persons/s",
             "driver MiB", "JVM MiB", "error"],
            rows,
        ),
    ]


def noise_section(data: Mapping[str, Any]) -> list[str]:
    rows = [
        [r["sigma2"], _f(r["ours"]["draws_per_s_best"], 0),
         _f(r["ours"]["draws_per_s_median"], 0),
         _f((r["opendp"] or {}).get("draws_per_s_best"), 0), _f(r["ratio_best"], 0),
         _f(r["ours"]["words_per_draw"], 2)]
        for r in data["throughput"]
    ]  # fmt: skip
    calls = [
        [r["size"], r["fresh_child_per_call"], _f(r["us_per_call"]),
         _f(r.get("us_per_stream_one_call"))]
        for r in data["per_call"]
    ]  # fmt: skip
    return [
        f"The exact discrete Gaussian sampler (secure generator), {data['size']:,} draws per "
        f"timed call, best of {data['repeats']}, with OpenDP's `make_gaussian` in the same "
        "process.",
        "",
        markdown_table(
            ["sigma^2", "draws/s, best", "draws/s, median", "OpenDP draws/s", "ratio",
             "words/draw"],
            rows,
        ),
        "",
        markdown_table(
            ["draws per call", "fresh child stream per call", "us per call",
             "us per stream, one call for all"],
            calls,
        ),
        "",
        f"A child stream costs {data['child_creation_us']:.2f} us to open; the keystream runs "
        f"at {data['keystream_gbytes_per_s']:.2f} GB/s.",
    ]


def optimize_section(data: Mapping[str, Any]) -> list[str]:
    s, settings = data["summary"], data["settings"]
    return [
        f"The per-parent solver on {settings['instances']} block-group-like parents, "
        f"{settings['reference']} of them also with the cvxpy reference "
        "(`das/solve/reference.py`), one BLAS thread.",
        "",
        markdown_table(
            ["figure", "value"],
            [
                ["median s per parent (p90)", f"{s['fast_seconds_median']:.3f} "
                 f"({s['fast_seconds_p90']:.3f})"],
                ["reference median s per parent", _f(s.get("reference_seconds_median"), 2)],
                ["speed-up, ratio of medians (same parents)", _f(s.get("speedup_of_medians"))],
                ["max relative L2 objective difference",
                 f"{s.get('max_relative_l2_objective_difference', 0):.2g}"],
                ["max relative rounding objective difference, same L2 input",
                 f"{s.get('max_relative_rounding_objective_difference') or 0:.2g}"],
            ],
        ),
    ]


def cluster_section(data: Mapping[str, Any]) -> list[str]:
    rows = []
    for mode, found in data["modes"].items():
        phases = found["phases"]
        slowest = max(phases, key=lambda p: phases[p]["straggler_s"], default="-")
        straggler = phases[slowest]["straggler_s"] if phases else None
        rows.append([mode, _f(found["wall_s"]), slowest, _f(straggler)])
    return [
        f"The job on {data['input']} on a loopback standalone cluster (2 workers of 1 core) and "
        f"on `local[2]`, {data['partitions']} shuffle partitions (docs/cluster.md explains the "
        "columns).",
        "",
        markdown_table(["mode", "wall s", "phase with the most straggler time", "straggler s"], rows),
    ]


def pointer_section(name: str) -> Callable[[Mapping[str, Any]], list[str]]:
    def section(data: Mapping[str, Any]) -> list[str]:
        return [f"Shown in docs/accuracy.md (generated from `{name}.json`)."]

    return section


#: (file, title, command that reproduces it, section). The accuracy results have their page.
SECTIONS: Sequence[tuple[str, str, str, Callable[[Mapping[str, Any]], list[str]]]] = (
    ("e2e", "End to end", "make bench-e2e", e2e_section),
    ("read", "The reader", "make bench-read", read_section),
    ("noise", "The sampler", "make bench-noise", noise_section),
    ("optimize", "The per-parent solver", "make bench-optimize", optimize_section),
    ("cluster", "A loopback cluster", "make bench-cluster", cluster_section),
    ("accuracy", "Accuracy", "make bench-accuracy", pointer_section("accuracy")),
    ("coverage", "Coverage of the estimates' intervals", "make bench-coverage",
     pointer_section("coverage")),
    ("h1", "The occupancy product's accuracy", "make bench-h1", pointer_section("h1")),
    ("dhc", "The DHC persons product", "make bench-dhc", pointer_section("dhc")),
)  # fmt: skip


#: Where the time goes, for a change meant to be faster: commands, no figures.
TOOLS = [
    "A run kept with `python -m bench.bench_e2e --keep DIR` (or `out/national/run_*`) can be "
    "taken apart:",
    "",
    "```",
    "python -m bench.profile_national INPUT                  # cProfile, driver and every UDF",
    "python -m bench.profile_family RUN INPUT --config CONFIG --level tract --top 2",
    "python -m bench.replay_families capture RUN INPUT --config CONFIG --level block --out F",
    "python -m bench.replay_families replay F --repeat 3 --save-counts C.npz  # later: --compare",
    "python -m bench.total_bound RUN --input INPUT           # the linear estimate's error bound",
    "```",
    "",
    "A change meant to be exact must give identical counts on every replayed family.",
]


def load(results: Path) -> dict[str, dict[str, Any]]:
    """Every results file in ``results`` by name (``<name>.json``)."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}


def page(results: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "# Performance",
        "",
        "Generated by `python -m bench.performance_page` from `bench/results/*.json`; do not "
        "edit by hand. `make bench` runs every benchmark and regenerates this page; "
        "`make bench-quick` checks that each still runs, on small inputs, without touching "
        "these figures. Each section names the command that reproduces it and the commit it "
        "measured.",
        "",
        "## The machine",
        "",
        *machine_lines(results),
        "",
    ]
    for name, title, command, section in SECTIONS:
        if name not in results:
            lines += [f"## {title}", "", f"`bench/results/{name}.json` is missing: `{command}`.", ""]
            continue
        lines += [f"## {title}", "", provenance(results[name], command), "", *section(results[name]), ""]
    if "national" in results:
        lines += [
            "## National-scale inputs",
            "",
            "`make bench-national` (`SCALE=0.05` for a small check): the production job on "
            "the largest county family (`la_like`: 10M persons, one county of 2,500 tracts), "
            "the largest state family (`texas_like`: 5M, 254 counties) and a nation of 52 "
            "states of 60 counties (`us_shaped`: 5M), a third of blocks empty, each in a "
            "fresh process; then the U.S. run estimated from them.",
            "",
            national_section(results["national"]).replace("## ", "### ", 1),
            "",
        ]
    lines += ["## Tools", "", *TOOLS]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--doc", type=Path, default=REPO_ROOT / "docs" / "performance.md")
    args = parser.parse_args(argv)
    args.doc.write_text(page(load(args.results)))
    print(f"wrote {args.doc}")


if __name__ == "__main__":
    main()
