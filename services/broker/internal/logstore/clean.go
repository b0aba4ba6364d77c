package logstore

import (
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"tidemark.io/services/recordbatch"
)

// Compaction (the log cleaner) for logs with cleanup.policy=compact. See
// DESIGN.md, "Storage: the partition log", Compaction.
//
// A pass keeps the latest record of every key: it maps key -> last offset
// over the dirty section (from the first dirty offset up to the first
// uncleanable one, or where the bounded map fills), then rewrites every
// sealed segment below the map's end, group by group, into "<base>.log.cleaned"
// with its indexes, and swaps the group in:
//
//	1. write and fsync <base>.{log,index,timeindex}.cleaned; have the owner
//	   checkpoint the recovery points (loading trusts gaps only below it);
//	   write the cleaner checkpoint with the group's cleaning time (a crash
//	   after the commit must not leave the merged segment an older one)
//	2. rename the indexes to .swap, sync the directory, rename the log to
//	   .swap, sync the directory: the swap is now committed
//	3. delete the group's old segments, sync the directory
//	4. rename the .swap files to their final names, sync the directory
//
// Loading completes a committed swap (a "<base>.log.swap" exists: every
// segment in [base, end of the swap file) is deleted and the swap renamed
// into place) and discards an uncommitted one (.cleaned files, index .swap
// files without a log .swap). Offsets never change; the last batch of a
// group is always kept (emptied if need be), so the cleaned segment ends
// where the group did and recovery knows what a swap replaces.
// cleanswap.go has the swap and its recovery, cleanstate.go the cleaner's
// checkpoint.

const (
	cleanedSuffix      = ".cleaned"
	swapSuffix         = ".swap"
	cleanerCheckpoint  = "cleaner-offset-checkpoint"
	firstDirtyKey      = "first-dirty"
	offsetMapEntrySize = 24 // Kafka's accounting: a 16-byte key hash and an 8-byte offset
)

// ErrCleanAborted is returned by Clean when the log changed under the pass
// (truncation, retention, close); groups of segments swapped in before it
// stay, and the result counts only what they removed.
var ErrCleanAborted = errors.New("cleaning aborted: the log changed under it")

// CleanOptions bound one cleaning pass.
type CleanOptions struct {
	// UpperBound is the first offset that may not be cleaned: the high
	// watermark (tidemark has no transactions, so it is the last stable
	// offset too).
	UpperBound int64
	// MapBytes is log.cleaner.dedupe.buffer.size: the key map holds at most
	// MapBytes/24 keys.
	MapBytes int64
	// Stop, when closed, ends the pass at its next read (ErrCleanAborted),
	// so a broker shutting down does not wait for a whole pass.
	Stop <-chan struct{}
	// Swapped, if set, is called after each group of segments is swapped
	// in, with what that group removed and wrote: a pass can take seconds
	// (it syncs every group), and counters that moved only at its end
	// would lag the log they describe.
	Swapped func(group CleanResult)
	// Truncations, if set, is the log's TruncationMark taken before
	// UpperBound was read. A truncation since then may have cut below
	// UpperBound and put records not yet committed there, which the pass
	// must not clean over: it is abandoned (ErrCleanAborted).
	Truncations TruncationMark
}

// TruncationMark is a log's count of truncations at one moment.
type TruncationMark struct {
	count int64
	set   bool
}

// TruncationMark returns the log's truncation count now. Taken before
// reading the high watermark that bounds a pass (CleanOptions.Truncations),
// it lets the pass see a truncation that raced that read.
func (l *Log) TruncationMark() TruncationMark {
	return TruncationMark{count: l.truncations.Load(), set: true}
}

// CleanResult says what a pass did.
type CleanResult struct {
	// FirstDirty and MapEnd delimit the dirty section this pass deduplicated.
	FirstDirty, MapEnd int64
	DirtyRatio         float64
	BytesRead          int64
	BytesWritten       int64
	SegmentsBefore     int   // segments rewritten
	SegmentsAfter      int   // segments they became
	RecordsRemoved     int64 // by the groups swapped in
	TombstonesRemoved  int64 // by the groups swapped in
	Duration           time.Duration
}

