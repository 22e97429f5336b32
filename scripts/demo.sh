#!/usr/bin/env bash
# The whole demo in one command, on a fresh clone or the tenth time:
# creates .venv, installs the project with its demo extra, migrates, creates
# the local staff account "demo" (printing its password), seeds demo
# conversations through the demo agent and serves everything on
# http://127.0.0.1:8000/.
#
#   scripts/demo.sh                      # SQLite (db.sqlite3), offline model
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/anvia_demo scripts/demo.sh
#   OPENAI_API_KEY=sk-... scripts/demo.sh   # the same agent on a real model
#
# PYTHON picks the interpreter for the venv (default python3), PORT the port,
# DEMO_PASSWORD a fixed password instead of a fresh random one.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
PORT="${PORT:-8000}"
VENV=.venv

if [ ! -x "$VENV/bin/python" ]; then
    echo "==> Creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi

extras=demo
case "${DATABASE_URL:-}" in
    postgres*) extras=demo,postgres ;;
esac
echo "==> Installing anvia-django[$extras] into $VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[$extras]"

run() { "$VENV/bin/python" manage.py "$@"; }

echo "==> Migrating"
run migrate --no-input --verbosity 0
echo "==> Staff account"
run demo_setup
echo "==> Demo conversations"
run seed_demo

base="http://127.0.0.1:$PORT"
cat <<URLS

  Chat page       $base/
  Admin           $base/admin/   (log in with the account above)
  Inspector API   $base/anvia/api/conversations/
  OpenAPI schema  $base/anvia/api/schema/

  Shell:          $VENV/bin/python manage.py anvia_memory list

URLS
exec "$VENV/bin/python" manage.py runserver "127.0.0.1:$PORT"
