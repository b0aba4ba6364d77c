package linkfloor

import (
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// peerDirEnv makes the test binary the echoing end, serving with the
// certificates in the directory it names.
const peerDirEnv = "TIDEMARK_LINKFLOOR_PEER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(peerDirEnv); dir != "" {
		if err := ServeUntilEOF(context.Background(), dir, os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startTestPeer issues certificates into a new directory and starts this
// test binary as the echoing end.
func startTestPeer(t *testing.T) (dir string, p *Peer) {
	t.Helper()
	dir = t.TempDir()
	if err := IssueCerts(dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerDirEnv+"="+dir)
	p, err := StartPeer(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return dir, p
}

func TestMeasuresBothLinksToAnotherProcess(t *testing.T) {
	dir, p := startTestPeer(t)
	cfg, err := ClientConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size, n = 1000, 300
	res, err := Measure(ctx, p.TLSAddr, p.GRPCAddr, cfg, size, n)
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != size || res.RoundTrips != n {
		t.Fatalf("result says %d round trips of %d B, want %d of %d", res.RoundTrips, res.Size, n, size)
	}
	for name, l := range map[string]Latency{"TLS": res.TLS, "gRPC": res.GRPC} {
		if l.P50 <= 0 || l.P50 > l.P99 || l.Mean <= 0 {
			t.Fatalf("%s: %+v: a round trip takes time, and p50 <= p99", name, l)
		}
		// A round trip between two processes of one machine is far
		// under a second; more is a measurement of something else.
		if l.P50 > time.Second {
			t.Fatalf("%s: p50 %v", name, l.P50)
		}
	}
	// The peer ends when its input closes.
	if err := p.Stop(); err != nil {
		t.Fatalf("peer did not stop cleanly: %v", err)
	}
}

func TestBothEndsRefuseACertificateOfAnotherCA(t *testing.T) {
	dir, p := startTestPeer(t)
	other := t.TempDir()
	if err := IssueCerts(other); err != nil {
		t.Fatal(err)
	}
	ours, err := ClientConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := ClientConfig(other)
	if err != nil {
		t.Fatal(err)
	}
	// The peer refuses a client certificate it cannot chain; the client
	// refuses a server it cannot chain.
	strangerClient := ours.Clone()
	strangerClient.GetClientCertificate = theirs.GetClientCertificate
	for name, cfg := range map[string]*tls.Config{"client of another CA": strangerClient, "server of another CA": theirs} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := Measure(ctx, p.TLSAddr, p.GRPCAddr, cfg, 128, 10); err == nil {
				t.Fatal("measured the links")
			} else if !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("refusal does not name the certificate: %v", err)
			}
			if ctx.Err() != nil {
				t.Fatal("the refusal waited for the deadline")
			}
		})
	}
	// The peer still serves its own client after refusing strangers.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Measure(ctx, p.TLSAddr, p.GRPCAddr, ours, 128, 10); err != nil {
		t.Fatal(err)
	}
}

func TestMeasureRefusesNonsense(t *testing.T) {
	for _, c := range []struct{ size, n int }{{0, 10}, {128, 0}, {-1, -1}} {
		if _, err := Measure(context.Background(), "127.0.0.1:1", "127.0.0.1:1", nil, c.size, c.n); err == nil || !strings.Contains(err.Error(), "positive") {
			t.Fatalf("size %d, %d round trips: %v", c.size, c.n, err)
		}
	}
}

func TestPeerThatPrintsNoAddressesIsAnError(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo hello; cat >/dev/null")
	if _, err := StartPeer(cmd); err == nil || !strings.Contains(err.Error(), "hello") {
		t.Fatalf("got %v, want an error quoting what the peer printed", err)
	}
}

func TestQuantileByNearestRank(t *testing.T) {
	times := make([]time.Duration, 100)
	for i := range times {
		times[i] = time.Duration(i+1) * time.Millisecond
	}
	if got := quantile(times, 0.5); got != 50*time.Millisecond {
		t.Fatalf("p50 %v", got)
	}
	if got := quantile(times, 0.99); got != 99*time.Millisecond {
		t.Fatalf("p99 %v", got)
	}
	if got := quantile(times[:1], 0.99); got != time.Millisecond {
		t.Fatalf("p99 of one %v", got)
	}
}