// Cleanability is how much of a log a pass could clean now.
type Cleanability struct {
	FirstDirty     int64
	CleanBytes     int64
	DirtyBytes     int64
	Ratio          float64
	MaxLagExceeded bool // a dirty segment is older than max.compaction.lag.ms
	// TombstonesDue: a cleaned segment kept tombstones whose
	// delete.retention.ms has passed, so a pass would remove them even on
	// an idle log.
	TombstonesDue   bool
	cleanableCount  int        // sealed segments a pass may read
	firstDirtyIndex int        // the first of them holding dirty offsets
	segs            []*segment // the segment list these figures are about
}

// Cleanable reports the log's dirty ratio below upperBound (and the
// recovery point): the bytes of sealed segments wholly below it (and, with min.compaction.lag.ms, old
// enough) that hold offsets at or after the first dirty offset, over all
// such cleanable bytes.
func (l *Log) Cleanable(upperBound int64) (Cleanability, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if err := l.loadCleanerStateLocked(); err != nil {
		return Cleanability{}, err
	}
	if err := l.flushCleanableLocked(upperBound); err != nil {
		return Cleanability{}, err
	}
	return l.cleanabilityLocked(upperBound), nil
}

// flushCleanableLocked (cleanMu held) makes the sealed segments below upper
// durable when the recovery point lags them: only durable data is cleaned.
// A roll flushes the segment it seals, but after an unclean restart the
// recovery point is the checkpointed one, and on a log written no more no
// roll ever moves it: its cleaner would wait for good, and the tombstones
// and superseded values of that replica stay while the others' go.
func (l *Log) flushCleanableLocked(upper int64) error {
	if l.checkWritable() != nil {
		return nil // a failed log is not cleaned (clean says why)
	}
	segs := l.segments()
	end := int64(-1)
	for i := len(segs) - 1; i > 0; i-- {
		if segs[i].base <= upper {
			end = segs[i].base
			break
		}
	}
	if end <= l.recoveryPoint.Load() {
		return nil
	}
	return l.flushUpTo(end)
}

func (l *Log) cleanabilityLocked(upper int64) Cleanability {
	// Only durable data: a cleaned segment is synced, and must not outlive
	// (after a power loss) the newer records that let it drop older ones.
	// Rolled segments are flushed right after the roll, so this costs
	// little.
	upper = min(upper, l.recoveryPoint.Load())
	cfg := l.Config()
	now := l.now()
	segs := l.segments()
	c := Cleanability{FirstDirty: max(l.cleaner.firstDirty, l.logStart.Load())}
	k := 0
	for k < len(segs)-1 && segs[k+1].base <= upper {
		if cfg.MinCompactionLag > 0 && now.Sub(l.segmentTime(segs[k])) < cfg.MinCompactionLag {
			break
		}
		k++
	}
	c.cleanableCount = k
	c.firstDirtyIndex = k
	c.segs = segs
	for i := 0; i < k; i++ {
		size := segs[i].size.Load()
		if segs[i+1].base <= c.FirstDirty {
			c.CleanBytes += size
			if cs, ok := l.cleaner.cleaned[segs[i].base]; ok && cs.tombstones > 0 && now.Sub(time.UnixMilli(cs.at)) >= cfg.DeleteRetention {
				c.TombstonesDue = true
			}
			continue
		}
		if c.firstDirtyIndex == k {
			c.firstDirtyIndex = i
		}
		c.DirtyBytes += size
		if cfg.MaxCompactionLag > 0 && size > 0 && now.Sub(l.segmentTime(segs[i])) > cfg.MaxCompactionLag {
			c.MaxLagExceeded = true
		}
	}
	if total := c.CleanBytes + c.DirtyBytes; total > 0 {
		c.Ratio = float64(c.DirtyBytes) / float64(total)
	}
	return c
}

// NeedsCleaning reports whether a compacted log's dirty ratio reached
// min.cleanable.dirty.ratio (or max.compaction.lag.ms forces it).
func (c Cleanability) NeedsCleaning(cfg Config) bool {
	if c.TombstonesDue {
		return true
	}
	if c.DirtyBytes == 0 {
		return false
	}
	return c.Ratio >= cfg.MinCleanableDirtyRatio || c.MaxLagExceeded
}

