"""Screenshots of the Dagster UI in headless Chromium (Debian's `chromium` package), to check by eye what a
user sees: the lineage across systems, a bridge's checks, the runs and their queue."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

# name -> path in the UI; `{bridge}` is the bridge whose asset page is shown.
PAGES = {
    "lineage": "/asset-groups",
    "checks": "/assets/{bridge}?view=checks",
    "asset": "/assets/{bridge}",
    "runs": "/runs",
    "sensors": "/automation",
}
WAIT_MS = 20_000  # the UI loads its data after the page itself (GraphQL); Chromium's virtual time waits for it


def take(url: str, out_dir: Path, bridge: str, width: int = 1600, height: int = 1000) -> list[Path]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise RuntimeError("`chromium` not found on PATH: install Debian's chromium package (apt-get install chromium)")
    out_dir.mkdir(parents=True, exist_ok=True)
    taken = []
    for name, path in PAGES.items():
        target = out_dir / f"{name}.png"
        result = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--window-size={width},{height}", f"--virtual-time-budget={WAIT_MS}", f"--screenshot={target}",
             url.rstrip("/") + path.format(bridge=bridge)],
            capture_output=True, text=True, timeout=120)
        if result.returncode != 0 or not target.exists():
            raise RuntimeError(f"chromium could not take {name}: {result.stderr.strip()[-300:]}")
        taken.append(target)
    return taken
