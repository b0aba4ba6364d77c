# etcd for the compose stack, FROM scratch from the static etcd and etcdctl
# that `make thirdparty` builds from their pinned module (tools/thirdparty/etcd).
# The paths match the upstream image's, so the compose file runs either one.
FROM scratch
COPY etcd etcdctl /usr/local/bin/
ENV PATH=/usr/local/bin
# etcd runs as an unprivileged user. /var/lib/etcd (the volume's mount
# point) belongs to it, so the named volume does too; the compose file puts
# the data directory one level down, which etcd creates with the 0700 mode
# it wants. /tmp is for etcdctl and must be writable by the user as well.
COPY --chown=65532:65532 owned /var/lib/etcd
COPY --chown=65532:65532 owned /tmp
USER 65532:65532
WORKDIR /var/lib/etcd
EXPOSE 2379 2380
CMD ["/usr/local/bin/etcd"]
LABEL org.opencontainers.image.title="etcd for tidemark"
