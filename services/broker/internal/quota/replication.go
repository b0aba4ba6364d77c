package quota

import (
	"time"

	"tidemark.io/services/broker/internal/lockorder"
)

// Replication is one side's replication throttle (Kafka's
// ReplicationQuotaManager, KIP-73): the bytes of throttled replicas copied
// by this broker, as leader or as follower, measured like a client quota.
// Unlike a client quota it delays nothing: while the rate is above the
// limit, the throttled replicas that are behind are left out of fetches.
type Replication struct {
	now func() time.Time

	mu    lockorder.Mutex[lockorder.Leaf]
	r     rate
	limit int64
	cfg   Config
}

// NewReplication returns a throttle with no limit.
func NewReplication(now func() time.Time) *Replication {
	return &Replication{now: now, limit: Unlimited, cfg: Config{Samples: 11, Window: time.Second}}
}

// Set applies the limit (bytes/s; Unlimited for none) and the samples.
func (q *Replication) Set(limit int64, samples int, window time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limit = limit
	if samples != q.cfg.Samples || window != q.cfg.Window {
		q.cfg = Config{Samples: samples, Window: window}
		q.r = rate{}
	}
}

// Exceeded reports whether the measured rate is above the limit.
func (q *Replication) Exceeded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.limit == Unlimited || len(q.r.starts) == 0 {
		return false
	}
	got, _ := q.r.measure(q.now(), q.cfg)
	return got > float64(q.limit)
}

// Record counts n bytes of throttled replicas.
func (q *Replication) Record(n int) {
	if n <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.r.record(q.now(), float64(n), q.cfg)
}

// Rate is the measured rate in bytes/s.
func (q *Replication) Rate() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.r.starts) == 0 {
		return 0
	}
	got, _ := q.r.measure(q.now(), q.cfg)
	return got
}
