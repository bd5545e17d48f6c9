"""README.md and docs/: every relative link and anchor resolves; the README stays short."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose(page: Path) -> str:
    """The page without its fenced code blocks (links there are code, not links)."""
    return re.sub(r"```.*?```", "", page.read_text(), flags=re.S)


def anchors(page: Path) -> set:
    return {slug(m) for m in re.findall(r"^#+ (.*)$", prose(page), flags=re.M)}


def test_every_relative_link_and_anchor_resolves():
    bad, checked = [], 0
    for page in PAGES:
        for target in LINK.findall(prose(page)):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            checked += 1
            if not dest.exists():
                bad.append(f"{page.name}: {target} (no {dest})")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{page.name}: {target} (no heading #{anchor} in {dest.name})")
    assert not bad, bad
    assert checked > 40  # (the README's table and the chapters link to each other)


def test_the_readme_is_an_entry_page_and_the_chapters_exist():
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) <= 400
    assert readme[3].startswith("make train") and readme[4].startswith("make test")
    chapters = {p.name for p in PAGES[1:]}
    assert {"getting-started.md", "configuration.md", "parallelism.md", "checkpoints.md", "data.md",
            "models-and-hf.md", "post-training.md", "planning.md", "browser.md", "benchmarks.md",
            "extending.md"} <= chapters
    linked = set(re.findall(r"\(docs/([a-z-]+\.md)", "\n".join(readme)))
    assert chapters <= linked, chapters - linked  # every chapter is reachable from the README


def test_slugs_follow_githubs_rule():
    assert slug("Optimizers: AdamW, SGD, Muon, manifold Muon") == "optimizers-adamw-sgd-muon-manifold-muon"
    assert slug("Benchmarks: `spmdgpt lm-eval`") == "benchmarks-spmdgpt-lm-eval"
    assert slug("Fine-tuning on conversations (SFT)") == "fine-tuning-on-conversations-sft"
