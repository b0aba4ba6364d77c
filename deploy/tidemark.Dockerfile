# The tidemark services in one image: broker, controller, gateway and the
# tidemark CLI (whose `tidemark health` is the image's health probe: there is
# no shell). Built FROM scratch from the static binaries `make build` puts in
# bin/; `make images` stages them as this build's context, with the empty
# directory owned/ that the volume mount points below are copied from.
FROM scratch
COPY broker controller gateway tidemark /usr/local/bin/
# Kafka's scripts that tidemark answers to, where Kafka's images keep them:
# kafka-bin/ holds a link to /usr/local/bin/tidemark under each script's
# name, and the binary runs the script its name says
# (tools/internal/kafkascripts), e.g. `docker compose exec -T kafka2
# /opt/kafka/bin/kafka-leader-election.sh --bootstrap-server kafka1:19092 ...`
# or `.../kafka-topics.sh --bootstrap-server kafka2:19092 --describe ...`.
COPY kafka-bin /opt/kafka/bin/
ENV PATH=/usr/local/bin
# Every process runs as this unprivileged user (no passwd file: a number).
# The directories volumes mount on belong to it in the image, so a named
# volume created from them belongs to it too: brokers keep their partition
# logs in /data, and the stack's one-shot pki service writes the CA and
# the certificates into /pki and each service's own files into
# /export/NAME (one volume per service, which that service mounts read-only
# at /pki). `make images` stages export/ with an empty folder per name.
COPY --chown=65532:65532 owned /data
COPY --chown=65532:65532 owned /pki
COPY --chown=65532:65532 export /export
USER 65532:65532
WORKDIR /data
LABEL org.opencontainers.image.title="tidemark" \
      org.opencontainers.image.description="tidemark broker, controller, gateway and CLI"
