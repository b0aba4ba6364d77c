package logstore

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"tidemark.io/services/broker/internal/lockorder"
)

// UndefinedEpoch and UndefinedEpochOffset are EndOffsetFor's "unknown" answer.
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// EpochEntry says that leader epoch Epoch began at StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// LeaderEpochCache maps leader epochs to the offsets where they began
// (KIP-101). Entries are strictly increasing in epoch and non-decreasing in
// start offset. Every change but TruncateFromStartDeferred's is persisted
// before it is visible; a failed write leaves the cache as it was. Safe for
// concurrent use.
type LeaderEpochCache struct {
	mu      lockorder.RWMutex[lockorder.Leaf]
	entries []EpochEntry
	version uint64 // of entries: one more for each change
	persist func([]EpochEntry) error
	logger  *slog.Logger

	// persistMu orders the writes of the file, taken under mu by a change
	// and alone by Flush; persisted is the version the file holds.
	persistMu sync.Mutex
	persisted uint64
}

// NewLeaderEpochCache starts from entries (which must be ordered). persist,
// if not nil, is called with the new entries on every change.
func NewLeaderEpochCache(entries []EpochEntry, persist func([]EpochEntry) error, logger *slog.Logger) *LeaderEpochCache {
	if logger == nil {
		logger = discardLogger
	}
	return &LeaderEpochCache{entries: slices.Clone(entries), persist: persist, logger: logger}
}

// setLocked persists next and installs it.
func (c *LeaderEpochCache) setLocked(next []EpochEntry) error {
	v := c.version + 1
	if c.persist != nil {
		c.persistMu.Lock()
		err := c.persist(next)
		if err == nil {
			c.persisted = v
		}
		c.persistMu.Unlock()
		if err != nil {
			return err
		}
	}
	c.entries, c.version = next, v
	return nil
}

// Flush persists the entries if a deferred change (TruncateFromStartDeferred)
// has not been written yet. A change persisted meanwhile wrote them already;
// an older state is never written over a newer one.
func (c *LeaderEpochCache) Flush() error {
	c.mu.RLock()
	v, entries := c.version, slices.Clone(c.entries)
	c.mu.RUnlock()
	if c.persist == nil {
		return nil
	}
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	if c.persisted >= v {
		return nil
	}
	if err := c.persist(entries); err != nil {
		return err
	}
	c.persisted = v
	return nil
}

