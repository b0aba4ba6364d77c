package benchcmp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"tidemark.io/services/platform/testenv"
)

// natsBinDir is the .bin/ holding nats-server and nats (make
// thirdparty-nats), the first found walking up from the test's directory.
func natsBinDir(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for ; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		bin := filepath.Join(dir, ".bin")
		if _, err := os.Stat(filepath.Join(bin, "nats-server")); err == nil {
			testenv.RequireFile(t, filepath.Join(bin, "nats"), "the nats CLI", "make thirdparty-nats")
			return bin
		}
	}
	testenv.Unavailable(t, "nats-server in .bin/", "make thirdparty-nats")
	return ""
}

// The peer runs with the same security as tidemark's dev cluster: its
// clients and routes take only TLS connections with a certificate the run's
// CA signed, and the benchmark's own clients (nats.go and the nats CLI) get
// through with theirs. Were the peer plaintext, the comparison would
// measure tidemark's encryption, not the two systems.
func TestJetStreamSideRequiresMutualTLS(t *testing.T) {
	testenv.SkipIfShort(t, "starts a 3-node nats-server cluster")
	bin := natsBinDir(t)
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "side.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	j := &jetStreamSide{binDir: bin, procs: 1, dir: dir, log: log}
	defer j.stop()
	if err := j.start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, u := range j.urls {
		if !strings.HasPrefix(u, "tls://") {
			t.Fatalf("client URL %s is not TLS", u)
		}
	}
	// Refused: no TLS at all, and TLS without a client certificate.
	if nc, err := nats.Connect(strings.Replace(j.urls[0], "tls://", "nats://", 1), nats.Timeout(3*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a plaintext client was let in")
	}
	noCert, err := j.clientTLS().Client()
	if err != nil {
		t.Fatal(err)
	}
	noCert.Certificates, noCert.GetClientCertificate = nil, nil
	if nc, err := nats.Connect(j.urls[0], nats.Secure(noCert), nats.Timeout(3*time.Second)); err == nil {
		if err = nc.Flush(); err == nil {
			nc.Close()
			t.Fatal("a TLS client without a certificate was let in")
		}
		nc.Close()
	}
	// Accepted: the harness's clients. An R3 stream needs the routes up,
	// so a synchronous bench that gets its acks proves those too.
	f := j.run(ctx, Shape{Name: "tls-check", Mode: Sync, Size: 128, Producers: 1, Records: 20})
	if f.Err != "" || f.MsgsPerSec <= 0 {
		t.Fatalf("nats bench over TLS: %+v", f)
	}
	// nats.go too, with a warm-up: 20 messages first, not measured.
	f = j.run(ctx, Shape{Name: "tls-paced", Mode: Paced, Size: 128, Producers: 1, Records: 50, Rate: 100, Seconds: 0.5, Warmup: 0.2})
	if f.Err != "" || f.MsgsPerSec <= 0 || f.Records != 50 {
		t.Fatalf("nats.go over TLS: %+v", f)
	}
	// Each node serves its CPU profile (prof_port, loopback); the harness
	// splits it and names the stream's leader.
	files, cpus, err := j.profile(ctx, Shape{Name: "tls-check", Mode: Sync, Size: 1024, Producers: 1, Records: 3000}, dir)
	if err != nil {
		t.Fatalf("profiling the nodes: %v (files %v)", err, files)
	}
	leaders := 0
	for _, c := range cpus {
		if c.System != "jetstream" || c.Shape != "sync, 1 producer, 1 KiB" || c.CPU <= 0 || c.Window < time.Second {
			t.Errorf("profile of %s: %+v", c.Process, c)
		}
		if c.Role == "leader" {
			leaders++
		}
	}
	if len(cpus) != 3 || leaders != 1 || len(files) != 3 {
		t.Fatalf("want 3 nodes' profiles, one the stream's leader: %+v (files %v)", cpus, files)
	}
}

func TestJetStreamConfigHasTLSOnClientsAndRoutes(t *testing.T) {
	o := jetStreamConfig("n", "/s", 1, 2, 3, 4, []string{"nats-route://127.0.0.1:2"}, nil)
	if strings.Contains(o, "tls") {
		t.Fatalf("plaintext config has TLS:\n%s", o)
	}
	sec := &jetStreamSide{dir: "/d"}
	c := jetStreamConfig("n", "/s", 1, 2, 3, 4, []string{"nats-route://127.0.0.1:2"}, sec.clientTLS())
	if !strings.Contains(o, "prof_port: 4\n") || !strings.Contains(o, "listen: 127.0.0.1:1\n") {
		t.Fatalf("want the profiler on the loopback host of the client listener:\n%s", o)
	}
	if n := strings.Count(c, "verify: true"); n != 2 {
		t.Fatalf("want client and route TLS with verify, got %d blocks:\n%s", n, c)
	}
}

// Both systems get the same window on the batching shapes: tidemark's
// buffer.memory is the bytes nats bench's async batch holds.
func TestBatchShapesGiveBothSystemsTheSameWindow(t *testing.T) {
	n := 0
	for _, s := range DefaultShapes(1, DefaultInFlight) {
		if s.Mode != Batch {
			if s.InFlight != 0 {
				t.Errorf("%s is not a batching shape but has a window", s.Name)
			}
			continue
		}
		n++
		if s.InFlight != DefaultInFlight || s.asyncBatch()*s.Size != DefaultInFlight {
			t.Errorf("%s: tidemark window %d B, JetStream %d messages of %d B", s.Name, s.InFlight, s.asyncBatch(), s.Size)
		}
	}
	if n != 3 {
		t.Fatalf("want the 3 batching shapes, saw %d", n)
	}
	if b := (Shape{Mode: Batch, Size: 4096, InFlight: 1000}).asyncBatch(); b != 1 {
		t.Fatalf("a window under one message is one message, got %d", b)
	}
}
