package broker

import (
	"cmp"
	"slices"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/replica"
)

const (
	// fullReportInterval bounds how long a lost or dropped report can
	// leave the controller's view of this broker's replicas wrong.
	fullReportInterval = 30 * time.Second
	// lagStepMs is how far a follower's caught-up age (LagMs) must move,
	// or which boundary it must cross, before a leader's entry counts as
	// changed: the age grows by the report interval on every report, and a
	// caught-up follower's jitters below the fetch wait (500 ms by default).
	lagStepMs = 1000
)

// hostedProgress is one hosted replica's progress now. instance tells a
// replica recreated under the same name (a topic deleted and created again)
// from the one reported before, even when their positions agree.
type hostedProgress struct {
	instance any
	p        *controlv1.ReplicaProgress
}

// sentProgress is what the session last said of one replica; seen is the
// number of the last report that found the replica still hosted.
type sentProgress struct {
	instance any
	p        *controlv1.ReplicaProgress
	seen     uint64
}

// progressReport is what one session report says about the replicas.
type progressReport struct {
	replicas []*controlv1.ReplicaProgress
	removed  []*commonv1.TopicPartition
	full     bool
}

// progressReporter remembers what one controller session was last told of
// each replica, so a report carries only what changed. A new session needs a
// new reporter: its first report is full.
type progressReporter struct {
	sent     map[replica.TP]*sentProgress
	reports  uint64
	lastFull time.Time
}

func newProgressReporter() *progressReporter { return &progressReporter{} }

// next turns the replicas' progress now into the session's next report: the
// complete set on the session's first report and every fullReportInterval,
// otherwise the replicas whose progress changed (see progressChanged) and
// those no longer hosted.
func (r *progressReporter) next(now time.Time, hosted []hostedProgress) progressReport {
	r.reports++
	if r.sent == nil || now.Sub(r.lastFull) >= fullReportInterval {
		r.sent = make(map[replica.TP]*sentProgress, len(hosted))
		r.lastFull = now
		out := progressReport{full: true, replicas: make([]*controlv1.ReplicaProgress, 0, len(hosted))}
		for _, h := range hosted {
			r.sent[tpOf(h.p)] = &sentProgress{instance: h.instance, p: h.p, seen: r.reports}
			out.replicas = append(out.replicas, h.p)
		}
		return out
	}
	var out progressReport
	for _, h := range hosted {
		tp := tpOf(h.p)
		prev := r.sent[tp]
		if prev == nil {
			prev = &sentProgress{}
			r.sent[tp] = prev
		} else if prev.instance == h.instance && !progressChanged(prev.p, h.p) {
			prev.seen = r.reports
			continue
		}
		*prev = sentProgress{instance: h.instance, p: h.p, seen: r.reports}
		out.replicas = append(out.replicas, h.p)
	}
	// Every hosted replica is in sent now: more entries mean removals.
	if len(r.sent) != len(hosted) {
		for tp, sp := range r.sent {
			if sp.seen != r.reports {
				delete(r.sent, tp)
				out.removed = append(out.removed, &commonv1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
			}
		}
		slices.SortFunc(out.removed, func(x, y *commonv1.TopicPartition) int {
			return cmp.Or(cmp.Compare(x.GetTopic(), y.GetTopic()), cmp.Compare(x.GetPartition(), y.GetPartition()))
		})
	}
	return out
}

func tpOf(p *controlv1.ReplicaProgress) replica.TP {
	return replica.TP{Topic: p.GetTopic(), Partition: p.GetPartition()}
}

// progressChanged reports whether the controller must hear of cur, having
// been told prev. Every field counts exactly except a follower's LagMs: see
// lagMoved.
func progressChanged(prev, cur *controlv1.ReplicaProgress) bool {
	if prev.GetBrokerId() != cur.GetBrokerId() || prev.GetLogEndOffset() != cur.GetLogEndOffset() ||
		prev.GetHighWatermark() != cur.GetHighWatermark() || prev.GetLogStartOffset() != cur.GetLogStartOffset() ||
		prev.GetLeaderEpoch() != cur.GetLeaderEpoch() || prev.GetLeader() != cur.GetLeader() ||
		prev.GetSizeBytes() != cur.GetSizeBytes() || !slices.Equal(prev.GetMaximalIsr(), cur.GetMaximalIsr()) {
		return true
	}
	pf, cf := prev.GetFollowers(), cur.GetFollowers()
	if len(pf) != len(cf) {
		return true
	}
	for i := range pf {
		if pf[i].GetBrokerId() != cf[i].GetBrokerId() || pf[i].GetLogEndOffset() != cf[i].GetLogEndOffset() ||
			lagMoved(pf[i].GetLagMs(), cf[i].GetLagMs()) {
			return true
		}
	}
	return false
}

// lagMoved is the LagMs rule: a follower's caught-up age counts as changed
// when it moved by lagStepMs or more, or crossed lagStepMs either way (a
// follower falling behind, or catching up again). A caught-up follower's
// age, jittering below the fetch wait, never counts; a lagging follower's
// is re-sent about once a second, so "caught up N ms ago" keeps moving.
func lagMoved(sent, now int64) bool {
	return abs(now-sent) >= lagStepMs || (sent >= lagStepMs) != (now >= lagStepMs)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
