package benchcmp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"tidemark.io/tools/internal/linkfloor"
)

func TestLinkFloorNoteSetsTheSyncRowAgainstTwoRoundTrips(t *testing.T) {
	run := func(tls, grpc time.Duration) linkfloor.Result {
		return linkfloor.Result{Size: 128, RoundTrips: 1000, TLS: linkfloor.Latency{P50: tls}, GRPC: linkfloor.Latency{P50: grpc}}
	}
	r := &Result{
		// The median pair is taken per link: 80 µs bare, 125 µs gRPC.
		LinkFloor: &LinkFloor{Runs: []linkfloor.Result{
			run(90*time.Microsecond, 40*time.Microsecond), run(70*time.Microsecond, 125*time.Microsecond),
			run(80*time.Microsecond, 130*time.Microsecond)}},
		Rows: []Row{{Shape: Shape{Name: "sync1-128", Mode: Sync, Size: 128, Producers: 1},
			Tidemark:  Figure{MsgsPerSec: 2000, P50: 400 * time.Microsecond},
			JetStream: Figure{MsgsPerSec: 2500, P50: 360 * time.Microsecond}}},
	}
	md := r.Markdown()
	for _, want := range []string{
		"took p50 80 µs on a bare TLS connection (70–90 across pairs of processes) and 125 µs on a gRPC stream set up as tidemark's links are (40–130)",
		"(3 pairs of processes, 1000 round trips each",
		"cannot pass 6250 writes/s here over bare TLS, 4000 over gRPC",
		"tidemark 400 µs, 3.2 gRPC round trips (150 µs above two",
		"JetStream 360 µs, 4.5 bare TLS round trips",
		"Twice JetStream's synchronous rate (5000 writes/s) leaves 200 µs per write: 2.5 bare TLS round trips, 1.6 gRPC ones",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, empty := range []*LinkFloor{nil, {}} {
		r.LinkFloor = empty
		if md := r.Markdown(); strings.Contains(md, "The floor under") {
			t.Errorf("a run without the measurement speaks of it:\n%s", md)
		}
	}
}

func TestLinkFloorIsKeptInTheResultFile(t *testing.T) {
	r := &Result{LinkFloor: &LinkFloor{Runs: []linkfloor.Result{{Size: 128, RoundTrips: 10, TLS: linkfloor.Latency{P50: time.Microsecond}}}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.LinkFloor == nil || len(back.LinkFloor.Runs) != 1 || back.LinkFloor.Runs[0] != r.LinkFloor.Runs[0] {
		t.Fatalf("%s read back as %+v", b, back.LinkFloor)
	}
}
