package embedded

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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
	tlsFiles := &TLS{CA: "ca.pem", Cert: "etcd.pem", Key: "etcd-key.pem", ClientCertAuth: true}
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no dir":             {Config{}, "Config.Dir is required"},
		"bad url":            {Config{Dir: "x", ClientURL: "::"}, "is not a URL"},
		"https without TLS":  {Config{Dir: "x", ClientURL: "https://127.0.0.1:0"}, "must be http://"},
		"http with TLS":      {Config{Dir: "x", ClientURL: "http://127.0.0.1:0", ClientTLS: tlsFiles}, "must be https://"},
		"TLS without key":    {Config{Dir: "x", ClientURL: "https://127.0.0.1:0", ClientTLS: &TLS{Cert: "etcd.pem"}}, "ClientTLS needs Cert and Key"},
		"client auth, no CA": {Config{Dir: "x", ClientURL: "https://127.0.0.1:0", ClientTLS: &TLS{Cert: "c", Key: "k", ClientCertAuth: true}}, "CA with ClientCertAuth"},
		"short timeout":      {Config{Dir: "x", HeartbeatInterval: 100 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond}, "at least 5"},
	} {
		if _, err := tc.cfg.embedConfig(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
	ec, err := Config{Dir: "x", ClientTLS: tlsFiles}.embedConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := ec.ListenClientUrls[0].String(); got != "https://127.0.0.1:2379" || !ec.ClientTLSInfo.ClientCertAuth || ec.ClientTLSInfo.TrustedCAFile != "ca.pem" {
		t.Fatalf("default TLS config: %s, %+v", got, ec.ClientTLSInfo)
	}
}

// TestCompactionRetentionCompactsOldRevisions: with a retention set, etcd
// compacts history older than it (here 1 s, so the test sees it happen):
// reading an early revision then fails as compacted, the current value
// stays.
func TestCompactionRetentionCompactsOldRevisions(t *testing.T) {
	srv, err := Start(Config{
		Dir: t.TempDir(), ClientURL: "http://127.0.0.1:0", PeerURL: "http://127.0.0.1:0",
		HeartbeatInterval: 10 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, UnsafeNoFsync: true,
		CompactionRetention: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := cli.Put(ctx, "k", "0")
	if err != nil {
		t.Fatal(err)
	}
	// Keep writing until the first revision is compacted away (etcd's
	// periodic compactor runs every tenth of the retention).
	for i := 1; ; i++ {
		if _, err := cli.Put(ctx, "k", strconv.Itoa(i)); err != nil {
			t.Fatalf("put %d: %v (never compacted?)", i, err)
		}
		_, err := cli.Get(ctx, "k", clientv3.WithRev(first.Header.Revision))
		if errors.Is(err, rpctypes.ErrCompacted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp, err := cli.Get(ctx, "k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) == "0" {
		t.Fatalf("the current value after compaction: %v, %v", resp, err)
	}
}
