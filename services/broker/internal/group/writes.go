package group

import (
	"context"
	"time"
)

// A shard's group records (metadata, expiry tombstones, deletions) are
// appended in the order of the changes they record: they are queued under
// c.mu, where the change is made, and one writer per shard appends them
// one at a time. Appended from a goroutine each, an older record of a
// group could land after a newer one, and a reload restored the older
// state: a member that had left, an earlier generation.

// queuedWrite is one batch waiting for the shard's writer; done, when set,
// gets the append's outcome.
type queuedWrite struct {
	batch []byte
	done  chan error
}

// writeLocked queues batch for s's writer and starts the writer if it is
// idle. c.mu held. The returned channel gets the append's outcome (a shard
// unloaded first answers NOT_COORDINATOR).
func (c *Coordinator) writeLocked(s *shard, batch []byte) <-chan error {
	done := make(chan error, 1)
	s.writes = append(s.writes, queuedWrite{batch: batch, done: done})
	if !s.writing {
		s.writing = true
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.writeQueued(s) }()
	}
	return done
}

// writeQueued appends s's queued batches in order until none is left. A
// shard that was unloaded drops what is left: the next leader reloads
// from the log, and its own writes follow.
func (c *Coordinator) writeQueued(s *shard) {
	for {
		c.mu.Lock()
		if len(s.writes) == 0 {
			s.writing = false
			c.mu.Unlock()
			return
		}
		w := s.writes[0]
		s.writes[0] = queuedWrite{}
		s.writes = s.writes[1:]
		current := c.shards[s.partition] == s
		c.mu.Unlock()
		if !current {
			w.done <- errNotCoordinatorOf(c, s)
			continue
		}
		ctx, cancel := context.WithTimeout(c.bg, 30*time.Second)
		_, err := c.host.Append(ctx, TP{OffsetsTopic, s.partition}, s.epoch, w.batch)
		cancel()
		if err != nil {
			c.log.Warn("writing group metadata failed", "partition", s.partition, "err", err)
		}
		w.done <- err
	}
}
