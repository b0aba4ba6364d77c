# Jaeger (all-in-one, in-memory storage) for the compose stack, FROM scratch
# from the static binary `make thirdparty` builds from its pinned module
# (tools/thirdparty/jaeger). The binary sits where the upstream image keeps
# it. The tidemark CLI comes along as the health probe (`tidemark health`
# against Jaeger's gRPC health endpoint, 13132): the image has no shell.
# A binary built from the Go module serves the HTTP API on 16686 but no UI
# assets.
FROM scratch
COPY jaeger /cmd/jaeger/jaeger-linux
COPY tidemark /usr/local/bin/tidemark
ENV PATH=/usr/local/bin \
    JAEGER_LISTEN_HOST=0.0.0.0
# Jaeger keeps its spans in memory and needs nothing of its own on disk
# but a writable /tmp; it runs as an unprivileged user.
COPY --chown=65532:65532 owned /tmp
USER 65532:65532
WORKDIR /tmp
EXPOSE 4317 4318 16686 13132 13133
ENTRYPOINT ["/cmd/jaeger/jaeger-linux"]
LABEL org.opencontainers.image.title="Jaeger for tidemark"
