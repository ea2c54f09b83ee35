"""docs/accuracy.md from the results files alone: ``accuracy.json`` (with ``coverage.json``,
``h1.json`` and ``dhc.json`` beside it) holds every table the page shows, so the page is a function of
the committed results and can be made again without the runs.

    python -m bench.accuracy_results [--results bench/results] [--docs docs] [--plots]

``bench.bench_accuracy`` writes its page the same way, from the payload it has just written,
so the page in the repository and the one made from its results file are the same text (a
test holds them equal). The goals are judged again from ``bench.goals`` each time: changing
a goal changes the page without rerunning anything.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from bench import accuracy_tables as tables
from bench.accuracy_page import document, plot_bias, plot_levels
from bench.harness import REPO_ROOT, RESULTS_DIR

NAME = "accuracy"
IMAGES = {"levels": "img/accuracy_levels.png", "bias": "img/accuracy_bias.png"}


def _frame(records: list[dict[str, Any]], source_column: bool = True) -> pd.DataFrame:
    """Records back to a table; ``source`` categorical in the variants' order, as built."""
    frame = pd.DataFrame.from_records(records)
    if source_column and "source" in frame:
        frame["source"] = pd.Categorical(
            frame["source"], tables.sources(list(frame["source"].unique()))
        )
    return frame


def level_order(data: Mapping[str, Any]) -> list[str]:
    """The levels top-down: recorded, or in the order of the level table's rows."""
    return list(data.get("level_order") or dict.fromkeys(r["level"] for r in data["levels"]))


def tables_from_results(
    data: Mapping[str, Any],
    coverage: Mapping[str, Any] | None,
    h1: Mapping[str, Any] | None,
    dhc: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The page's tables from the results files, the goals judged again."""
    levels_order = level_order(data)
    levels = _frame(data["levels"])
    levels["level"] = pd.Categorical(levels["level"], levels_order, ordered=True)
    bias = {"diversity_bin": _frame(data["bias"]["diversity"]),
            "size_bin": _frame(data["bias"]["size"])}  # fmt: skip
    bound = {str(k): float(v) for k, v in data.get("total_linear_bound_expected_mae", {}).items()}
    whole = pd.DataFrame.from_records(data["per_seed"])
    rows = None if coverage is None else tables.coverage_rows(coverage, levels_order)
    return {
        "h1": h1,
        "dhc": dhc,
        "levels": levels,
        "diversity": bias["diversity_bin"],
        "size": bias["size_bin"],
        "cross": {v: _frame(t, False) for v, t in data["bias"]["cross"].items()},
        "goals": tables.goals(levels, bias, whole, bound),
        "bound": bound,
        "cost": pd.DataFrame.from_records(
            data["estimate_cost"],
            columns=["variant", "seed", "estimate_s", "job_s", "share", "wall_s", "wall_share"],
        ).astype({"wall_s": float, "wall_share": float}),
        "coverage": None if coverage is None else {**coverage, "rows": rows},
    }


def page(
    data: Mapping[str, Any],
    coverage: Mapping[str, Any] | None,
    h1: Mapping[str, Any] | None,
    dhc: Mapping[str, Any] | None,
) -> str:
    """docs/accuracy.md's text from the four results files' contents."""
    info = {
        **{k: data[k] for k in ("config_file", "config_name", "rho", "input_persons", "seeds")},
        "variants": list(data["variants"]),
    }
    provenance = {
        k: data.get(k) for k in ("command", "git_commit", "dirty", "timestamp", "input", "name")
    }
    return document(tables_from_results(data, coverage, h1, dhc), info, provenance, IMAGES)


def _optional(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def page_from_folder(results: Path) -> str:
    """docs/accuracy.md's text from the results files in ``results``."""
    data = json.loads((results / f"{NAME}.json").read_text())
    optional = {name: _optional(results / f"{name}.json") for name in ("coverage", "h1", "dhc")}
    return page(data, optional["coverage"], optional["h1"], optional["dhc"])


def plots_from_folder(results: Path, docs: Path) -> None:
    """The page's two plots from ``accuracy.json`` in ``results``."""
    data = json.loads((results / f"{NAME}.json").read_text())
    found = tables_from_results(data, None, None, None)
    plot_levels(found["levels"], level_order(data), docs / IMAGES["levels"])
    plot_bias(found["diversity"], found["size"], docs / IMAGES["bias"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--docs", type=Path, default=REPO_ROOT / "docs")
    parser.add_argument("--plots", action="store_true", help="draw the two plots again too")
    args = parser.parse_args(argv)
    (args.docs / "accuracy.md").write_text(page_from_folder(args.results))
    if args.plots:
        plots_from_folder(args.results, args.docs)
    print(f"wrote {args.docs / 'accuracy.md'}")


if __name__ == "__main__":
    main()