type keyHash [16]byte

// offsetMap is the bounded key -> last offset map of one pass.
type offsetMap struct {
	m   map[keyHash]int64
	cap int
}

func hashKey(k []byte) keyHash { return md5.Sum(k) }

// Clean runs one pass over a compacted log whatever its dirty ratio (the
// Manager decides when). It returns ErrCleanAborted when a truncation,
// retention or Close changed the segments it was working on.
func (l *Log) clean(opts CleanOptions) (CleanResult, error) {
	start := l.now()
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return CleanResult{}, err
	}
	// Truncations count from before the bound was read when the caller
	// says when that was: any since then aborts the pass, now or at a swap.
	truncations := l.truncations.Load()
	if opts.Truncations.set && opts.Truncations.count != truncations {
		return CleanResult{}, ErrCleanAborted
	}
	if err := l.loadCleanerStateLocked(); err != nil {
		return CleanResult{}, err
	}
	if err := l.flushCleanableLocked(opts.UpperBound); err != nil {
		return CleanResult{}, err
	}
	l.cleanStop = opts.Stop
	defer func() { l.cleanStop = nil }()
	cfg := l.Config()
	if _, err := l.fs.Stat(l.dir + "/" + cleanerCheckpoint); err != nil {
		// Loading must know this log may have gaps before the first swap,
		// whatever its cleanup.policy by then.
		if err := l.saveCleanerStateLocked(); err != nil {
			return CleanResult{}, err
		}
		l.gapsAllowed.Store(true)
		l.gapsMarked.Store(true)
	}
	c := l.cleanabilityLocked(opts.UpperBound)
	res := CleanResult{FirstDirty: c.FirstDirty, MapEnd: c.FirstDirty, DirtyRatio: c.Ratio}
	if c.DirtyBytes == 0 && !c.TombstonesDue {
		return res, nil
	}
	// The list the figures were computed on: retention may have removed
	// leading segments since, which would shift indexes into a newer list.
	segs := c.segs[:c.cleanableCount]
	om := &offsetMap{m: map[keyHash]int64{}, cap: int(max(opts.MapBytes/offsetMapEntrySize, 1))}
	mapEnd, read, err := l.buildOffsetMap(segs[c.firstDirtyIndex:], c.FirstDirty, om)
	res.BytesRead += read
	if err != nil {
		return res, err
	}
	if mapEnd <= c.FirstDirty && c.DirtyBytes > 0 {
		return res, fmt.Errorf("log.cleaner.dedupe.buffer.size %d holds %d keys: too few for one batch of %s at offset %d",
			opts.MapBytes, om.cap, l.dir, c.FirstDirty)
	}
	res.MapEnd = mapEnd

	// The segments to rewrite: every cleanable one holding offsets below
	// the map's end; their data past mapEnd is kept as it is.
	n := 0
	for n < len(segs) && segs[n].base < mapEnd {
		n++
	}
	pass := &cleanPass{om: om, firstDirty: c.FirstDirty, mapEnd: mapEnd, lastOfProducer: l.lastBatchOfProducers(),
		cfg: cfg, now: l.now(), truncations: truncations}
	for _, group := range groupSegments(segs[:n], cfg.SegmentBytes) {
		var g CleanResult
		out, err := l.cleanGroup(group, pass, &g)
		res.BytesRead += g.BytesRead
		if out {
			res.BytesWritten += g.BytesWritten
			res.RecordsRemoved += g.RecordsRemoved
			res.TombstonesRemoved += g.TombstonesRemoved
			if opts.Swapped != nil {
				opts.Swapped(g)
			}
		}
		if err != nil {
			// Keep what the groups swapped so far taught (their cleaning
			// times); the first dirty offset stays for the next pass.
			if serr := l.saveCleanerStateLocked(); serr != nil {
				l.logger.Warn("could not save the cleaner checkpoint", "err", serr)
			}
			return res, err
		}
		res.SegmentsBefore += len(group)
		if out {
			res.SegmentsAfter++
		} else {
			res.SegmentsAfter += len(group)
		}
	}
	l.cleaner.firstDirty = mapEnd
	if err := l.saveCleanerStateLocked(); err != nil {
		return res, err
	}
	res.Duration = l.now().Sub(start)
	return res, nil
}

