"""The docs stay whole: the README's relative links resolve, the API reference covers every
public name, every page is in the site's navigation, and the scorers page covers every scorer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import tracescore
from tracescore.scoring._registry import JUDGED, SCORER_ALIASES, SCORER_IDS

ROOT = Path(__file__).resolve().parents[2]
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


def _section(page: str, anchor: str) -> str:
    """The text of the `## ` section whose heading slugifies to `anchor`."""
    for block in re.split(r"^## ", page, flags=re.MULTILINE)[1:]:
        heading = block.splitlines()[0]
        if re.sub(r"[^\w\- ]", "", heading.lower()).strip().replace(" ", "-") == anchor:
            return block
    raise AssertionError(f"no section #{anchor}")


@pytest.mark.parametrize("sid", SCORER_IDS)
def test_the_scorers_page_has_a_table_row_and_a_section_with_real_output_for_every_scorer(
        sid: str) -> None:
    page = (DOCS / "scorers.md").read_text("utf-8")
    table = page.split("\n\n")[2]  # the table at the top, after the title and the intro
    (row,) = [line for line in table.splitlines() if f"| `{sid}`" in line]
    link, _, kind, needs, parity = [c.strip() for c in row.strip("|").split("|")]
    assert kind.startswith("judged" if sid in JUDGED or sid == "llm-judge" else "code"), row
    assert needs and parity, row
    section = _section(page, re.findall(r"\(#([\w-]+)\)", link)[0])
    assert "```python" in section and "\n#> " in section, f"{sid}: an example with its output"
    names = page.split("\nNames: ")[1].split("\n")[0]
    assert {f"`{a}`" for a, s in SCORER_ALIASES.items() if s == sid} <= set(
        re.findall(r"`[\w-]+`", names)), sid
