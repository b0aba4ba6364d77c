package group

import (
	"context"
	"time"

	"tidemark.io/services/broker/internal/lockorder"
)

// remoteHWRefresh is how often the coordinator asks the leaders of the
// partitions its groups committed, but this broker does not host, for
// their high watermark; remoteHWBudget bounds one round's lookups.
const (
	remoteHWRefresh = 15 * time.Second
	remoteHWBudget  = 2000
	remoteHWTimeout = 2 * time.Second
)

// remoteHWs are the high watermarks, as their leaders last reported them,
// of partitions this broker does not host: tidemark_group_lag then covers
// every partition a group committed, not only the coordinator's own
// replicas. Its lock is a leaf of its own, never held across a call or
// with the coordinator's.
type remoteHWs struct {
	mu lockorder.Mutex[lockorder.Leaf]
	hw map[TP]int64
}

func (r *remoteHWs) get(tp TP) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.hw[tp]
	return v, ok
}

func (r *remoteHWs) replace(hw map[TP]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hw = hw
}

// refreshRemoteHWs runs until the coordinator stops, asking each remote
// partition's leader for its latest offset (the high watermark) every
// remoteHWRefresh.
func (c *Coordinator) refreshRemoteHWs() {
	t := time.NewTicker(remoteHWRefresh)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.refreshRemoteHWsOnce(c.bg)
	}
}

// refreshRemoteHWsOnce looks up the remote partitions of every loaded
// group's committed offsets once; a partition whose leader does not
// answer is left out until the next round.
func (c *Coordinator) refreshRemoteHWsOnce(ctx context.Context) {
	var tps []TP
	seen := map[TP]bool{}
	c.mu.Lock()
	for _, sh := range c.shards {
		if sh.loading {
			continue
		}
		for _, offs := range sh.offsets {
			for tp := range offs {
				if !seen[tp] && len(tps) < remoteHWBudget {
					seen[tp] = true
					tps = append(tps, tp)
				}
			}
		}
	}
	c.mu.Unlock()
	hw := map[TP]int64{}
	for _, tp := range tps {
		if _, local := c.host.LocalOffsets(tp); local {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, remoteHWTimeout)
		off, err := c.host.ListOffsets(lctx, tp, Latest, 0)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			hw[tp] = off
		}
	}
	c.remote.replace(hw)
}