// Assign records that epoch starts at startOffset and reports whether the
// cache changed. A new epoch replaces the trailing entries that start at or
// after startOffset, as Kafka's assign does: those are epochs in which
// nothing was written before it (an empty epoch a broker led and then lost),
// and keeping them would answer EndOffsetFor with an epoch no record has.
// Only a replaced entry that started elsewhere is unexpected (a warning).
// An epoch not above the latest is ignored (with a warning unless it is
// simply the current epoch again): leaders are fenced before they append an
// older epoch, and a follower's log is truncated, which trims the cache from
// the end, before it takes the leader's records. Kafka would let an older
// epoch rewrite the newer entries instead.
func (c *LeaderEpochCache) Assign(epoch int32, startOffset int64) (bool, error) {
	if epoch < 0 || startOffset < 0 {
		return false, fmt.Errorf("invalid leader epoch entry %d %d", epoch, startOffset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := len(c.entries)
	if keep > 0 {
		last := c.entries[keep-1]
		if epoch <= last.Epoch {
			if epoch != last.Epoch || startOffset < last.StartOffset {
				c.logger.Warn("ignoring leader epoch entry not above the latest",
					"epoch", epoch, "start_offset", startOffset, "latest_epoch", last.Epoch, "latest_start_offset", last.StartOffset)
			}
			return false, nil
		}
		for keep > 0 && c.entries[keep-1].StartOffset >= startOffset {
			keep--
		}
		if dropped := c.entries[keep:]; len(dropped) > 1 || (len(dropped) == 1 && dropped[0].StartOffset != startOffset) {
			c.logger.Warn("new leader epoch entry replaces conflicting entries",
				"epoch", epoch, "start_offset", startOffset, "replaced", fmt.Sprint(dropped))
		}
	}
	next := append(slices.Clone(c.entries[:keep]), EpochEntry{epoch, startOffset})
	return true, c.setLocked(next)
}

// EndOffsetFor answers OffsetsForLeaderEpoch for epoch on a log whose end is
// leo, as Kafka's LeaderEpochFileCache.endOffsetFor does: the largest known
// epoch <= epoch, and the start offset of the epoch after it, or leo when it
// is the latest. An epoch older than every entry (retention trimmed the
// cache from the start) is answered with (epoch, start offset of the first
// entry): whatever the asker wrote in that epoch ends where our oldest
// known epoch begins, so it keeps what lies below and the fetch goes on from
// there. It returns (UndefinedEpoch, UndefinedEpochOffset) when epoch is
// undefined, above the latest, or the cache is empty.
func (c *LeaderEpochCache) EndOffsetFor(epoch int32, leo int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if epoch < 0 || n == 0 || epoch > c.entries[n-1].Epoch {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if epoch < c.entries[0].Epoch {
		return epoch, c.entries[0].StartOffset
	}
	// i is the first entry with Epoch > epoch; i >= 1 because entries[0].Epoch <= epoch.
	i, _ := slices.BinarySearchFunc(c.entries, epoch+1, func(e EpochEntry, t int32) int { return cmpInt(e.Epoch, t) })
	if i == n {
		return c.entries[n-1].Epoch, leo
	}
	return c.entries[i-1].Epoch, c.entries[i].StartOffset
}

// EpochFor is the epoch in which offset was written, as Kafka's
// LeaderEpochFileCache.epochForOffset answers it: that of the last entry
// starting at or below offset, or UndefinedEpoch when none does.
func (c *LeaderEpochCache) EpochFor(offset int64) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	// i is the first entry starting after offset.
	i, _ := slices.BinarySearchFunc(c.entries, offset+1, func(e EpochEntry, t int64) int { return cmpInt(e.StartOffset, t) })
	if i == 0 {
		return UndefinedEpoch
	}
	return c.entries[i-1].Epoch
}

// TruncateFromEnd drops every entry starting at or after endOffset, after
// the log was truncated to endOffset.
func (c *LeaderEpochCache) TruncateFromEnd(endOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.entries)
	for i > 0 && c.entries[i-1].StartOffset >= endOffset {
		i--
	}
	if i == len(c.entries) {
		return nil
	}
	return c.setLocked(slices.Clone(c.entries[:i]))
}

// TruncateFromStart drops entries wholly below startOffset, the new log start:
// the last entry starting at or below it is kept, moved to startOffset.
func (c *LeaderEpochCache) TruncateFromStart(startOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if next, ok := c.fromStartLocked(startOffset); ok {
		return c.setLocked(next)
	}
	return nil
}

// TruncateFromStartDeferred is TruncateFromStart without writing the file,
// which the caller does later with Flush (Kafka, since 3.8, flushes this
// change asynchronously too): the file's fsync waits for the device, and
// retention moves the log start holding the partition's lock. Until then
// the file may hold entries below the log start, which loading trims. It
// reports whether the entries changed.
func (c *LeaderEpochCache) TruncateFromStartDeferred(startOffset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, ok := c.fromStartLocked(startOffset)
	if ok {
		c.entries = next
		c.version++
	}
	return ok
}

// fromStartLocked returns the entries with those wholly below startOffset
// dropped, the last one starting at or below it moved to it; ok is false
// when nothing changes.
func (c *LeaderEpochCache) fromStartLocked(startOffset int64) (next []EpochEntry, ok bool) {
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= startOffset {
		i++
	}
	if i == 0 || (i == 1 && c.entries[0].StartOffset == startOffset) {
		return nil, false
	}
	return append([]EpochEntry{{c.entries[i-1].Epoch, startOffset}}, c.entries[i:]...), true
}

// Clear drops every entry.
func (c *LeaderEpochCache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return nil
	}
	return c.setLocked(nil)
}

// Latest returns the newest entry.
func (c *LeaderEpochCache) Latest() (EpochEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// LatestEpoch returns the newest epoch, or UndefinedEpoch.
func (c *LeaderEpochCache) LatestEpoch() int32 {
	if e, ok := c.Latest(); ok {
		return e.Epoch
	}
	return UndefinedEpoch
}

// Entries returns a copy of the entries, oldest first.
func (c *LeaderEpochCache) Entries() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.entries)
}

func cmpInt[T ~int32 | ~int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var discardLogger = slog.New(slog.DiscardHandler)
