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
    assert len(readme.splitlines()) <= 200
    targets = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert targets and all((ROOT / target).exists() for target in targets), targets