func (l *Log) checkWritable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkWritableLocked()
}

// lastBatchOfProducers maps each idempotent producer to the last offset of
// its newest batch: that batch is kept even when cleaning empties it, so the
// producer's last sequence stays in the log (Kafka does the same).
func (l *Log) lastBatchOfProducers() map[int64]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]int64, len(l.producers.producers))
	for pid, e := range l.producers.producers {
		out[pid] = e.lastOffset()
	}
	return out
}

// groupSegments splits segs into runs whose total size fits segment.bytes
// and whose offsets fit a 32-bit relative index, so small cleaned segments
// are merged.
func groupSegments(segs []*segment, limit int64) [][]*segment {
	var groups [][]*segment
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].size.Load()
		for j < len(segs) && size+segs[j].size.Load() <= limit && segs[j].size.Load() > 0 &&
			lastOffsetBound(segs, j)-segs[i].base <= 1<<31-1 {
			size += segs[j].size.Load()
			j++
		}
		groups = append(groups, segs[i:j])
		i = j
	}
	return groups
}

// lastOffsetBound is an upper bound of the offsets in segs[j].
func lastOffsetBound(segs []*segment, j int) int64 {
	if j+1 < len(segs) {
		return segs[j+1].base
	}
	return segs[j].next
}

// segmentLiveLocked reports whether s is still one of the log's segments
// (fileMu held): retention and truncation remove segments under fileMu.
func (l *Log) segmentLiveLocked(s *segment) bool {
	return !l.filesClosed && slices.Contains(l.segments(), s)
}

// forEachBatch calls fn with every whole batch of sealed segment s, reading
// chunks under fileMu (released between chunks, so truncation and retention
// wait for one read at most). It returns the bytes read.
func (l *Log) forEachBatch(s *segment, fn func(b recordbatch.Batch) error) (int64, error) {
	const chunk = 1 << 20
	size := s.size.Load()
	var buf []byte
	var read int64
	need := int64(chunk)
	for pos := int64(0); pos < size; {
		want := min(need, size-pos)
		if int64(cap(buf)) < want {
			buf = make([]byte, want)
		}
		buf = buf[:want]
		select {
		case <-l.cleanStop:
			return read, ErrCleanAborted
		default:
		}
		l.fileMu.RLock()
		if !l.segmentLiveLocked(s) {
			l.fileMu.RUnlock()
			return read, ErrCleanAborted
		}
		got, err := s.log.ReadAt(buf, pos)
		l.fileMu.RUnlock()
		if err != nil && !(errors.Is(err, io.EOF) && got == len(buf)) {
			return read, storageErr(err, "reading %s at %d", s.logPath, pos)
		}
		whole, _ := recordbatch.SplitTorn(buf)
		if len(whole) == 0 {
			n, ok := recordbatch.PeekSize(buf)
			if !ok || n <= want || pos+n > size {
				return read, storageErr(errTorn, "reading %s at %d", s.logPath, pos)
			}
			need = n // one batch larger than the chunk
			continue
		}
		need = chunk
		for b, err := range recordbatch.All(whole) {
			if err != nil {
				return read, storageErr(err, "reading %s at %d", s.logPath, pos)
			}
			if err := fn(b); err != nil {
				return read, err
			}
		}
		pos += int64(len(whole))
		read += int64(len(whole))
	}
	return read, nil
}

var errMapFull = errors.New("offset map full")

