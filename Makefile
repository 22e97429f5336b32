.PHONY: demo test screenshots

# Sets up a venv, migrates, seeds demo conversations and serves the example project.
demo:
	bash scripts/demo.sh

# The whole test matrix (Python x Django x SQLite/PostgreSQL), lint and type checks.
test:
	bash scripts/test.sh

# Regenerates docs/screenshots/ with headless Debian Chromium.
screenshots:
	.venv/bin/python scripts/screenshots.py
