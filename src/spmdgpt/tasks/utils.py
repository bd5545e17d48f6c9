"""Loaders of the tasks shipped with spmdgpt: each reads its jsonl beside this file (no network;
examples/make_lm_eval_tasks.py wrote them). lm-evaluation-harness calls them through the YAMLs'
`custom_dataset: !function utils.NAME`."""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _test_split(name: str) -> dict:
    import datasets

    rows = [json.loads(line) for line in (HERE / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"test": datasets.Dataset.from_list(rows)}


def next_line(**kwargs):
    return _test_split("shakespeare_next_line")


def ppl(**kwargs):
    return _test_split("shakespeare_ppl")


def speaker(**kwargs):
    return _test_split("shakespeare_speaker")
