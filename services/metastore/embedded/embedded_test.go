package embedded

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestStartServesOnFreePorts(t *testing.T) {
	start := time.Now()
	srv, err := Start(Config{
		Dir:               t.TempDir(),
		ClientURL:         "http://127.0.0.1:0",
		PeerURL:           "http://127.0.0.1:0",
		HeartbeatInterval: 10 * time.Millisecond,
		ElectionTimeout:   100 * time.Millisecond,
		UnsafeNoFsync:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Logf("ready in %s at %s (peer %s)", time.Since(start), srv.ClientURL(), srv.PeerURL())

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{srv.ClientURL()},
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get = %v, %v", resp, err)
	}
	// 1 s leases must be allowed with a 100 ms election timeout.
	lease, err := cli.Grant(ctx, 1)
	if err != nil || lease.TTL != 1 {
		t.Fatalf("grant 1s = %+v, %v", lease, err)
	}
}

func TestConfigValidation(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no dir":        {},
		"bad url":       {Dir: "x", ClientURL: "::"},
		"https":         {Dir: "x", ClientURL: "https://127.0.0.1:0"},
		"short timeout": {Dir: "x", HeartbeatInterval: 100 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond},
	} {
		if _, err := cfg.embedConfig(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
