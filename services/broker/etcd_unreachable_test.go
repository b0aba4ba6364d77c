package broker_test

import (
	"context"
	"strings"
	"testing"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/services/platform/tlsconf"
)

// A broker started with etcd unreachable fails naming etcd and the
// endpoint it tried, rather than a bare deadline.
func TestStartWithEtcdUnreachable(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: waits out the 15 s cluster id lookup")
	}
	dead, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cfg := broker.DefaultConfig()
	cfg.TLS = tlsconf.Plain()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Etcd.Endpoints = config.StringList{dead}
	b, err := broker.Start(context.Background(), cfg, nil)
	if err == nil {
		b.Crash()
		t.Fatal("started without etcd")
	}
	if !strings.Contains(err.Error(), "etcd") || !strings.Contains(err.Error(), dead) {
		t.Fatalf("start with etcd unreachable failed with %q: it names neither etcd nor the endpoint %s", err, dead)
	}
}
