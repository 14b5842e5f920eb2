"""Every link from one doc to a heading (``page.md#anchor``) in README.md or docs/ lands on one.

Anchors are GitHub's: the heading's text lower-cased, punctuation dropped, spaces made
hyphens, ``-1``, ``-2``... for repeats; explicit ``<a name="...">`` / ``<a id="...">`` count too.
Code blocks are skipped (their ``#`` lines are comments, not headings).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s#]*)#([^)\s]+)\)")


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    counts: dict[str, int] = {}
    found = set(re.findall(r'<a (?:name|id)="([^"]+)"', text))
    for heading in re.findall(r"^#{1,6} (.+)$", CODE.sub("", text), re.M):
        slug = _slug(heading)
        found.add(slug if slug not in counts else f"{slug}-{counts[slug]}")
        counts[slug] = counts.get(slug, 0) + 1
    return found


def test_every_anchor_a_doc_links_to_exists():
    anchors = {path: _anchors(path) for path in DOCS}
    dead = []
    for path in DOCS:
        for target, anchor in LINK.findall(CODE.sub("", path.read_text(encoding="utf-8"))):
            page = (path.parent / target).resolve() if target else path
            if page.suffix == ".md" and anchor not in anchors.get(page, set()):
                dead.append(f"{path.relative_to(ROOT)}: {target}#{anchor}")
    assert not dead, "links to headings that do not exist:\n" + "\n".join(dead)


def test_the_anchor_rule_is_githubs():
    assert _slug("Fuzz campaign: untrusted models, data and options") == (
        "fuzz-campaign-untrusted-models-data-and-options"
    )
    assert _slug("What `--unsafe` opens, and what it does not") == (
        "what---unsafe-opens-and-what-it-does-not"
    )
