"""The docs site builds with `mkdocs build --strict` (a broken link, a missing page or a bad anchor fails), and the
README stays a short front page whose links into it resolve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_site_builds_strict(tmp_path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    built = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                           capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site" / "reliability" / "index.html").exists()


def test_the_readme_is_short_and_its_links_into_the_docs_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 110
    targets = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert targets and all((ROOT / target).exists() for target in targets), targets


# What a user reads says what is true now: no dates, issue numbers, words of the project's history, or "seed" (what
# the product was specified from). The Measured page, generated from the benches' results files, stamps its tables
# with their dates and keeps the benches' own row labels ("seed defaults"); CHANGELOG.md (not under docs/) is history
# by design; the README's generated comparison rows carry their dates.
NARRATION = re.compile(r"\b(mended|not reproduced|no longer|used to|issue #?\d+)\b", re.I)
DATES_AND_SEED = re.compile(r"\b(seeds?|20\d\d-\d\d-\d\d)\b", re.I)
BENCH_PAGE = "measured.md"
GENERATED_ROWS = re.compile(r"<!-- comparisons: generated.*?<!-- comparisons: end -->", re.S)


def test_the_pages_speak_in_the_present_tense():
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = GENERATED_ROWS.sub(lambda block: "\n" * block.group(0).count("\n"), page.read_text())
        patterns = [NARRATION] if page.name == BENCH_PAGE else [NARRATION, DATES_AND_SEED]
        for number, line in enumerate(text.splitlines(), 1):
            found += [f"{page.relative_to(ROOT)}:{number}: {m.group(0)}" for pattern in patterns
                      for m in pattern.finditer(line)]
    assert not found, "\n".join(found)


def test_a_page_naming_a_section_of_the_measured_page_names_one_it_has():
    sections = set(re.findall(r"^## (.+)$", (ROOT / "docs" / "measured.md").read_text(), re.M))
    named = [(page.name, name) for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
             for name in (" ".join(found.split()) for found in re.findall(r'Measured[,:] "([^"]+)"', page.read_text()))]
    assert named and all(name in sections for _, name in named), [n for n in named if n[1] not in sections]
