# One image for every Strom service (storage, controller, coordinator, gateway, registry, console)
# and the CLI;
# docker-compose.yml picks the service with its command (`python -m strom_storage ...`).
# Dependencies come from the same pins as the venv (constraints.txt).
# BASE is any Debian-based image with python >= 3.11 and its venv module: python:3.12-slim by
# default, or where Docker Hub is unreachable the image docker/build-debian-base makes from
# Debian's packages (docker build --network host --build-arg BASE=strom-base:bookworm .).
ARG BASE=python:3.12-slim
FROM ${BASE} AS build
# The C extensions need a compiler and Python's headers (a Debian python3 has them in python3-dev).
RUN headers=$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])') \
    && dev=$(test -e "$headers/Python.h" || echo python3-dev) \
    && apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev $dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY constraints.txt ./
COPY clients/ clients/
COPY services/ services/
RUN python -m venv /opt/strom \
    && /opt/strom/bin/pip install --no-cache-dir -c constraints.txt pip setuptools wheel \
    && /opt/strom/bin/pip install --no-cache-dir --no-build-isolation -c constraints.txt \
        ./clients ./services/common ./services/storage ./services/controller \
        ./services/coordinator ./services/gateway ./services/registry ./services/console

FROM ${BASE}
COPY --from=build /opt/strom /opt/strom
RUN groupadd --system --gid 10001 strom \
    && useradd --system --uid 10001 --gid strom --home-dir /var/lib/strom --create-home strom \
    && mkdir -p /var/lib/strom/data /var/lib/strom/etcd \
    && chown -R strom:strom /var/lib/strom
ENV PATH=/opt/strom/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    STROM_HEALTH_ADDRESS=127.0.0.1:9092
USER strom
WORKDIR /var/lib/strom
EXPOSE 9092
# Each compose service probes its own port; this default fits the gateway.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=12 \
    CMD python -m strom_server.rpc.health_probe "$STROM_HEALTH_ADDRESS"
CMD ["python", "-m", "strom_gateway", "--listen", "0.0.0.0:9092", "--etcd-endpoints", "etcd:2379"]
