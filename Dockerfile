# syntax=docker/dockerfile:1
# The wsfleet worker image for ECS Fargate: `python -m entrypoints.worker`.
# Build from the repository root:  docker build -t wsfleet-worker .
# (infra/ runs it; docs/deploy.md pushes it to ECR.)
#
# Base image: both stages name the same one (tests/infra/test_dockerfile.py checks). It is
# pinned by tag only: the machines this project is built and tested on reach no container
# registry, so no digest here could have been checked. To pin it, and to refresh the pin
# (monthly, or when a Python or Debian security release is out), on a machine that reaches the
# registry:
#   docker buildx imagetools inspect python:3.11-slim-bookworm --format '{{json .Manifest.Digest}}'
# prints the digest of the multi-platform index (not one platform's manifest, so amd64 and
# arm64 builds both resolve); write it in both FROM lines as
#   python:3.11-slim-bookworm@sha256:<64 hex digits>
# and drop the xfail of test_base_image_is_pinned_by_digest, which then passes.
#
# Python dependencies: exactly the versions of requirements/worker.lock (made from pyproject.toml
# by `make lock`, resolved inside the test lock: the image runs what the tests ran), every file
# checked against its hash.

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first, so this layer is rebuilt only when a lock changes, not on every code
# change. Wheels only: a wheel built here from a source archive would match no hash of the lock.
COPY requirements/build.lock requirements/worker.lock ./requirements/
RUN pip install --require-hashes -r requirements/build.lock \
 && pip download --require-hashes --only-binary :all: --dest /wheels -r requirements/worker.lock
# Then the project itself (only the packages pyproject.toml ships; see .dockerignore).
COPY pyproject.toml README.md ./
COPY domain ./domain
COPY application ./application
COPY adapters ./adapters
COPY entrypoints ./entrypoints
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# Wheels are mounted, not copied: no layer keeps them. The hashes are checked again here, then
# the project's own wheel (built one stage up) goes in without fetching anything.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,from=build,source=/src/requirements,target=/requirements \
    pip install --no-index --find-links /wheels --require-hashes -r /requirements/worker.lock \
 && pip install --no-index --find-links /wheels --no-deps wsfleet \
 && pip check \
 && groupadd --system --gid 10001 wsfleet \
 && useradd --system --uid 10001 --gid wsfleet --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin wsfleet
# The task definition runs the container as the same uid, with a read-only root filesystem.
USER 10001:10001
# ECS sends SIGTERM, then SIGKILL after stopTimeout: the worker hands its connections over in
# between (WSFLEET_SHUTDOWN_BUDGET_S).
STOPSIGNAL SIGTERM
# The same probe as the task definition's healthCheck (infra/ecs.tf; tests/infra compares):
# ECS runs its own and ignores this one, `docker run` uses this one.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-m", "entrypoints.worker.healthcheck"]
CMD ["python", "-m", "entrypoints.worker"]