// buildOffsetMap maps key -> last offset for the records of segs from
// firstDirty on, stopping before the first batch that might not fit. It
// returns the offset where the map stops (the dirty section's end).
func (l *Log) buildOffsetMap(segs []*segment, firstDirty int64, om *offsetMap) (end int64, read int64, err error) {
	end = firstDirty
	for _, s := range segs {
		n, err := l.forEachBatch(s, func(b recordbatch.Batch) error {
			if b.LastOffset() < firstDirty {
				return nil
			}
			if len(om.m)+int(b.RecordCount()) > om.cap {
				return errMapFull
			}
			for r, err := range b.Records() {
				if err != nil {
					return storageErr(err, "decoding batch at offset %d of %s", b.BaseOffset(), s.logPath)
				}
				if r.Key != nil && r.Offset >= firstDirty {
					om.m[hashKey(r.Key)] = r.Offset
				}
			}
			end = b.NextOffset()
			return nil
		})
		read += n
		if errors.Is(err, errMapFull) {
			return end, read, nil
		}
		if err != nil {
			return end, read, err
		}
		// The section ends at a segment's end, or where the map filled.
		end = max(end, lastOffsetBound(segs, slices.Index(segs, s)))
	}
	return end, read, nil
}

// cleanPass is what every group of one pass is cleaned with.
type cleanPass struct {
	om                 *offsetMap
	firstDirty, mapEnd int64 // the dirty section the map covers
	lastOfProducer     map[int64]int64
	cfg                Config
	now                time.Time
	truncations        int64 // the log's count when the map was built
}

// dropsTombstone reports whether the pass removes a tombstone at offset off
// of a segment whose cleaning state is cs (wasCleaned false: never
// cleaned). Only a tombstone an earlier pass deduplicated goes, once
// delete.retention.ms has passed since: one at or after the first dirty
// offset (left past the map's end of the pass that cleaned its segment) is
// being deduplicated for the first time, as Kafka never drops it then.
func (p *cleanPass) dropsTombstone(off int64, cs cleanedSegment, wasCleaned bool) bool {
	return wasCleaned && off < p.firstDirty && p.now.Sub(time.UnixMilli(cs.at)) >= p.cfg.DeleteRetention
}

// cleanedAt is the cleaning time a rewritten part gives its group: now for
// a part cleaned for the first time or holding records this pass is the
// first to deduplicate (dirty ones), its previous cleaning time otherwise.
func (p *cleanPass) cleanedAt(cs cleanedSegment, wasCleaned, dedupedDirty bool) int64 {
	if !wasCleaned || dedupedDirty {
		return p.now.UnixMilli()
	}
	return cs.at
}

