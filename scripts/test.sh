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

# MariaDB cells need the server at 127.0.0.1:3306; start a stopped local one.
if [ -x /usr/sbin/mariadbd ] && command -v mariadb-admin >/dev/null 2>&1 \
  && ! mariadb-admin -h 127.0.0.1 -P 3306 -u root ping >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql || true
  fi
  for _ in $(seq 1 30); do
    mariadb-admin -h 127.0.0.1 -P 3306 -u root ping >/dev/null 2>&1 && break
    sleep 1
  done
fi

# mysqlclient (the MariaDB cells) builds against libmariadb's headers.
if ! { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libmariadb; } \
  && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libmariadb-dev pkg-config) \
    || echo "warning: could not install libmariadb-dev; mysqlclient will not build" >&2
fi

# The admin's browser test drives Debian's Chromium (never a downloaded build).
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
    || echo "warning: could not install chromium; the browser test will be skipped" >&2
fi
# Where Chromium is (or could be installed just now), the browser tests must
# run: a missing browser fails them instead of skipping them silently.
# ANVIA_REQUIRE_BROWSER=0 lets them skip.
if [ -x /usr/bin/chromium ] && [ -z "${ANVIA_REQUIRE_BROWSER:-}" ]; then
  export ANVIA_REQUIRE_BROWSER=1
fi

# nox with uv (the noxfile's virtualenv backend; nox falls back to venv and pip).
if [ ! -x .venv-tools/bin/nox ] || ! .venv-tools/bin/python -c "import uv" 2>/dev/null; then
  python3 -m venv .venv-tools
  .venv-tools/bin/python -m pip install -q --upgrade pip
  .venv-tools/bin/python -m pip install -q "nox[uv]>=2024.10.9"
fi
if [ "$#" -gt 0 ]; then
  exec .venv-tools/bin/nox "$@"
fi

# The whole run in two lanes at once (the noxfile's LANES): the first
# pair's cells, and the checks (ruff, mypy, the smoke benchmark, whose
# numbers are not judged) with the other pairs' cells. A cell on a database
# server leaves a core idle much of the time, which the other lane takes.
# The second lane's output after the first's; both must pass.
second_log=$(mktemp)
trap 'rm -f "$second_log"' EXIT
.venv-tools/bin/nox -t second >"$second_log" 2>&1 &
second=$!
status=0
.venv-tools/bin/nox -t first || status=$?
second_status=0
wait "$second" || second_status=$?
cat "$second_log"
if [ "$second_status" -ne 0 ]; then
  echo "the second lane (checks, Python 3.12 and 3.13 cells) failed (exit code $second_status)" >&2
  status=$second_status
fi
exit "$status"
