.PHONY: demo test lint

# Sets up a venv, migrates, seeds demo conversations and serves the example project.
demo:
	bash scripts/demo.sh

# The whole test matrix (Python x Django x SQLite/PostgreSQL), lint and type checks.
test:
	bash scripts/test.sh
