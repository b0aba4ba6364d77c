package logstore

// The cleaner's per-log bookkeeping and its checkpoint file.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// cleanerState is the cleaner's persistent bookkeeping for one log, guarded
// by Log.cleanMu: where the dirty section starts and when each cleaned
// segment was cleaned (for delete.retention.ms).
type cleanerState struct {
	loaded     bool
	firstDirty int64
	cleaned    map[int64]cleanedSegment // by segment base
}

// cleanedSegment is what the cleaner remembers of a segment it wrote.
type cleanedSegment struct {
	at         int64 // unix ms of the cleaning (delete.retention.ms counts from it)
	tombstones int64 // tombstones it kept
}

// loadCleanerStateLocked reads the cleaner checkpoint once: lines
// "first-dirty <offset> 0" and "<segment base> <cleaned at, unix ms>
// <tombstones kept>". An unreadable one is replaced by a fresh start:
// everything counts as dirty and no segment as cleaned, which only delays
// tombstone removal.
func (l *Log) loadCleanerStateLocked() error {
	if l.cleaner.loaded {
		l.applyTruncationsLocked()
		return nil
	}
	defer l.applyTruncationsLocked()
	fresh := cleanerState{loaded: true, cleaned: map[int64]cleanedSegment{}}
	l.cleaner = fresh
	path := l.dir + "/" + cleanerCheckpoint
	rows, _, err := readCheckpoint(l.fs, path, 3)
	if err != nil {
		l.logger.Warn("cleaner checkpoint unreadable; treating the whole log as dirty", "err", err)
		return nil
	}
	for i, r := range rows {
		v, err1 := strconv.ParseInt(r[1], 10, 64)
		n, err2 := strconv.ParseInt(r[2], 10, 64)
		b, err3 := strconv.ParseInt(r[0], 10, 64)
		switch {
		case err1 != nil || err2 != nil || (err3 != nil && r[0] != firstDirtyKey):
			l.logger.Warn("cleaner checkpoint unreadable; treating the whole log as dirty", "file", path, "line", i+3)
			l.cleaner = fresh
			return nil
		case r[0] == firstDirtyKey:
			l.cleaner.firstDirty = v
		default:
			l.cleaner.cleaned[b] = cleanedSegment{at: v, tombstones: n}
		}
	}
	return nil
}

// saveCleanerStateLocked persists the first dirty offset and what is known
// of the cleaned segments that still exist.
func (l *Log) saveCleanerStateLocked() error {
	// Under mu, with the truncations since the state was read applied: a
	// truncation rewrites the checkpoint too (truncateCleanerCheckpointLocked),
	// and this write must not bring back what it removed.
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applyTruncationsLocked()
	live := map[int64]bool{}
	for _, s := range l.segments() {
		live[s.base] = true
	}
	rows := []string{fmt.Sprintf("%s %d 0", firstDirtyKey, l.cleaner.firstDirty)}
	for _, b := range slices.Sorted(maps.Keys(l.cleaner.cleaned)) {
		if !live[b] {
			delete(l.cleaner.cleaned, b)
			continue
		}
		cs := l.cleaner.cleaned[b]
		rows = append(rows, fmt.Sprintf("%d %d %d", b, cs.at, cs.tombstones))
	}
	return writeCheckpoint(l.fs, l.dir, cleanerCheckpoint, rows)
}

// checkpointCleanedBeforeSwap records, in memory and in the checkpoint,
// that the segment at base is cleaned as cs, before the swap that makes it
// so is committed. After a crash past the commit, loading finds the merged
// segment under base: a checkpoint still giving it the older time of its
// first part would let the next pass drop the tombstones of the newer parts
// at once. If the swap does not happen, restore puts the old entry back in
// memory; the checkpoint keeps the later time until the next save, which
// only delays tombstones.
func (l *Log) checkpointCleanedBeforeSwap(base int64, cs cleanedSegment) (restore func(), err error) {
	prev, had := l.cleaner.cleaned[base]
	restore = func() {
		if had {
			l.cleaner.cleaned[base] = prev
		} else {
			delete(l.cleaner.cleaned, base)
		}
	}
	l.cleaner.cleaned[base] = cs
	if err := l.saveCleanerStateLocked(); err != nil {
		restore()
		return nil, err
	}
	return restore, nil
}

// allowGapsLocked records, before a follower stores the first batch that
// skips offsets (its leader's log was compacted), that this log may have
// gaps: an empty cleaner checkpoint, which loading looks for.
func (l *Log) allowGapsLocked() error {
	if _, err := l.fs.Stat(l.dir + "/" + cleanerCheckpoint); err != nil {
		if err := writeCheckpoint(l.fs, l.dir, cleanerCheckpoint, []string{firstDirtyKey + " 0 0"}); err != nil {
			return err
		}
	}
	l.gapsAllowed.Store(true)
	l.gapsMarked.Store(true)
	return nil
}

// applyTruncationsLocked makes the cleaner state follow truncations: data
// from the truncation point on is new, so it is dirty again, and the segment
// cut there (and any later one) no longer counts as cleaned, which would
// let tombstones appended to it go early. Loading clamps to the LEO too.
func (l *Log) applyTruncationsLocked() {
	t, leo := l.truncatedTo.Swap(math.MaxInt64), l.leo.Load()
	if t == math.MaxInt64 && l.cleaner.firstDirty <= leo {
		return
	}
	to := max(min(t, leo), 0)
	l.cleaner.firstDirty = min(l.cleaner.firstDirty, to)
	segs := l.segments()
	for base := range l.cleaner.cleaned {
		i := slices.IndexFunc(segs, func(s *segment) bool { return s.base == base })
		if i < 0 || i+1 >= len(segs) || segs[i+1].base > to {
			delete(l.cleaner.cleaned, base)
		}
	}
}

// truncateCleanerCheckpointLocked (mu held) makes the cleaner checkpoint on
// disk follow a truncation to leo at once, as applyTruncationsLocked does in
// memory: the first dirty offset is lowered to leo, and the cut (now active)
// segment no longer counts as cleaned. Otherwise a restart before the next
// pass over this log forgets the truncation.
func (l *Log) truncateCleanerCheckpointLocked(leo int64) error {
	path := l.dir + "/" + cleanerCheckpoint
	rows, found, err := readCheckpoint(l.fs, path, 3)
	if !found {
		return nil
	}
	if err != nil {
		// Unreadable: loading treats the whole log as dirty anyway.
		return nil
	}
	active := l.active().base
	out := make([]string, 0, len(rows))
	changed := false
	for _, r := range rows {
		v, err := strconv.ParseInt(r[1], 10, 64)
		if err != nil {
			return nil
		}
		if r[0] == firstDirtyKey {
			if v > leo {
				v, changed = leo, true
			}
			out = append(out, fmt.Sprintf("%s %d %s", firstDirtyKey, v, r[2]))
			continue
		}
		if b, err := strconv.ParseInt(r[0], 10, 64); err == nil && b >= active {
			changed = true
			continue
		}
		out = append(out, strings.Join(r, " "))
	}
	if !changed {
		return nil
	}
	return writeCheckpoint(l.fs, l.dir, cleanerCheckpoint, out)
}
