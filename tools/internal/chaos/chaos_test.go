package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/testbin"
)

// binaries returns a directory holding broker, controller and gateway
// (TIDEMARK_CHAOS_BIN_DIR, a fresh bin/, or a build: see testbin.Dir).
func binaries(t *testing.T) string {
	t.Helper()
	return testbin.Dir(t, filepath.Join("..", "..", ".."), "TIDEMARK_CHAOS_BIN_DIR")
}

// logWriter sends the timeline to the test log line by line.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestProcessChaos is one short seeded nemesis run against a cluster of
// separate processes (see the package comment): faults on the real
// processes for 25s, then the quiet period, the liveness poll, the logs
// read from disk and the history checked. TIDEMARK_CHAOS_SEED picks the
// seed (default 1), TIDEMARK_CHAOS_SECONDS the fault time. A failure
// prints the seed, the replay command and the kept data dir (node logs in
// its logs/).
func TestProcessChaos(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: the process chaos run takes about a minute and a half")
	}
	seed := uint64(1)
	if s := os.Getenv("TIDEMARK_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TIDEMARK_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	faults := 25 * time.Second
	if s := os.Getenv("TIDEMARK_CHAOS_SECONDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("TIDEMARK_CHAOS_SECONDS=%q: want a positive number", s)
		}
		faults = time.Duration(v) * time.Second
	}
	bin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), faults+4*time.Minute)
	defer cancel()
	start := time.Now()
	// The liveness bound is tighter than the command's default, to keep a
	// failing run near 90s: the producers close at once when nothing is
	// wrong, and the quiet period takes 7s of it.
	res, err := Run(ctx, Options{Seed: seed, Faults: faults, BinDir: bin, Out: logWriter{t}, LivenessBound: 40 * time.Second,
		Replay: "cd tools && TIDEMARK_CHAOS_SEED=%d TIDEMARK_CHAOS_SECONDS=" + strconv.Itoa(int(faults.Seconds())) +
			" go test -count=1 -v -run TestProcessChaos ./internal/chaos/"})
	if err != nil {
		t.Fatalf("the run could not be carried out: %v (data dir %s)", err, res.DataDir)
	}
	t.Logf("run took %s", time.Since(start).Round(time.Second))
	if res.Report.Stats.Acked == 0 {
		t.Fatalf("no write was acknowledged: the run tested nothing (data dir %s)", res.DataDir)
	}
	if !res.OK() {
		t.Fatalf("%d promises broken, %d views wrong, %d slow stops, %d stray logs, %d partitions not serving (seed %d); replay: %s; data dir %s",
			len(res.Report.Violations), len(res.Views), len(res.SlowStops), len(res.Strays), len(res.Unserved), seed, res.Replay, res.DataDir)
	}
}

// TestProcessIsolatedLeader cuts the leader of an acks=1 partition from
// etcd and both controllers (the proxies black-hole, so nothing is
// refused), past its 3 s lease, while a client and the followers still
// reach it and acks=1 writes to it go on: across real processes, the
// isolated leader must acknowledge nothing after the new leader's election
// and nothing sent more than a lease after the cut (the leader fence,
// DESIGN.md section 4), and after the heal every partition must be whole
// again and the history clean.
func TestProcessIsolatedLeader(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "the isolated-leader process run in -short mode: it takes about 45s")
	}
	testenv.RequireFile(t, "/proc/net/tcp", "/proc/net/tcp (the links name a connection's process through it)", "run on Linux with /proc mounted")
	bin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, Options{Seed: 1, Faults: time.Second, MaxFaults: 1, Steps: []string{"isolate-leader"},
		BinDir: bin, Out: logWriter{t}, LivenessBound: 40 * time.Second,
		Replay: "cd tools && go test -count=1 -v -run TestProcessIsolatedLeader ./internal/chaos/"})
	if err != nil {
		t.Fatalf("the run could not be carried out: %v (data dir %s)", err, res.DataDir)
	}
	t.Logf("run took %s", time.Since(start).Round(time.Second))
	if len(res.Fences) != 1 {
		t.Fatalf("%d isolated leaders, want 1 (data dir %s)", len(res.Fences), res.DataDir)
	}
	f := res.Fences[0]
	if f.NewLeader < 0 {
		t.Fatalf("no new leader elected while the leader was cut from etcd: %s", f)
	}
	if f.AckedAfterElection != 0 || f.SentAfterLease != 0 || f.LostAfterElection != 0 {
		t.Errorf("the isolated leader acknowledged writes it had no right to: %s", f)
	}
	if f.AckedByOld == 0 || f.AckedByNew == 0 {
		t.Errorf("the run tested nothing: acks=1 writes must be acknowledged by the old leader before its fence and by the new one after the election: %s", f)
	}
	if !res.Report.OK() {
		t.Errorf("%d promises broken; data dir %s", len(res.Report.Violations), res.DataDir)
	}
}
