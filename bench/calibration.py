"""How hard are the distractors? Their outranking rate per skill against real skills' (issue 35).

A distractor family stands in for the rest of a big library, so it should compete with the
targets as much as real skills do, no more and no less. For each should-trigger request the
bench counts the non-target **real** skills ranked above its target and the **distractors**
ranked above it (only skills the request matches can be above: `conversation_scores`). The
per-skill outranking rate of a kind is those outrankings / (requests x skills of that kind);
the real skills' rate is the reference, and a family is **as hard as real skills** when its
rate is within `TOLERANCE` (a factor) of it. Also reported: the per-skill rate at which the
top 1 is a real non-target or a distractor, and the largest share of the requests that any one
distractor (or real skill) is first for.

This module is the arithmetic: `findability_real.py` computes it for every run with
distractors (the run's `calibration`), and `findability_calibrate.py` runs it per family on
the dev splits to choose one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

__all__ = ["TOLERANCE", "calibration", "outranked", "summary", "table"]

TOLERANCE = 1.25
"""A family is as hard as real skills when its per-skill outranking rate is between the real
rate / 1.25 and the real rate x 1.25."""


def outranked(order: Sequence[str], target: str, matched: Collection[str], real: Collection[str]) -> dict[str, Any]:
    """One request's row: the real non-targets and the distractors above `target` in `order`
    (ids best first), counting only `matched` skills (the rest are ordered by id, not ranked),
    and its top 1 with that skill's kind (`target`, `real`, `distractor`; None if none matched)."""
    position = order.index(target) if target in order else len(order)
    above = [sid for sid in order[:position] if sid in matched]
    real_above = sum(sid in real for sid in above)
    top = order[0] if order and order[0] in matched else None
    kind = None if top is None else "target" if top == target else "real" if top in real else "distractor"
    return {"real_above": real_above, "distractors_above": len(above) - real_above, "top1": top, "top1_kind": kind}


def _rate(count: int, requests: int, skills: int) -> float:
    return count / (requests * skills) if requests and skills else 0.0


def calibration(rows: Sequence[Mapping[str, Any]], real_skills: int, distractors: int) -> dict[str, Any]:
    """The calibration of one library over `rows` (`outranked`'s, one per should-trigger request).

    `real_skills`: the library's real skills (a request's own target is not one of its
    competitors); `distractors`: its distractors. Rates are per request and per skill of the
    kind, in per mille; `ratio` is the distractors' rate over the real one (1.0: as hard).
    """
    n = len(rows)
    competitors = max(0, real_skills - 1)
    real_rate = _rate(sum(r["real_above"] for r in rows), n, competitors)
    distractor_rate = _rate(sum(r["distractors_above"] for r in rows), n, distractors)
    kinds = Counter(r["top1_kind"] for r in rows)
    firsts = Counter((r["top1_kind"], r["top1"]) for r in rows if r["top1_kind"] in ("real", "distractor"))

    def most(kind: str) -> dict[str, Any]:
        mine = [(count, sid) for (k, sid), count in firsts.items() if k == kind]
        count, sid = max(mine) if mine else (0, None)
        return {"skill": sid, "share": round(100 * count / n, 1) if n else 0.0}

    ratio = distractor_rate / real_rate if real_rate else None
    top1_real = _rate(kinds["real"], n, competitors)
    top1_distractor = _rate(kinds["distractor"], n, distractors)
    return {
        "requests": n,
        "real_skills": real_skills,
        "distractors": distractors,
        "real_rate_permille": round(1000 * real_rate, 3),
        "distractor_rate_permille": round(1000 * distractor_rate, 3),
        "ratio": round(ratio, 3) if ratio is not None else None,
        "as_hard": ratio is not None and 1 / TOLERANCE <= ratio <= TOLERANCE,
        "top1_real_share": round(100 * kinds["real"] / n, 1) if n else 0.0,
        "top1_distractor_share": round(100 * kinds["distractor"] / n, 1) if n else 0.0,
        "top1_real_per_skill_permille": round(1000 * top1_real, 4),
        "top1_distractor_per_skill_permille": round(1000 * top1_distractor, 4),
        "top1_ratio": round(top1_distractor / top1_real, 3) if top1_real else None,
        "max_top1_distractor": most("distractor"),
        "max_top1_real": most("real"),
    }


def summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The mean and range, over `runs` (`calibration`s of one family, one per seed), of its
    outranking `ratio` and `top1_ratio`, and whether both means are within `TOLERANCE`."""
    out: dict[str, Any] = {"seeds": len(runs)}
    for key in ("ratio", "top1_ratio"):
        values = [r[key] for r in runs if r[key] is not None]
        mean = sum(values) / len(values) if values else None
        out[key] = {
            "mean": round(mean, 3) if mean is not None else None,
            "min": min(values, default=None),
            "max": max(values, default=None),
        }
    means = [out[k]["mean"] for k in ("ratio", "top1_ratio")]
    out["as_hard"] = all(m is not None and 1 / TOLERANCE <= m <= TOLERANCE for m in means)
    return out


_COLUMNS = (
    ("distractors", "{}"),
    ("requests", "{}"),
    ("real_rate_permille", "{:.3f}"),
    ("distractor_rate_permille", "{:.3f}"),
    ("ratio", "{}"),
    ("as_hard", "{}"),
    ("top1_real_share", "{:.1f}"),
    ("top1_distractor_share", "{:.1f}"),
    ("top1_ratio", "{}"),
)


def table(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """(label, `calibration`) rows as a text table, with the largest one-skill top-1 shares."""
    head = ["family", "count", "requests", "real ‰", "distractor ‰", "ratio", "as hard", "top1 real %"]
    head += ["top1 distr %", "top1 ratio", "max distr top1 %", "max real top1 %"]
    lines = [head]
    for label, c in rows:
        cells = [label] + [fmt.format(c[key]) for key, fmt in _COLUMNS]
        cells += [f"{c['max_top1_distractor']['share']:.1f}", f"{c['max_top1_real']['share']:.1f}"]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in lines)
