# syntax=docker/dockerfile:1
# The wsfleet worker image for ECS Fargate: `python -m entrypoints.worker`.
# Build from the repository root:  docker build -t wsfleet-worker .
# (infra/ runs it; docs/deploy.md pushes it to ECR.) Pin the base image by digest in production
# (python:3.11-slim-bookworm@sha256:...), in both stages.

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first, read from the project's own metadata, so this layer is rebuilt only when
# pyproject.toml changes, not on every code change.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
 && pip wheel --wheel-dir /wheels -r requirements.txt
# Then the project itself (only the packages pyproject.toml ships; see .dockerignore).
COPY README.md ./
COPY domain ./domain
COPY application ./application
COPY adapters ./adapters
COPY entrypoints ./entrypoints
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# Wheels are mounted, not copied: no layer keeps them.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels wsfleet \
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
