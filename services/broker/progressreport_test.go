package broker

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// hostedSet builds n replicas of topic t; replica 0 leads with one follower.
type hostedSet struct {
	instances []*int
	ps        []*controlv1.ReplicaProgress
}

func newHostedSet(n int) *hostedSet {
	h := &hostedSet{}
	for i := range n {
		p := &controlv1.ReplicaProgress{Topic: "t", Partition: int32(i), BrokerId: 1, LogEndOffset: 10, HighWatermark: 10, LeaderEpoch: 3}
		if i == 0 {
			p.Leader, p.MaximalIsr = true, []int32{1, 2}
			p.Followers = []*controlv1.FollowerProgress{{BrokerId: 2, LogEndOffset: 10, LagMs: 100}}
		}
		h.instances = append(h.instances, new(int))
		h.ps = append(h.ps, p)
	}
	return h
}

// now snapshots the set as the broker would: fresh messages every time.
func (h *hostedSet) now() []hostedProgress {
	var out []hostedProgress
	for i, p := range h.ps {
		if p == nil {
			continue
		}
		out = append(out, hostedProgress{instance: h.instances[i], p: proto.CloneOf(p)})
	}
	return out
}

func names(rep progressReport) string {
	var s string
	for _, p := range rep.replicas {
		s += fmt.Sprintf(" %s-%d", p.GetTopic(), p.GetPartition())
	}
	for _, tp := range rep.removed {
		s += fmt.Sprintf(" -%s-%d", tp.GetTopic(), tp.GetPartition())
	}
	if rep.full {
		s = "full" + s
	}
	return s
}

func TestProgressReportsSendOnlyWhatChanged(t *testing.T) {
	h := newHostedSet(4)
	r := newProgressReporter()
	t0 := time.Unix(1000, 0)
	step := func(d time.Duration, want string) {
		t.Helper()
		t0 = t0.Add(d)
		if got := names(r.next(t0, h.now())); got != want {
			t.Fatalf("report: got %q, want %q", got, want)
		}
	}
	step(0, "full t-0 t-1 t-2 t-3")
	step(500*time.Millisecond, "") // idle: nothing
	h.ps[2].LogEndOffset = 11
	step(500*time.Millisecond, " t-2")
	step(500*time.Millisecond, "") // told once
	h.ps[1].HighWatermark, h.ps[3].SizeBytes = 11, 99
	step(500*time.Millisecond, " t-1 t-3")
	h.ps[0].MaximalIsr = []int32{1}
	step(500*time.Millisecond, " t-0")
	h.ps[0].Followers[0].LogEndOffset = 11
	step(500*time.Millisecond, " t-0")

	// Removal is said once; a replica recreated under the same name is
	// sent again even with equal positions.
	h.ps[3] = nil
	step(500*time.Millisecond, " -t-3")
	step(500*time.Millisecond, "")
	h.ps[3] = &controlv1.ReplicaProgress{Topic: "t", Partition: 3, BrokerId: 1, LogEndOffset: 10, HighWatermark: 10, LeaderEpoch: 3}
	h.instances[3] = new(int)
	step(500*time.Millisecond, " t-3")
	h.instances[2] = new(int)
	step(500*time.Millisecond, " t-2")

	// The safety net: a full report every fullReportInterval.
	step(fullReportInterval, "full t-0 t-1 t-2 t-3")
	step(500*time.Millisecond, "")
}

func TestProgressReportsLagRule(t *testing.T) {
	h := newHostedSet(2)
	r := newProgressReporter()
	t0 := time.Unix(1000, 0)
	r.next(t0, h.now())
	for _, c := range []struct {
		lag  int64
		sent bool
		why  string
	}{
		{400, false, "a caught-up follower's age jitters"},
		{0, false, "still caught up"},
		{999, false, "below the boundary"},
		{1000, true, "crossed the boundary: lagging now"},
		{1500, false, "moved by less than a second"},
		{1999, false, "moved by less than a second"},
		{2000, true, "moved by a second"},
		{2900, false, "moved by less than a second"},
		{3100, true, "moved by a second"},
		{2500, false, "moved back by less than a second, still lagging"},
		{300, true, "crossed back: caught up again"},
		{800, false, "caught up"},
	} {
		t0 = t0.Add(sessionReportInterval)
		h.ps[0].Followers[0].LagMs = c.lag
		rep := r.next(t0, h.now())
		if got := len(rep.replicas) == 1; got != c.sent {
			t.Fatalf("lag %d (%s): sent %v, want %v (%s)", c.lag, c.why, got, c.sent, names(rep))
		}
		if c.sent && rep.replicas[0].GetFollowers()[0].GetLagMs() != c.lag {
			t.Fatalf("lag %d: sent %d", c.lag, rep.replicas[0].GetFollowers()[0].GetLagMs())
		}
	}
	// A lagging follower's age keeps moving on the controller: with the
	// age growing by the report interval, about every other report.
	h.ps[0].Followers[0].LagMs = 5000
	r.next(t0, h.now())
	sent := 0
	for i := 1; i <= 10; i++ {
		t0 = t0.Add(sessionReportInterval)
		h.ps[0].Followers[0].LagMs = 5000 + int64(i)*sessionReportInterval.Milliseconds()
		sent += len(r.next(t0, h.now()).replicas)
	}
	if sent != 5 {
		t.Fatalf("a lagging follower over 10 reports: sent %d times, want 5", sent)
	}
}

func TestProgressReportsOfANewSessionStartFull(t *testing.T) {
	h := newHostedSet(3)
	old := newProgressReporter()
	old.next(time.Unix(1000, 0), h.now())
	if rep := old.next(time.Unix(1001, 0), h.now()); rep.full || len(rep.replicas) != 0 {
		t.Fatalf("second report of a session: %q", names(rep))
	}
	if rep := newProgressReporter().next(time.Unix(1001, 0), h.now()); names(rep) != "full t-0 t-1 t-2" {
		t.Fatalf("first report of a new session: %q", names(rep))
	}
}
