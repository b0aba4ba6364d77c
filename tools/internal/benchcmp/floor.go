package benchcmp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"tidemark.io/tools/internal/linkfloor"
)

// floorRuns and floorRoundTrips: `tidemark perf link` is run floorRuns
// times (a new pair of processes each) of floorRoundTrips round trips per
// link before the shapes. One pair's gRPC p50 is bimodal on this machine
// (31-43 µs in some pairs, 93-124 µs in others, the same binary a second
// apart), so the floor is the median pair's, with the range beside it.
const (
	floorRuns       = 5
	floorRoundTrips = 1000
)

// LinkFloor is the round trip between two processes here, per pair of
// processes measured.
type LinkFloor struct {
	Runs []linkfloor.Result `json:"runs"`
}

// p50s are one link's p50 in each run, sorted.
func (f *LinkFloor) p50s(grpc bool) []time.Duration {
	out := make([]time.Duration, 0, len(f.Runs))
	for _, r := range f.Runs {
		if grpc {
			out = append(out, r.GRPC.P50)
		} else {
			out = append(out, r.TLS.P50)
		}
	}
	slices.Sort(out)
	return out
}

// median is the median run's p50 of one link, 0 with no runs.
func (f *LinkFloor) median(grpc bool) time.Duration {
	p := f.p50s(grpc)
	if len(p) == 0 {
		return 0
	}
	return p[(len(p)-1)/2]
}

// measureLinkFloor runs `tidemark perf link` from binDir floorRuns times
// with the servers' GOMAXPROCS: the round trip under every synchronous
// write here.
func measureLinkFloor(ctx context.Context, binDir string, procs int) (*LinkFloor, error) {
	f := &LinkFloor{}
	for range floorRuns {
		r, err := runPerfLink(ctx, binDir, procs)
		if err != nil {
			return nil, err
		}
		f.Runs = append(f.Runs, *r)
	}
	return f, nil
}

func runPerfLink(ctx context.Context, binDir string, procs int) (*linkfloor.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "tidemark"), "perf", "link", "--json",
		"--size", "128", "--round-trips", strconv.Itoa(floorRoundTrips))
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("tidemark perf link: %w: %s", err, bytes.TrimSpace(errOut.Bytes()))
	}
	var res linkfloor.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("tidemark perf link printed %q: %w", out.String(), err)
	}
	if res.TLS.P50 <= 0 || res.GRPC.P50 <= 0 {
		return nil, fmt.Errorf("tidemark perf link printed no round trip: %q", out.String())
	}
	return &res, nil
}

// String is the floor as the progress line gives it.
func (f *LinkFloor) String() string {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	t, g := f.p50s(false), f.p50s(true)
	return fmt.Sprintf("p50 %.0f µs on a bare TLS connection (%.0f–%.0f across pairs of processes) and %.0f µs on a gRPC stream set up as tidemark's links are (%.0f–%.0f)",
		us(f.median(false)), us(t[0]), us(t[len(t)-1]), us(f.median(true)), us(g[0]), us(g[len(g)-1]))
}

// linkFloorNote sets the synchronous rows against the floor: what two
// round trips between processes cost here, and what twice JetStream's
// synchronous rate would leave per write.
func (r *Result) linkFloorNote() string {
	f := r.LinkFloor
	if f == nil || len(f.Runs) == 0 {
		return ""
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	tls, grpc := f.median(false), f.median(true)
	s := fmt.Sprintf("\n- The floor under the synchronous rows: one message of %d B each way between two processes of this machine over mutual TLS on loopback took %s (%d pairs of processes, %d round trips each, `tidemark perf link` with the servers' GOMAXPROCS, measured before the shapes; the figure is the median pair's: a gRPC link here may run near the bare connection's time or several times it for the life of a pair, hence the range). A synchronous write takes at least two such round trips in either system (client to leader and back, leader to a follower and back), so one producer waiting for each write cannot pass %.0f writes/s here over bare TLS, %.0f over gRPC, whatever the servers do in between.",
		f.Runs[0].Size, f, len(f.Runs), f.Runs[0].RoundTrips, 1/(2*tls.Seconds()), 1/(2*grpc.Seconds()))
	for _, row := range r.Rows {
		if row.Shape.Name != "sync1-128" {
			continue
		}
		t, j := row.Tidemark, row.JetStream
		if t.Err == "" && t.P50 > 0 {
			s += fmt.Sprintf(" One synchronous 128 B producer's p50: tidemark %.0f µs, %.1f gRPC round trips (%.0f µs above two: the brokers' work and hand-offs)",
				us(t.P50), float64(t.P50)/float64(grpc), us(t.P50-2*grpc))
			if j.Err == "" && j.P50 > 0 {
				s += fmt.Sprintf("; JetStream %.0f µs, %.1f bare TLS round trips", us(j.P50), float64(j.P50)/float64(tls))
			}
			s += "."
		}
		if j.Err == "" && j.MsgsPerSec > 0 {
			per := time.Duration(float64(time.Second) / (2 * j.MsgsPerSec))
			s += fmt.Sprintf(" Twice JetStream's synchronous rate (%.0f writes/s) leaves %.0f µs per write: %.1f bare TLS round trips, %.1f gRPC ones.",
				2*j.MsgsPerSec, us(per), float64(per)/float64(tls), float64(per)/float64(grpc))
		}
	}
	return s + "\n"
}
