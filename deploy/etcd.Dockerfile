# etcd for the compose stack, FROM scratch from the static etcd and etcdctl
# that `make thirdparty` builds from their pinned module (tools/thirdparty/etcd).
# The paths match the upstream image's, so the compose file runs either one.
FROM scratch
COPY etcd etcdctl /usr/local/bin/
ENV PATH=/usr/local/bin
WORKDIR /tmp
WORKDIR /var/lib/etcd
EXPOSE 2379 2380
CMD ["/usr/local/bin/etcd"]
LABEL org.opencontainers.image.title="etcd for tidemark"
