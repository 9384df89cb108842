# fdbrecipes with the FoundationDB client library: the image compose.yaml's worker and
# dashboard run.  `docker build -t fdbrecipes .`, then e.g.
#   docker run --rm --network host fdbrecipes demo
#   docker run --rm fdbrecipes worker example:handle --tuple '("jobs",)'
# The client library is the official foundationdb-clients package of FDB_VERSION,
# checked against the .sha256 the release publishes beside it; the Python bindings are
# the same version (they refuse a library of another).  A non-root user runs it, and
# tini (PID 1) passes SIGTERM to fdbrecipes, so a stopping worker drains its jobs.
ARG PYTHON_VERSION=3.12
FROM python:${PYTHON_VERSION}-slim-bookworm

ARG FDB_VERSION=7.3.79
ARG TARGETARCH
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates curl tini; \
    case "${TARGETARCH:-amd64}" in \
        amd64) arch=amd64 ;; \
        arm64) arch=aarch64 ;; \
        *) echo "FoundationDB publishes no client package for ${TARGETARCH}" >&2; exit 1 ;; \
    esac; \
    deb="foundationdb-clients_${FDB_VERSION}-1_${arch}.deb"; \
    base="https://github.com/apple/foundationdb/releases/download/${FDB_VERSION}"; \
    cd /tmp; \
    curl -fsSLO --retry 3 "$base/$deb"; \
    curl -fsSLO --retry 3 "$base/$deb.sha256"; \
    echo "$(grep -oE '[0-9a-fA-F]{64}' "$deb.sha256" | head -n1)  $deb" | sha256sum -c -; \
    apt-get install -y --no-install-recommends "./$deb"; \
    rm -f "$deb" "$deb.sha256"; \
    apt-get purge -y curl; \
    apt-get autoremove -y; \
    rm -rf /var/lib/apt/lists/*; \
    fdbcli --version

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip install --no-cache-dir ".[web,prometheus]" "foundationdb==${FDB_VERSION}" \
    && rm -rf /app/src /app/pyproject.toml /app/README.md /app/LICENSE
COPY deploy/compose/example.py /app/example.py
COPY deploy/compose/fdb.cluster /etc/foundationdb/fdb.cluster
ENV FDB_CLUSTER_FILE=/etc/foundationdb/fdb.cluster \
    PYTHONUNBUFFERED=1

RUN useradd --create-home --uid 10001 app
USER app
EXPOSE 10095 10096
ENTRYPOINT ["/usr/bin/tini", "--", "fdbrecipes"]
CMD ["--help"]
