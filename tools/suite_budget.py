#!/usr/bin/env python3
"""The test suite's time budget, checked after `make test` from pytest's JUnit XML report.

tests/budget.toml gives each test file its seconds on the reference box (the times of a fresh-clone
`.ci/run`, summed per file: fixtures, calls and teardowns) and the limit on their sum. This
script reads a run's report and fails (exit 1, one line per file) when

- a test file has no budget line (a new file states what it costs),
- a file took more than its budget by more than the tolerance, after scaling every budget by
  this box's speed: the median, over the files of 10 s or more, of measured / budgeted time (one
  file that grew does not move the median; a box twice as slow doubles every budget),
- the budgets add up to more than `total_s` (raising one file's budget means trimming another's).

A run of part of the suite (fewer than half the budgeted files) is reported, not checked.

    python tools/suite_budget.py REPORT.xml            # check (what `make test` runs)
    python tools/suite_budget.py REPORT.xml --write    # print budget lines from this run's times
"""

from __future__ import annotations

import statistics
import sys
import tomllib
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET = ROOT / "tests" / "budget.toml"


def file_times(report: Path, tests: Path = ROOT / "tests") -> dict[str, float]:
    """Seconds per test file (its test cases' times: setup, call and teardown) in a JUnit XML report."""
    known = {p.name for p in tests.glob("test_*.py")}
    times: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        name = next((f"{p}.py" for p in parts if f"{p}.py" in known), None)
        if name is None:  # (a collection error's case has no module: it fails the run anyway)
            continue
        times[name] += float(case.get("time") or 0.0)
    return dict(times)


def load_budget(path: Path | None = None) -> tuple[float, dict[str, float]]:
    """(total_s, {file: seconds}) from the budget file (tests/budget.toml)."""
    data = tomllib.loads((path or BUDGET).read_text())
    return float(data["total_s"]), {k: float(v) for k, v in data["files"].items()}


def check(measured: dict[str, float], total_s: float, budget: dict[str, float], tolerance: float = 0.5,
          slack_s: float = 20.0) -> tuple[list[str], list[str]]:
    """(errors, report lines) of a run's per-file seconds against the budget."""
    errors, lines = [], []
    planned = sum(budget.values())
    if planned > total_s:
        errors.append(f"tests/budget.toml: the files' budgets add up to {planned:.0f} s, over total_s = {total_s:.0f}; "
                      "trim tests elsewhere (or lower another file's budget) before raising one")
    for name in sorted(set(measured) - set(budget)):
        errors.append(f"tests/{name}: no budget in tests/budget.toml; add `\"{name}\" = {measured[name]:.0f}` "
                      "(its seconds in this run) and trim the same elsewhere if the total is over")
    ran = [n for n in budget if n in measured]
    if len(ran) < len(budget) / 2:
        lines.append(f"test budget: not checked ({len(ran)} of {len(budget)} budgeted files ran)")
        return errors, lines
    ratios = [measured[n] / budget[n] for n in ran if budget[n] >= 10.0] or [1.0]
    speed = statistics.median(ratios)
    for name in ran:
        allowed = budget[name] * speed * (1 + tolerance) + slack_s
        if measured[name] > allowed:
            errors.append(f"tests/{name}: {measured[name]:.0f} s, over its budget of {budget[name]:.0f} s "
                          f"x {speed:.2f} (this box) + {tolerance:.0%} + {slack_s:.0f} s = {allowed:.0f} s; make its "
                          "tests cheaper (shared fixtures, smaller shapes) or move budget to it from another file in "
                          "tests/budget.toml")
    total = sum(measured.values())
    lines.append(f"test budget: {total:.0f} s of tests in {len(measured)} files; this box at {speed:.2f} x the "
                 f"reference box's times (budgeted {planned:.0f} s there, limit {total_s:.0f} s)")
    return errors, lines


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python tools/suite_budget.py REPORT.xml [--write]  (REPORT.xml: pytest --junitxml's)",
              file=sys.stderr)
        return 2
    report = Path(argv[0])
    if not report.is_file():
        print(f"test budget: {report}: no such report (pytest --junitxml={report} writes it)", file=sys.stderr)
        return 2
    try:
        measured = file_times(report)
    except ET.ParseError as e:
        print(f"test budget: {report}: not a JUnit XML report ({e}); rerun pytest with --junitxml={report}",
              file=sys.stderr)
        return 2
    if "--write" in argv[1:]:
        for name, seconds in sorted(measured.items(), key=lambda kv: -kv[1]):
            print(f'"{name}" = {max(1, round(seconds))}')  # (whole seconds, at least 1)
        return 0
    try:
        total_s, budget = load_budget()
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        print(f"test budget: {BUDGET}: unreadable ({type(e).__name__}: {e}); it needs total_s = SECONDS and a [files] "
              'table of "test_x.py" = SECONDS lines', file=sys.stderr)
        return 2
    errors, lines = check(measured, total_s, budget)
    for line in lines:
        print(line)
    for error in errors:
        print(f"test budget: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
