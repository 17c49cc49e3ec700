# syntax=docker/dockerfile:1
# The Juggler service image (docs/deployment.md). Two targets share one base:
#   worker (the default, last stage): `juggler worker` (on either runtime: the
#           package's own, or `--runtime faust` / JUGGLER_RUNTIME=faust, hence the
#           faust extra), `juggler topics apply`, `juggler query ...`; what
#           docker-compose.yml and the Helm chart run.
#   spark:  the same package plus a JRE, Maven and PySpark, for
#           `juggler spark generate`. Spark's Kafka/Avro connector jars are fetched
#           from Maven Central at build time into $JUGGLER_CACHE (what
#           juggler.spark.connectors would otherwise fetch at the first run), so the
#           container needs no network but Kafka's.
# Both install the operator's Rust core as a wheel built in the `native` stage, so
# neither carries a compiler.
ARG PYTHON_IMAGE=python:3.11-slim

# services/juggler_native (PyO3) -> /wheels: Rust from the distribution's packages
# (install-rust picks ones at least the crate's rust-version), maturin from PyPI, the
# crate versions pinned by its Cargo.lock.
FROM ${PYTHON_IMAGE} AS native
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY services/juggler_native/ juggler_native/
RUN sh juggler_native/install-rust \
    && pip install "maturin>=1.9,<2" \
    && maturin build --release --locked --manifest-path juggler_native/Cargo.toml --out /wheels

FROM ${PYTHON_IMAGE} AS base
# Installed (not editable) packages cannot find the repo's schemas/ and topics/ next
# to their source, so the image copies them and points the service at them.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    JUGGLER_SCHEMAS=/opt/juggler/schemas \
    JUGGLER_TOPICS=/opt/juggler/topics \
    JUGGLER_CACHE=/var/cache/juggler
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/juggler --create-home juggler \
    && install -d -o juggler -g juggler /var/cache/juggler
WORKDIR /opt/juggler
COPY pyproject.toml README.md ./
COPY services/ services/
COPY schemas/ schemas/
COPY topics/ topics/
COPY --from=native /wheels/ /tmp/wheels/
# With the faust extra (faust-streaming 0.15.3; it and its dependencies come as wheels
# for CPython 3.11, so no compiler): JUGGLER_RUNTIME=faust works in every container.
RUN pip install /tmp/wheels/*.whl ".[faust]" && rm -rf build services/*.egg-info /tmp/wheels

FROM base AS spark
RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless maven \
    && rm -rf /var/lib/apt/lists/* \
    && pip install ".[spark]"
USER juggler
RUN python -c "from juggler.spark.connectors import connector_jars; connector_jars()" \
    && rm -rf /var/lib/juggler/.m2
ENTRYPOINT ["juggler"]
CMD ["spark", "generate", "--help"]

FROM base AS worker
USER juggler
EXPOSE 6066
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('JUGGLER_WEB_PORT', '6066') + '/health', timeout=4)"
ENTRYPOINT ["juggler"]
CMD ["worker"]
