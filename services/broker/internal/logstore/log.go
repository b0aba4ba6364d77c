package logstore

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/logstore/vfs"
)

// Options opens one partition log.
type Options struct {
	FS     vfs.FS
	Dir    string // the partition's directory, "<data dir>/<topic>-<partition>"
	Config Config
	// Files is the broker-wide cache of open segment files
	// (log.max.open.files); nil gives the log an unbounded one of its own.
	Files *FileCache
	// Logger receives warnings (recovery truncations, rebuilt indexes); nil is silent.
	Logger *slog.Logger
	// Now is the clock for segment.ms, retention.ms and flush.ms; nil is time.Now.
	Now func() time.Time

	// Recovery inputs, normally supplied by the Manager from its checkpoints.
	//
	// CleanShutdown says the data dir had a clean-shutdown marker: indexes are
	// trusted after a sanity check. Otherwise every segment from the one
	// holding RecoveryPoint on is re-validated.
	CleanShutdown bool
	RecoveryPoint int64
	// LogStartOffset is the checkpointed log start; the first segment's base
	// is used when it is lower.
	LogStartOffset int64
	// RecoveryPointLowered, if set, is called (with the Log's writer lock
	// held) after a truncation lowered the recovery point, so the owner can
	// persist it at once: a stale, higher recovery point would let data
	// written after the truncation skip re-validation after a crash.
	RecoveryPointLowered func() error
	// OnStorageError, if set, is told of every KAFKA_STORAGE_ERROR a public
	// operation returns (its owner may take the directory offline). It is
	// called with the log's locks possibly held: it must not call back.
	OnStorageError func(error)
	// ObserveWrite, if set, is told how long each append's write to the
	// active segment took (a leader's or a follower's), so that an
	// operator sees a stalled disk; it is called with the log's writer
	// lock held and must be quick.
	ObserveWrite func(time.Duration)
	// PersistRecoveryPoints, if set, checkpoints the recovery points now
	// (called with no Log lock held): the cleaner needs the checkpoint to
	// cover a cleaned segment before it commits the swap (see gapOK).
	PersistRecoveryPoints func() error
}

// Log is one partition replica's segmented log. See the package comment for
// the lock rules.
type Log struct {
	fs     vfs.FS
	files  *FileCache
	dir    string
	logger *slog.Logger
	now    func() time.Time
	cfg    atomic.Pointer[Config]

	mu      lockorder.Mutex[lockorder.LogWriter]  // serialises writers; guards the fields below it
	syncMu  lockorder.RWMutex[lockorder.LogSyncs] // flushes and other background file work: R; truncation, swaps, closing: W
	fileMu  lockorder.RWMutex[lockorder.LogFiles] // readers: R; shrinking, deleting, closing files: W
	flushMu lockorder.Mutex[lockorder.LogFlush]   // serialises flushes
	bg      sync.WaitGroup                        // background flushes, snapshot pruning and reservation releases after rolls, writebacks, spares; Add under mu
	// writingBack: a writeback started by an append is running (one at a
	// time per log; see maybeStartWritebackLocked).
	writingBack atomic.Bool
	// spareReady: the spare segment file exists with its blocks reserved
	// (spare.go); spareBusy: a goroutine is making or removing it;
	// spareFailedAt: the base of the active segment during which making
	// one failed (no retry before the next roll; -1: none).
	spareReady    atomic.Bool
	spareBytes    atomic.Int64 // what the spare has reserved; written before spareReady
	spareBusy     atomic.Bool
	spareFailedAt atomic.Int64
	// pruning: a goroutine is deleting old producer snapshots after a roll
	// (pruneInBackgroundLocked); pruneAgain: a roll asked for it since.
	pruning, pruneAgain atomic.Bool

	topicID       atomic.Pointer[string]     // partition.metadata's topic id; nil: none recorded; written under mu
	segs          atomic.Pointer[[]*segment] // ascending base; the last is active
	leo           atomic.Int64
	logStart      atomic.Int64
	recoveryPoint atomic.Int64
	closed        atomic.Bool

	epochs      *LeaderEpochCache
	onRPLowered func() error
	// onStorageError: Options.OnStorageError.
	onStorageError func(error)
	persistRPs     func() error

	// Guarded by mu.
	producers *producerState
	// retirements is closed when the newest retention pass's segments
	// have had their files renamed (retireInBackgroundLocked); nil: none
	// started since the last wait.
	retirements chan struct{}

	cleanMu   sync.Mutex      // one cleaning pass at a time; taken before mu
	cleaner   cleanerState    // guarded by cleanMu
	cleanStop <-chan struct{} // the running pass's CleanOptions.Stop; guarded by cleanMu
	// gapsAllowed: offsets may skip between batches and segments, as the
	// cleaner leaves them. Set for compacted logs and logs holding cleaned
	// data (a cleaner checkpoint exists); otherwise a gap found by recovery
	// is damage and ends the log there.
	gapsAllowed atomic.Bool
	// gapsMarked: the cleaner checkpoint, which tells loading that this
	// log may hold gaps, is on disk. A gap appended without it (a
	// follower copying its cleaned leader) writes it first: loading does
	// not know the topic's config, and cut such a log at its first gap.
	gapsMarked atomic.Bool
	// gapsTrustedTo: while loading, gaps are accepted only at offsets up to
	// this (see gapOK).
	gapsTrustedTo int64
	// flushedOffset: the offset in the flushed-offset checkpoint (-1:
	// none); newestGap: the base of the newest batch a follower appended
	// after a gap (-1: none since loading). A flush that makes such a
	// batch durable writes the checkpoint (flushedoffset.go). flushedOffset
	// is written by flushes (flushMu) and truncations (syncMu exclusive),
	// newestGap by follower appends (mu) once their batches passed.
	flushedOffset atomic.Int64
	newestGap     atomic.Int64
	// truncations counts truncations (under mu): a cleaning pass whose key
	// map saw records a truncation then removed must not swap anything in.
	truncations atomic.Int64
	// truncatedTo is the lowest offset truncated to since the cleaner last
	// looked (math.MaxInt64: none); the cleaner lowers its first dirty
	// offset to it and forgets the cleaning time of segments from there.
	truncatedTo atomic.Int64

	// dirSyncPending: a roll created files (segment, indexes, snapshot)
	// whose directory entries are not yet fsynced; unsyncedSnapshots are
	// the offsets of the snapshots those rolls wrote, every one since the
	// last flush: two rolls may come before the first one's flush, which
	// moves the recovery point past the older snapshot. flushUpTo syncs
	// them and the directory before it moves the recovery point.
	dirSyncPending    atomic.Bool
	unsyncedMu        lockorder.Mutex[lockorder.Leaf]
	unsyncedSnapshots []int64

	observeWrite func(time.Duration) // Options.ObserveWrite; nil: not observed

	filesClosed bool                  // written holding syncMu and fileMu, read holding either
	lastFlush   atomic.Int64          // unix nanoseconds of the last flush
	failed      atomic.Pointer[error] // sticky: after a failed fsync or truncation durability is unknown

	stats struct {
		recoveredTruncations atomic.Int64
		rebuiltIndexes       atomic.Int64
		deletedSegments      atomic.Int64
		rolls                atomic.Int64
		flushes              atomic.Int64
		writebacks           atomic.Int64
		droppedBytes         atomic.Int64
		cleanedSegments      atomic.Int64
		completedSwaps       atomic.Int64
	}
}

