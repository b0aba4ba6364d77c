package benchcmp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"tidemark.io/tools/internal/linkfloor"
)

// floorRoundTrips is how many round trips `tidemark perf link` times on
// each link before the shapes: about a second on this machine.
const floorRoundTrips = 3000

// measureLinkFloor runs `tidemark perf link` from binDir with the servers'
// GOMAXPROCS: the round trip under every synchronous write here.
func measureLinkFloor(ctx context.Context, binDir string, procs int) (*linkfloor.Result, error) {
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

// linkFloorNote sets the synchronous rows against the floor: what two
// round trips between processes cost here, and what twice JetStream's
// synchronous rate would leave per write.
func (r *Result) linkFloorNote() string {
	f := r.LinkFloor
	if f == nil {
		return ""
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	s := fmt.Sprintf("\n- The floor under the synchronous rows: one message of %d B each way between two processes of this machine over mutual TLS on loopback took p50 %.0f µs on a bare TLS connection and %.0f µs on a gRPC stream set up as tidemark's links are (%d round trips each, `tidemark perf link`, measured before the shapes). A synchronous write takes at least two such round trips in either system (client to leader and back, leader to a follower and back), so one producer waiting for each write cannot pass %.0f writes/s here over bare TLS, %.0f over gRPC, whatever the servers do in between.",
		f.Size, us(f.TLS.P50), us(f.GRPC.P50), f.RoundTrips, 1/(2*f.TLS.P50.Seconds()), 1/(2*f.GRPC.P50.Seconds()))
	for _, row := range r.Rows {
		if row.Shape.Name != "sync1-128" {
			continue
		}
		t, j := row.Tidemark, row.JetStream
		if t.Err == "" && t.P50 > 0 {
			s += fmt.Sprintf(" One synchronous 128 B producer's p50: tidemark %.0f µs, %.1f gRPC round trips (%.0f µs above two: the brokers' work and hand-offs)",
				us(t.P50), float64(t.P50)/float64(f.GRPC.P50), us(t.P50-2*f.GRPC.P50))
			if j.Err == "" && j.P50 > 0 {
				s += fmt.Sprintf("; JetStream %.0f µs, %.1f bare TLS round trips", us(j.P50), float64(j.P50)/float64(f.TLS.P50))
			}
			s += "."
		}
		if j.Err == "" && j.MsgsPerSec > 0 {
			per := time.Duration(float64(time.Second) / (2 * j.MsgsPerSec))
			s += fmt.Sprintf(" Twice JetStream's synchronous rate (%.0f writes/s) leaves %.0f µs per write, %.1f bare TLS round trips.",
				2*j.MsgsPerSec, us(per), float64(per)/float64(f.TLS.P50))
		}
	}
	return s + "\n"
}
