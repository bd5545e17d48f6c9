"""spmdgpt viz: one element per token, log-probabilities that average to eval's loss, colours
that follow them; checked in headless Chromium when it is installed; bad input."""

import json
from html.parser import HTMLParser

import pytest
from conftest import chromium_tab, needs_chromium

from spmdgpt.cli import main


@pytest.fixture(scope="module")
def page(tmp_path_factory, staircase_30):
    """The page of a 30-step staircase run (init_std 0.2: tests/shared_runs.py, STAIRCASE_30)."""
    base = tmp_path_factory.mktemp("viz")
    _, run_dir = staircase_30
    text = base / "t.txt"
    text.write_text("0123456789876543210" * 8 + "5")  # 153 tokens: windows of 64, the last end-aligned
    out = base / "page.html"
    assert main(["viz", f"run.dir={run_dir}", f"text_file={text}", f"out={out}", "top_k=3"]) == 0
    return run_dir, text, out


class Tokens(HTMLParser):
    def __init__(self):
        super().__init__()
        self.spans, self._open = [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "span" and "tok" in a.get("class", ""):
            self._open = {"lp": float(a["data-lp"]) if "data-lp" in a else None, "title": a.get("title"), "text": ""}

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data

    def handle_endtag(self, tag):
        if tag == "span" and self._open is not None:
            self.spans.append(self._open)
            self._open = None


def test_page_has_every_token_and_eval_s_loss(page, tmp_path, capsys):
    run_dir, text, out = page
    parser = Tokens()
    parser.feed(out.read_text())
    spans = parser.spans
    assert "".join(s["text"] for s in spans) == text.read_text()  # one element per token, in order
    assert len(spans) == 153 and spans[0]["lp"] is None and all(s["lp"] is not None for s in spans[1:])
    capsys.readouterr()
    assert main(["eval", f"run.dir={run_dir}", f"text_file={text}", f"out={tmp_path / 'e.json'}"]) == 0
    loss = json.loads((tmp_path / "e.json").read_text())["results"]["t.txt"]["loss"]
    assert -sum(s["lp"] for s in spans[1:]) / 152 == pytest.approx(loss, rel=1e-5)
    tip = spans[5]["title"]
    assert tip.startswith('"5": p=') and tip.count("p=") == 4  # the token, then its top 3
    # a text longer than max_tokens: its beginning, and the summary says so
    assert main(["viz", f"run.dir={run_dir}", f"text_file={text}", f"out={tmp_path / 'cut.html'}",
                 "max_tokens=100"]) == 0
    assert (" tokens scored in windows of 64 (the text's first 100 of 153 tokens: max_tokens=100; raise it, or use "
            "eval text_file=, to score all): mean loss") in capsys.readouterr().out


@needs_chromium
def test_page_in_headless_chromium(page):
    _, _, out = page
    with chromium_tab(out.as_uri()) as (tab, errors):
        cells = tab.eval_on_selector_all(
            "span.tok", "els => els.map(e => [e.dataset.lp ?? null, getComputedStyle(e).backgroundColor])")
    assert errors == [] and len(cells) == 153
    scored = sorted((float(lp), int(bg.split(",")[1])) for lp, bg in cells if lp is not None)  # rgb(255, G, G)
    greens = [g for _, g in scored]
    assert greens == sorted(greens)  # the lower the log-probability, the redder
    assert greens[0] < greens[-1]


def test_viz_refuses_bad_input(page, tmp_path, capsys):
    run_dir, text, _ = page

    def viz(*items):
        capsys.readouterr()
        code = main(["viz", *items])
        return code, capsys.readouterr().err.strip().splitlines()[-1]

    assert viz(f"run.dir={run_dir}") == (2, "spmdgpt: error: text_file is required: the text to colour by the "
                                            "model's log-probabilities")
    (tmp_path / "empty").mkdir()
    for name in ("config.yaml", "tokenizer.json"):
        (tmp_path / "empty" / name).write_text((run_dir / name).read_text())
    assert viz(f"run.dir={tmp_path / 'empty'}", f"text_file={text}") == (
        2, f"spmdgpt: error: run.dir={tmp_path / 'empty'} has no checkpoint")
