"""What ``das design budget`` prints: every workload entry's expected error under the
config's shares and the chosen ones, what the workload leaves out, and the shares.

Every figure is a variance of the BLUE computed from the shares and the hierarchy's
shape and known zeros (public), never from counts: nothing here is confidential.
"""

from __future__ import annotations

import numpy as np

from das.design.budget import Design, pairs_of

#: A variance below this is an exact answer's (an invariant), whatever rounding leaves.
EXACT = 1e-12


def _row(cells: list[str], widths: list[int]) -> str:
    first, *rest = cells
    return f"{first:<{widths[0]}}" + "".join(
        f"{c:>{w}}" for c, w in zip(rest, widths[1:], strict=True)
    )


def _held(design: Design) -> str:
    limit = design.options.max_ratio
    if limit is None:
        return ""
    worst = design.worst()
    met = "met" if worst <= limit else f"NOT met after rounding: worst {worst:.3f}x"
    which = "every entry" if not np.isnan(design.ratios()).any() else "every entry not known exactly"
    return f"; {which} held within {limit}x of the config's ({met})"


def _where(design: Design) -> str:
    """Which hierarchy each solve ran on: the first on a thinned copy if there is one."""
    if not design.thinned:
        return " on the whole hierarchy"
    if len(design.solutions) == 1:
        return " on a thinned hierarchy (its rounded shares evaluated on the whole)"
    return " (a thinned hierarchy, then the whole)"


def render_design(design: Design, config_path: str, workload_path: str, out: str) -> str:
    rho = design.config.budget.rho
    solved = design.solutions
    steps = " then ".join(f"{s.iterations} iterations" for s in solved)
    lines = [
        f"das design budget: {config_path}, rho {rho} ({float(rho):.6g}) unchanged",
        f"workload: {design.workload.name} ({workload_path}), {len(design.workload.entries)} entries",
        f"hierarchy: {design.hierarchy.describe()}",
        f"solver: SLSQP (scipy), {steps}" + _where(design) + _held(design),
        "",
        "expected squared error of the BLUE per geounit, summed over the query's cells:",
    ]
    widths = [44, 8, 13, 13, 10]
    lines.append(_row(["entry", "weight", "config", "design", "ratio"], widths))
    rows = zip(design.workload.entries, design.before, design.after, design.ratios(), strict=True)
    for e, b, a, r in rows:
        ratio = "exact" if np.isnan(r) else f"{r:.3f}"
        lines.append(_row([e.label, f"{e.weight:g}", f"{b:.4g}", f"{a:.4g}", ratio], widths))
    weights = [e.weight for e in design.workload.entries]
    total_b = sum(w * b for w, b in zip(weights, design.before, strict=True))
    total_a = sum(w * a for w, a in zip(weights, design.after, strict=True))
    lines.append(
        _row(["workload (weighted sum)", "", f"{total_b:.4g}", f"{total_a:.4g}",
              f"{total_a / total_b:.3f}"], widths)
    )  # fmt: skip
    if any(e.area for e in design.workload.entries):
        lines.append(
            "(area set: the sum of its pieces' errors, their covariances ignored: an approximation)"
        )
    lines += ["", "not in the workload, for reference (same measure):"]
    for what, b, a in design.reference:
        if max(a, b) < EXACT:  # an invariant: exact under any shares, rounding aside
            lines.append(_row([what, "", "0", "0", "-"], widths))
        else:
            lines.append(_row([what, "", f"{b:.4g}", f"{a:.4g}", f"{a / b:.3f}"], widths))
    lines += ["", "shares of rho (level share x query share):"]
    share_widths = [40, 22, 22]
    lines.append(_row(["pair", "config", "design"], share_widths))
    for lv, q in pairs_of(design.config):
        before = design.original.of_rho(lv, q)
        after = design.chosen.of_rho(lv, q)
        lines.append(
            _row([f"{lv} {q}", f"{float(before):.5f}", f"{float(after):.5f}"], share_widths)
        )
    lines += ["", f"written: {out} (every share an exact fraction over {design.options.denominator})"]
    return "\n".join(lines)
