#!/usr/bin/env bash
# The README's test command: sets up its own tools, then runs the nox matrix.
# Extra arguments go to nox, e.g. scripts/test.sh -s lint
set -euo pipefail
cd "$(dirname "$0")/.."

# Under pyenv, make every installed CPython 3.11+ visible so nox finds python3.12.
if command -v pyenv >/dev/null 2>&1; then
  versions=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[1-9]\.[0-9]+$' | paste -sd: - || true)
  if [ -n "$versions" ]; then export PYENV_VERSION="$versions"; fi
fi

# PostgreSQL cells need the server at 127.0.0.1:5432; start a stopped local cluster.
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
  fi
fi

# The admin's browser test drives Debian's Chromium (never a downloaded build).
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
    || echo "warning: could not install chromium; the browser test will be skipped" >&2
fi

if [ ! -x .venv-tools/bin/nox ]; then
  python3 -m venv .venv-tools
  .venv-tools/bin/python -m pip install -q --upgrade pip
  .venv-tools/bin/python -m pip install -q "nox>=2024.10.9"
fi
exec .venv-tools/bin/nox "$@"
