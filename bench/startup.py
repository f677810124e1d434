"""The start-up scenario: how long `s3skills --help` takes and how much `import s3skills.cli` pulls in.

Measured for the current tree and for a previous version (a git ref, unpacked with
`git archive` into a temporary directory), each run in fresh subprocesses with
`PYTHONPATH` pointing at its tree. Nothing is installed: PYTHONPATH comes before
site-packages (and before an editable install's finder), so each subprocess imports the
tree under test; the report names the file `s3skills` was imported from, to prove it.

    python bench/startup.py                  # this tree vs 1921cb8, median of 5
    python bench/startup.py --ref HEAD~3 --runs 9
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import record  # bench/record.py: the results file (this script's directory is first on sys.path)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REF = "1921cb8"

# What `s3skills --help` runs: the console script's wrapper, minus the installed script.
_HELP = "import sys; sys.argv[0] = 's3skills'; from s3skills.cli import main; sys.exit(main())"
_IMPORT = "import s3skills, s3skills.cli; print(s3skills.__file__)"
# Top-level packages that a fast `--help` should not need (ARCHITECTURE.md, front ends).
HEAVY = ("langchain", "langchain_core", "langgraph", "deepagents", "aioboto3", "aiobotocore", "botocore", "boto3")


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["PYTHONPATH"] = str(tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up run compiles both trees alike
    return env


def help_seconds(tree: Path, runs: int, warmup: bool = True) -> list[float]:
    """Wall time of `s3skills --help` in `runs` fresh interpreters, after one untimed run that warms the OS caches."""
    samples: list[float] = []
    for i in range(runs + 1 if warmup else runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _HELP, "--help"],
            cwd=tree,
            env=_env(tree),
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - started
        if done.returncode != 0 or "usage" not in done.stdout.lower():
            raise RuntimeError(f"s3skills --help failed in {tree} (exit {done.returncode}):\n{done.stderr[-2000:]}")
        if i or not warmup:
            samples.append(elapsed)
    return samples


def import_profile(tree: Path) -> dict[str, Any]:
    """Modules imported by `import s3skills.cli` (`python -X importtime`), and where s3skills came from."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _IMPORT],
        cwd=tree,
        env=_env(tree),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"import s3skills.cli failed in {tree}:\n{done.stderr[-2000:]}")
    names: list[str] = []
    own_us = 0  # the cumulative time of the top-level s3skills imports: the whole `import s3skills.cli`
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        _self_us, cumulative_us, field = line.removeprefix("import time:").split("|")
        name = field.strip()
        names.append(name)
        if not field.startswith("  ") and name.split(".")[0] == "s3skills":  # nesting indents the name
            own_us += int(cumulative_us)
    heavy = sorted({name.split(".")[0] for name in names if name.split(".")[0] in HEAVY})
    return {
        "modules": len(names),
        "heavy_packages": heavy,
        "import_cli_ms": round(own_us / 1000, 1),
        "s3skills_from": done.stdout.strip(),
    }


def measure(tree: Path, runs: int, warmup: bool = True) -> dict[str, Any]:
    """Start-up numbers for the source tree at `tree` (run from it: `python -c` puts the cwd first)."""
    samples = help_seconds(tree, runs, warmup)
    profile = import_profile(tree)
    if not Path(profile["s3skills_from"]).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"s3skills was imported from {profile['s3skills_from']}, not from {tree}")
    return {
        "help_seconds": round(statistics.median(samples), 4),
        "help_samples": [round(s, 4) for s in samples],
        **profile,
    }


def export(ref: str, into: Path) -> str:
    """Unpack the tree of git `ref` into `into`; return the commit it names.

    Raises:
        ValueError: `ref` is not a commit of this repository (a shallow clone may lack it).
    """
    resolved = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if resolved.returncode != 0:
        raise ValueError(f"git ref {ref!r} is not a commit in {ROOT} (a shallow clone? fetch it, or pass --ref)")
    commit = resolved.stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit], capture_output=True, check=True
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return commit


def compare(ref: str | None = DEFAULT_REF, runs: int = 5, *, warmup: bool = True) -> dict[str, Any]:
    """Start-up of this tree, and of `ref` with the ratios current / previous (None: this tree only).

    Ratios above 1 mean the current tree is slower or imports more. `warmup=False` (the
    smoke mode) skips the untimed first run of each tree.

    Raises:
        ValueError: `runs` < 1, or `ref` is not a commit here.
    """
    if runs < 1:
        raise ValueError("runs must be >= 1")
    report: dict[str, Any] = {"runs": runs, "current": measure(ROOT, runs, warmup)}
    if ref is None:
        return report
    with tempfile.TemporaryDirectory(prefix="s3skills-bench-ref-") as tmp:
        commit = export(ref, Path(tmp))
        previous = measure(Path(tmp), runs, warmup)
    current = report["current"]
    report["previous"] = {"ref": ref, "commit": commit, **previous}
    report["ratio"] = {
        "help_seconds": round(current["help_seconds"] / previous["help_seconds"], 3),
        "modules": round(current["modules"] / previous["modules"], 3),
    }
    return report


def format_report(report: dict[str, Any]) -> str:
    """The start-up section of the printed report."""
    rows = [("current tree", report["current"])]
    if "previous" in report:
        previous = report["previous"]
        rows.append((f"{previous['ref']} ({previous['commit'][:9]})", previous))
    header = f"{'tree':<24} {'--help (median)':>16} {'modules':>8} {'import cli':>11}  heavy packages imported"
    lines = [
        f"Start-up: `s3skills --help`, median of {report['runs']} fresh process(es):",
        "",
        header,
        "-" * len(header),
    ]
    for label, row in rows:
        lines.append(
            f"{label:<24} {row['help_seconds'] * 1000:>14.0f}ms {row['modules']:>8} {row['import_cli_ms']:>9.0f}ms  "
            f"{', '.join(row['heavy_packages']) or '-'}"
        )
    if "ratio" in report:
        ratio = report["ratio"]
        lines.append(f"\ncurrent / previous: --help {ratio['help_seconds']:.2f}x, modules {ratio['modules']:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default=DEFAULT_REF, help=f"previous version to compare with (default {DEFAULT_REF})")
    parser.add_argument("--no-ref", action="store_true", help="measure the current tree only")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of --help, median kept (default 5)")
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    parser.add_argument("--out", type=Path, help="results file (default: bench/results/startup-<time>.json)")
    args = parser.parse_args(argv)
    run = record.Run("startup", argv)
    try:
        report = compare(None if args.no_ref else args.ref, args.runs)
    except ValueError as exc:
        parser.error(str(exc))
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    print(f"samples: {run.write(args.out, extra=report)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
