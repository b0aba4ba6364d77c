# The tidemark services in one image: broker, controller, gateway and the
# tidemark CLI (whose `tidemark health` is the image's health probe: there is
# no shell). Built FROM scratch from the static binaries `make build` puts in
# bin/; `make images` stages them as this build's context.
FROM scratch
COPY broker controller gateway tidemark /usr/local/bin/
ENV PATH=/usr/local/bin
# Brokers keep their partition logs here (a named volume per broker).
WORKDIR /data
LABEL org.opencontainers.image.title="tidemark" \
      org.opencontainers.image.description="tidemark broker, controller, gateway and CLI"
