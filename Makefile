# Everything a newcomer needs: `make demo` and `make test`. Only python3 and make are assumed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: install test lint typecheck layers unit contract integration e2e demo bench chaos lambda-zip clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

test: lint typecheck layers
	$(BIN)/python -m pytest $(PYTEST_ARGS)

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

contract: $(STAMP)
	$(BIN)/python -m pytest tests/contract $(PYTEST_ARGS)

integration: $(STAMP)
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

e2e: $(STAMP)
	$(BIN)/python -m pytest tests/e2e $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/wsfleet demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build *.egg-info
