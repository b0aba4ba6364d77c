package replica

import (
	"time"

	"tidemark.io/services/broker/internal/partition"
)

// hwStallLags is how many replica.lag.time.max.ms a leader's HW may stay
// unmoved below its LEO before it is called stalled. A lagging follower
// leaves the ISR after one, and its shrink commits soon after, letting the
// HW move: a HW held longer means the shrink cannot commit (no controller)
// or the HW rule itself is stuck, and acks=all writes time out meanwhile.
const hwStallLags = 2

// hwWatch is a leader's HW as the ISR pass last sampled it (guarded by
// Replica.mu). The HW only moves up within a leadership, so the same HW
// below the LEO at two samples means it did not move between them.
type hwWatch struct {
	epoch   int32
	hw      int64
	since   time.Time // first sample of this HW below the LEO; zero: none
	stalled bool
}

// hwStall is what one sample changed, for the log.
type hwStall struct {
	began, ended bool
	hw, leo      int64
	epoch        int32
	isr          []int32
	held         time.Duration
}

// sampleHWLocked samples r's HW at now; the caller holds r.mu. A
// follower, a HW at the LEO and a HW held on purpose (the ISR below
// min.insync.replicas, which its own gauge shows) are never stalled.
func (r *Replica) sampleHWLocked(now time.Time, lag time.Duration) hwStall {
	p, w := r.state, &r.hwWatch
	was, since := w.stalled, w.since
	out := hwStall{hw: p.HighWatermark(), leo: p.LogEndOffset(), epoch: p.LeaderEpoch()}
	switch {
	case !p.IsLeader() || out.hw >= out.leo || p.UnderMinISR():
		*w = hwWatch{}
	case w.since.IsZero() || w.epoch != out.epoch || w.hw != out.hw:
		*w = hwWatch{epoch: out.epoch, hw: out.hw, since: now}
	default:
		w.stalled = now.Sub(w.since) >= hwStallLags*lag
	}
	r.hwStalled.Store(w.stalled)
	out.began, out.ended = !was && w.stalled, was && !w.stalled
	if out.began || out.ended {
		out.isr, out.held = p.ISR(), now.Sub(since)
	}
	return out
}

// checkHW samples r's HW and says when it stalls or moves again.
func (m *Manager) checkHW(r *Replica, now time.Time, lag time.Duration) {
	r.mu.Lock()
	s := r.sampleHWLocked(now, lag)
	r.mu.Unlock()
	switch {
	case s.began:
		m.log.Warn("High watermark stalled below the log end offset: acks=all writes time out and consumers see nothing new",
			"topic", r.tp.Topic, "partition", r.tp.Partition, "leader_epoch", s.epoch, "high_watermark", s.hw,
			"log_end_offset", s.leo, "isr", partition.FormatIDs(s.isr), "unmoved_for", s.held.Round(time.Second))
	case s.ended:
		m.log.Info("High watermark stall over", "topic", r.tp.Topic, "partition", r.tp.Partition,
			"leader_epoch", s.epoch, "high_watermark", s.hw, "isr", partition.FormatIDs(s.isr), "stalled_for", s.held.Round(time.Second))
	}
}
