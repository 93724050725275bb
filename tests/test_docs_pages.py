"""The docs stay whole: the README's relative links resolve, the API reference covers every
public name, and every page is in the site's navigation."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import tracescore

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_relative_links_resolve() -> None:
    targets = [t.split("#")[0] for t in LINK.findall((ROOT / "README.md").read_text("utf-8"))
               if not t.startswith(("http://", "https://", "#"))]
    assert targets, "the README links into the docs"
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_the_api_reference_covers_every_public_name() -> None:
    documented = set(re.findall(r"^::: tracescore\.(\w+)", (DOCS / "reference.md").read_text(),
                                re.MULTILINE))
    assert set(tracescore.__all__) - {"__version__"} <= documented


def test_every_page_is_in_the_navigation() -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))["nav"]
    listed = {page for entry in nav for page in entry.values()}
    assert {p.name for p in DOCS.glob("*.md")} == listed
