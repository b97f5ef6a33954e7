"""The alerting rules load in Debian's Prometheus and fire, on series made for it, exactly when they should
(promtool's own rule tests: observability/prometheus/bridge-alerts.test.yml)."""

from __future__ import annotations

import subprocess

from local_stack import fetch
from local_stack.paths import PROJECT_ROOT

RULES = PROJECT_ROOT / "observability" / "prometheus"


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(fetch.prometheus_root() / "usr" / "bin" / "promtool"), *args], cwd=RULES, capture_output=True,
                          text=True, timeout=120)


def test_the_rules_are_valid_and_their_tests_pass():
    checked = _promtool("check", "rules", "bridge-alerts.yml")
    assert checked.returncode == 0 and "SUCCESS: 5 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = _promtool("test", "rules", "bridge-alerts.test.yml")
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