// segments returns the current segment list; callers must not modify it.
func (l *Log) segments() []*segment { return *l.segs.Load() }

func (l *Log) active() *segment {
	s := l.segments()
	return s[len(s)-1]
}

// publish installs a new segment list (writer only).
func (l *Log) publish(segs []*segment) { l.segs.Store(&segs) }

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the current configuration.
func (l *Log) Config() Config { return *l.cfg.Load() }

// SetConfig changes the configuration; it applies to the next operation.
func (l *Log) SetConfig(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Compacted() {
		l.gapsAllowed.Store(true)
	}
	l.cfg.Store(&c)
	return nil
}

// LogEndOffset is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// LogStartOffset is the first offset that may be read.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// RecoveryPoint is the offset below which all data is known to be on stable storage.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// Stats is a snapshot of a log's counters and sizes.
type Stats struct {
	// RecoveredTruncations counts the times loading cut the log at a corrupt
	// or torn batch, or dropped segments that did not follow on.
	RecoveredTruncations int64
	// RebuiltIndexes counts indexes rebuilt because they were missing or failed
	// their sanity check.
	RebuiltIndexes  int64
	DeletedSegments int64
	Rolls           int64
	Flushes         int64
	// Writebacks counts writebacks started by appends (WritebackBytes).
	Writebacks int64
	// CacheDroppedBytes counts the follower's bytes dropped from the page
	// cache behind its tail (Config.FollowerCachedBytes).
	CacheDroppedBytes int64
	// CleanedSegments counts segments the cleaner rewrote; CompletedSwaps
	// counts cleaner swaps that loading finished after a crash.
	CleanedSegments int64
	CompletedSwaps  int64
	Segments        int
	SizeBytes       int64
	LogStartOffset  int64
	LogEndOffset    int64
	RecoveryPoint   int64
}

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	st := Stats{
		RecoveredTruncations: l.stats.recoveredTruncations.Load(),
		RebuiltIndexes:       l.stats.rebuiltIndexes.Load(),
		DeletedSegments:      l.stats.deletedSegments.Load(),
		Rolls:                l.stats.rolls.Load(),
		Flushes:              l.stats.flushes.Load(),
		Writebacks:           l.stats.writebacks.Load(),
		CacheDroppedBytes:    l.stats.droppedBytes.Load(),
		CleanedSegments:      l.stats.cleanedSegments.Load(),
		CompletedSwaps:       l.stats.completedSwaps.Load(),
		LogStartOffset:       l.LogStartOffset(),
		LogEndOffset:         l.LogEndOffset(),
		RecoveryPoint:        l.RecoveryPoint(),
	}
	if p := l.segs.Load(); p != nil {
		st.Segments = len(*p)
		for _, s := range *p {
			st.SizeBytes += s.size.Load()
		}
	}
	return st
}

// checkWritableLocked returns why the log cannot take writes, if it cannot.
func (l *Log) checkWritableLocked() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail marks the log unusable for writes after an error that leaves its
// on-disk state uncertain, and returns err.
func (l *Log) fail(err error) error {
	l.failed.CompareAndSwap(nil, &err)
	l.logger.Error("partition log failed; refusing further writes", "err", err)
	return l.note(err)
}
