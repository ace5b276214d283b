# Everything a newcomer needs: `make demo` and `make test`. Only python3 and make are assumed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: install test lint typecheck layers unit contract integration e2e hostile demo bench chaos mutants lambda-zip checkov terraform clean

CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# checkov pins an old boto3 that conflicts with aiobotocore: it lives in a virtualenv of its own.
$(CHECKOV_STAMP): infra/checkov-requirements.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r infra/checkov-requirements.txt
	touch $(CHECKOV_STAMP)

checkov: $(CHECKOV_STAMP)
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true $(CHECKOV_VENV)/bin/checkov -d infra --framework terraform --quiet --compact --skip-download

# infra/ checked by Terraform itself, offline (part of `make test` too): fmt, validate, and
# `terraform test` on a mocked AWS provider. Needs terraform >= 1.7 and the hashicorp/aws
# provider in a local plugin directory (tests/infra/test_terraform_tests.py says where).
terraform: $(STAMP)
	$(BIN)/python -m pytest tests/infra/test_terraform_tests.py $(PYTEST_ARGS)

# The router's Lambda package: its code and runtime dependencies only (see docs/deploy.md).
lambda-zip: $(STAMP)
	$(BIN)/python infra/scripts/build_lambda_zip.py --output build/lambda-router.zip

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

test: lint typecheck layers $(CHECKOV_STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

contract: $(STAMP)
	$(BIN)/python -m pytest tests/contract $(PYTEST_ARGS)

integration: $(STAMP)
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

e2e: $(STAMP)
	$(BIN)/python -m pytest tests/e2e $(PYTEST_ARGS)

# Hostile upstreams next to good streams, real workers, both backends (part of `make test`).
hostile: $(STAMP)
	$(BIN)/python -m pytest tests/hostile $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/wsfleet demo $(DEMO_ARGS)

# Benchmarks (minutes; never part of `make test`): table on stdout, bench/out/*.json and *.png.
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

# The chaos soak (never part of `make test`, which runs its short version): real worker
# processes on both backends under repeated mixed faults for CHAOS_MINUTES, then it stops.
CHAOS_MINUTES ?= 10
chaos: $(STAMP)
	CHAOS_MINUTES=$(CHAOS_MINUTES) $(BIN)/python -m pytest tests/chaos --soak -m soak $(PYTEST_ARGS)

# Mutation testing (never part of `make test`: about an hour per module group on 2 shared
# cores, see bench/MUTANTS.md). MUTANTS_ARGS narrows it: MUTANTS_ARGS="domain --max-children 1".
MUTANTS_ARGS ?=
mutants: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,mutants]'
	$(BIN)/python -m bench.mutants $(MUTANTS_ARGS)

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .mypy_cache .pytest_cache .ruff_cache build *.egg-info infra/.terraform.lock.hcl
