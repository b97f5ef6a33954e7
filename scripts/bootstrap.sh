# Sourced by scripts/run-local and scripts/test: a project virtualenv with pinned dependencies.
# Needs python3 (3.10+), java 17, mvn and go on PATH; everything else is fetched once and cached.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
for tool in python3 java mvn go; do
  command -v "$tool" >/dev/null || { echo "error: '$tool' not found on PATH; install it first (see README)" >&2; exit 1; }
done
VENV="$ROOT/.venv"
STAMP="$VENV/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [ ! -f "$STAMP" ]; then
  echo "setting up $VENV: installing the pinned Python packages with pip (first run only, a few minutes) ..." >&2
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  # pip's build warnings are noise on a terminal; its full output is kept, and shown if it fails.
  "$VENV/bin/pip" install -q --upgrade pip > "$VENV/pip-install.log" 2>&1 &&
    "$VENV/bin/pip" install -q -c constraints.txt -e ".[test]" >> "$VENV/pip-install.log" 2>&1 ||
    { cat "$VENV/pip-install.log" >&2; echo "error: installing the Python packages failed (log above)" >&2; exit 1; }
  rm -f "$VENV"/.installed-*
  touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export SPARK_LOCAL_IP=127.0.0.1
