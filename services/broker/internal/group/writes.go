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
//
// Commits are written in the foreground, not through the queue, so a
// commit of an offset whose tombstone is queued waits until that
// tombstone is appended (tombstoneOf): written first, the commit landed
// before the tombstone, and a reload or the log cleaner took the
// acknowledged commit away.

// queuedWrite is one batch waiting for the shard's writer; done, when set,
// gets the append's outcome.
type queuedWrite struct {
	batch []byte
	done  chan error
	// drops are the offsets the batch writes tombstones for; appended is
	// closed once the writer is done with the batch.
	drops    map[groupTP]bool
	appended chan struct{}
	// then, when set, settles the change the batch records from the
	// append's outcome (writeThenLocked).
	then func(err error)
}

// groupTP names one committed offset of a group.
type groupTP struct {
	group string
	tp    TP
}

// writeLocked queues batch for s's writer and starts the writer if it is
// idle; drops are the offsets it writes tombstones for. c.mu held. The
// returned channel gets the append's outcome (a shard unloaded first
// answers NOT_COORDINATOR).
func (c *Coordinator) writeLocked(s *shard, batch []byte, drops ...groupTP) <-chan error {
	return c.writeThenLocked(s, batch, nil, drops...)
}

// writeThenLocked is writeLocked with then, which the writer runs under
// c.mu with the append's outcome, before anything queued behind the batch
// is appended and before a commit waiting for its tombstones writes: a
// change that stands or falls with its write (DeleteGroups) is settled by
// the write, whoever still waits for it. c.mu held.
func (c *Coordinator) writeThenLocked(s *shard, batch []byte, then func(error), drops ...groupTP) <-chan error {
	done := make(chan error, 1)
	w := queuedWrite{batch: batch, done: done, appended: make(chan struct{}), then: then}
	if len(drops) > 0 {
		w.drops = make(map[groupTP]bool, len(drops))
		for _, d := range drops {
			w.drops[d] = true
		}
	}
	s.writes = append(s.writes, w)
	if !s.writing {
		s.writing = true
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.writeQueued(s) }()
	}
	return done
}

// tombstoneOf returns a channel closed once the last queued tombstone of
// any of tps of group is appended, or nil when none is queued. c.mu held.
func (s *shard) tombstoneOf(group string, tps []TP) <-chan struct{} {
	var last <-chan struct{}
	for _, w := range s.writes {
		for _, tp := range tps {
			if w.drops[groupTP{group, tp}] {
				last = w.appended
				break
			}
		}
	}
	return last
}

// writeQueued appends s's queued batches in order until none is left. A
// batch stays at the head of the queue while it is appended, so a commit
// can wait for it. A shard that was unloaded drops what is left: the next
// leader reloads from the log, and its own writes follow.
func (c *Coordinator) writeQueued(s *shard) {
	for {
		c.mu.Lock()
		if len(s.writes) == 0 {
			s.writing = false
			c.mu.Unlock()
			return
		}
		w := s.writes[0]
		current := c.shards[s.partition] == s
		c.mu.Unlock()
		var err error
		if current {
			ctx, cancel := context.WithTimeout(c.bg, 30*time.Second)
			_, err = c.host.Append(ctx, TP{OffsetsTopic, s.partition}, s.epoch, w.batch)
			cancel()
			if err != nil {
				c.log.Warn("writing group metadata failed", "partition", s.partition, "err", err)
			}
		} else {
			err = errNotCoordinatorOf(c, s)
		}
		c.mu.Lock()
		s.writes[0] = queuedWrite{}
		s.writes = s.writes[1:]
		if w.then != nil {
			w.then(err)
		}
		c.mu.Unlock()
		close(w.appended)
		w.done <- err
	}
}
