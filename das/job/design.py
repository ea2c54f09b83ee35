"""``das design``: measurement design before a run (``das design budget``, ``das design spine``).

The arguments and the command's body; the work is in ``das.design``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from das.errors import UserError


def add_design_arguments(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    add_command: Callable[..., argparse.ArgumentParser],
) -> None:
    """``das design``'s parsers; ``add_command`` makes a (sub)command as the cli does."""
    design = add_command(commands, "design", "design the measurements before a run")
    actions = design.add_subparsers(dest="action", required=True)
    budget = add_command(
        actions,
        "budget",
        "choose the shares of rho that minimise a workload's expected error",
        "Choose the per-level, per-query shares of the config's rho that minimise the "
        "workload's expected squared error of the BLUE on a representative hierarchy, write "
        "them into a copy of the config as exact fractions (same total rho), and print each "
        "workload entry's expected error under the config's shares and the new ones.",
    )
    budget.add_argument("config", help="run configuration (TOML): levels, queries, rho")
    budget.add_argument(
        "--workload", required=True, help="workload (TOML), e.g. configs/workloads/pl94_2020.toml"
    )
    budget.add_argument("--out", required=True, help="the designed config to write (TOML)")
    tree = budget.add_mutually_exclusive_group(required=True)
    tree.add_argument(
        "--input",
        metavar="DIR",
        help="the hierarchy of an input directory: its geography file's blocks and the unit "
        "types each block has (public invariants); nothing else of the input is read",
    )
    tree.add_argument(
        "--fanouts",
        metavar="N,N,...",
        help="a synthetic hierarchy: the children of each geounit of every level but the "
        "blocks, e.g. 1,5,49,3,31 (blocks: structural zeros only)",
    )
    budget.add_argument(
        "--max-ratio",
        type=float,
        metavar="R",
        help="hold every entry's expected error within R times the config's (e.g. 1.1)",
    )
    budget.add_argument(
        "--denominator",
        type=int,
        default=4096,
        help="the shares' common denominator (default 4096)",
    )
    add_spine_arguments(actions, add_command)


def add_spine_arguments(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    add_command: Callable[..., argparse.ArgumentParser],
) -> None:
    """``das design spine``: a geography file whose block groups serve target areas."""
    from das.design.spine import DEFAULT_CUTOFF

    spine = add_command(
        actions,
        "spine",
        "a geography file whose block groups serve target areas (the optimised spine)",
        "Write a geography file (docs/input.md) whose block groups are redefined within "
        "tracts so that each target area is a union of few spine geounits, block groups of "
        "at most isqrt(n) + CUTOFF blocks (n: blocks in the tract) as in the 2020 production, "
        "or the tract's largest standard block group if larger, within the standard block "
        "groups (see --split-block-groups, --strict-bound); counties, tracts and GEOIDs stay. "
        "A run takes it with --set input.geography=OUT.",
    )
    spine.add_argument("--input", required=True, help="input directory (its geography.parquet, "
                       "else the blocks its units table names)")  # fmt: skip
    spine.add_argument("--targets", required=True, help="Parquet file with columns geoid "
                       "(a block) and target (the area's name); blocks in no target allowed")  # fmt: skip
    spine.add_argument("--out", required=True, help="the geography file to write (.parquet, new)")
    spine.add_argument("--cutoff", type=int, default=DEFAULT_CUTOFF,
                       help=f"block groups of at most isqrt(n) + CUTOFF blocks (default {DEFAULT_CUTOFF})")  # fmt: skip
    spine.add_argument("--split-block-groups", dest="keep_block_groups", action="store_false",
                       help="new block groups across the standard ones within a tract (2020's "
                       "rule): fewer pieces for targets, but the standard block groups leave the "
                       "spine (their totals sums of many blocks); by default each stays a union "
                       "of a few new ones")  # fmt: skip
    spine.add_argument("--strict-bound", action="store_true",
                       help="2020's bound isqrt(n) + CUTOFF even below the tract's largest "
                       "standard block group (more block groups per tract: a less accurate "
                       "tract total); by default the bound is never below it")  # fmt: skip


def spine_command(args: argparse.Namespace) -> None:
    from das.design.spine_command import design_spine, render_spine

    out = Path(args.out)
    stats = design_spine(
        Path(args.input),
        Path(args.targets),
        out,
        args.cutoff,
        args.keep_block_groups,
        args.strict_bound,
    )
    print(render_spine(stats, out))


def design_command(args: argparse.Namespace) -> None:
    if args.action == "spine":
        spine_command(args)
        return
    if args.action != "budget":
        raise UserError(f"das design {args.action}: unknown action")
    from das.design.budget import Options, check_out, design_budget, write_design
    from das.design.hierarchy import from_fanouts, from_input
    from das.design.report import render_design
    from das.design.workload import load_workload
    from das.spec.config import load_config

    start = time.perf_counter()
    options = Options(args.max_ratio, args.denominator)
    check_out(args.config, args.out)
    config = load_config(args.config)
    workload = load_workload(args.workload, config.schema, config.geography.names)
    given = args.input is not None
    hierarchy = from_input(config, args.input) if given else from_fanouts(config, args.fanouts)
    design = design_budget(config, workload, hierarchy, options)
    write_design(design, args.config, args.out)
    print(render_design(design, args.config, args.workload, args.out))
    print(f"done in {time.perf_counter() - start:.0f} s")