// cleanGroup rewrites one group of segments and swaps the result in. out
// reports whether the swap happened (false: nothing to gain, or the group
// holds no batch).
func (l *Log) cleanGroup(group []*segment, pass *cleanPass, res *CleanResult) (out bool, err error) {
	om, mapEnd, lastOfProducer, cfg := pass.om, pass.mapEnd, pass.lastOfProducer, pass.cfg
	base := group[0].base
	lp, ip, tp := segmentPaths(l.dir, base)
	ns, err := createSegmentFiles(l.files, l.fs, l.dir, base, lp+cleanedSuffix, ip+cleanedSuffix, tp+cleanedSuffix)
	if err != nil {
		return false, err
	}
	discard := func(err error) (bool, error) {
		ns.closeFiles()
		for _, p := range []string{lp, ip, tp} {
			_ = l.fs.Remove(p + cleanedSuffix)
			_ = l.fs.Remove(p + swapSuffix)
		}
		return false, err
	}

	// Pass over the group: find its last batch, then rewrite.
	var lastBatch int64 = -1
	for _, s := range group {
		n, err := l.forEachBatch(s, func(b recordbatch.Batch) error { lastBatch = b.BaseOffset(); return nil })
		res.BytesRead += n
		if err != nil {
			return discard(err)
		}
	}
	if lastBatch < 0 {
		return discard(nil)
	}
	// The cleaned segment's clock for delete.retention.ms: the latest
	// cleaning of its parts (see cleanPass.cleanedAt).
	cleanedAt := int64(math.MinInt64)
	var buf []byte
	var pos, oldSize, keptTombstones int64
	for _, s := range group {
		oldSize += s.size.Load()
		cs, wasCleaned := l.cleaner.cleaned[s.base]
		dedupedDirty := false
		n, err := l.forEachBatch(s, func(b recordbatch.Batch) error {
			if err := b.ValidateStored(); err != nil {
				return storageErr(err, "cleaning %s at offset %d", s.logPath, b.BaseOffset())
			}
			keepEmpty := b.BaseOffset() == lastBatch ||
				(b.HasProducerID() && lastOfProducer[b.ProducerID()] == b.LastOffset())
			var removed, tombs int64
			var err error
			buf, _, err = b.Retain(buf[:0], keepEmpty, func(r recordbatch.Record) bool {
				if r.Offset >= mapEnd {
					return true
				}
				dedupedDirty = dedupedDirty || r.Offset >= pass.firstDirty
				if r.Key == nil {
					// Written before the topic was compacted (a compacted
					// topic refuses them): no later record can supersede it,
					// and Kafka's cleaner drops it too.
					removed++
					return false
				}
				if last, ok := om.m[hashKey(r.Key)]; ok && last > r.Offset {
					removed++
					return false
				}
				if r.Value == nil {
					if pass.dropsTombstone(r.Offset, cs, wasCleaned) {
						tombs++
						return false
					}
					keptTombstones++
				}
				return true
			})
			if err != nil {
				return storageErr(err, "cleaning %s at offset %d", s.logPath, b.BaseOffset())
			}
			res.RecordsRemoved += removed
			res.TombstonesRemoved += tombs
			if len(buf) == 0 {
				return nil
			}
			if _, err := ns.log.WriteAt(buf, pos); err != nil {
				return storageErr(err, "writing %s", ns.logPath)
			}
			ns.indexBatch(recordbatch.Batch(buf), pos, cfg.IndexIntervalBytes)
			pos += int64(len(buf))
			ns.size.Store(pos)
			return nil
		})
		res.BytesRead += n
		if err != nil {
			return discard(err)
		}
		cleanedAt = max(cleanedAt, pass.cleanedAt(cs, wasCleaned, dedupedDirty))
	}
	cleaned := cleanedSegment{at: cleanedAt, tombstones: keptTombstones}
	if len(group) == 1 && pos == oldSize {
		// Nothing removed: the segment is its own cleaned form. It counts
		// as cleaned from now (if it was not already), so the tombstones
		// it holds start their delete.retention.ms.
		l.cleaner.cleaned[base] = cleaned
		return discard(nil)
	}
	if err := ns.seal(); err != nil {
		return discard(err)
	}
	if err := ns.syncLog(); err != nil {
		return discard(err)
	}
	if err := ns.syncIndexes(); err != nil {
		return discard(err)
	}
	if err := ns.closeFiles(); err != nil {
		return discard(storageErr(err, "closing %s", ns.logPath))
	}
	// Loading accepts gaps only below the checkpointed recovery point: make
	// sure it covers this group before the swap can be committed.
	if l.persistRPs != nil {
		if err := l.persistRPs(); err != nil {
			return discard(err)
		}
	}
	// The merged segment's cleaning time must be durable before it exists.
	restore, err := l.checkpointCleanedBeforeSwap(base, cleaned)
	if err != nil {
		return discard(err)
	}
	defer func() {
		if !out {
			restore()
		}
	}()
	// Commit: indexes to .swap, then the log; each step durable before the next.
	for _, p := range []string{ip, tp} {
		if err := l.fs.Rename(p+cleanedSuffix, p+swapSuffix); err != nil {
			return discard(storageErr(err, "renaming %s", p+cleanedSuffix))
		}
	}
	if err := l.syncDir(); err != nil {
		return discard(err)
	}
	// The log's rename commits the swap: swapIn does it under mu, after
	// checking no truncation happened, so that no truncation can come
	// between a commit and its swap (loading would complete the swap and
	// bring truncated records back).
	if err := l.swapIn(group, ns, pos, pass.truncations); err != nil {
		if errors.Is(err, ErrCleanAborted) {
			return discard(err)
		}
		return false, err
	}
	for _, s := range group[1:] {
		delete(l.cleaner.cleaned, s.base)
	}
	res.BytesWritten += pos
	l.stats.cleanedSegments.Add(int64(len(group)))
	return true, nil
}
