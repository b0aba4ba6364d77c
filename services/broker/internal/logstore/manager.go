package logstore

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
)

// ManagerOptions configures the Manager of one data directory.
type ManagerOptions struct {
	FS     vfs.FS // nil is the OS
	Dir    string // the data directory
	Logger *slog.Logger
	Now    func() time.Time
	// ConfigFor returns the configuration of a topic's logs found on disk;
	// nil uses DefaultConfig.
	ConfigFor func(topic string) Config
	// HighWatermark returns a partition's current high watermark, for the
	// replication-offset-checkpoint and for retention. ok=false keeps the
	// last known value and skips retention for the partition.
	HighWatermark func(TopicPartition) (hw int64, ok bool)
	// LogStartMoved, when set, is called after retention raised a log's
	// start offset, with no Manager or Log lock held, so the owner of the
	// partition's replication state can record the new start.
	LogStartMoved func(TopicPartition)

	// Intervals of the background work; zero picks the default shown.
	HighWatermarkCheckpointInterval time.Duration // 5 s
	RecoveryCheckpointInterval      time.Duration // 60 s (recovery points and log starts)
	RetentionCheckInterval          time.Duration // 5 min (log.retention.check.interval.ms: retention, producer expiry)
	FlushCheckInterval              time.Duration // 1 s (flush.ms)
	// The log cleaner of cleanup.policy=compact logs (log.cleaner.*): off
	// unless CleanerEnable. CleanerBackoff (15 s) is the pause when no log
	// needs cleaning; CleanerDedupeBytes (128 MiB) bounds the key map.
	CleanerEnable      bool
	CleanerBackoff     time.Duration
	CleanerDedupeBytes int64
	// Files bounds the segment files held open (log.max.open.files); the
	// broker passes one cache to every data directory's Manager. nil gives
	// this Manager one of its own with DefaultMaxOpenFiles.
	Files *FileCache
	// NoBackground turns the periodic work off; tests call the methods.
	NoBackground bool
	// OnStorageError, if set, is told of every KAFKA_STORAGE_ERROR of this
	// directory: a log operation's or a checkpoint's. It may be called with
	// a log's or the Manager's locks held: it must not call back.
	OnStorageError func(error)
	// ObserveAppendWrite is every log's Options.ObserveWrite.
	// ObserveCheckpoint, if set, is told how long writing a checkpoint file
	// durably took (write, fsync, rename, directory fsync), by file name:
	// the fsync waits behind the segments' writeback queued on the device.
	ObserveAppendWrite func(time.Duration)
	ObserveCheckpoint  func(file string, d time.Duration)
}

// Manager owns the partition logs of one data directory and its per-dir
// files: replication-offset-checkpoint, recovery-point-offset-checkpoint,
// log-start-offset-checkpoint and the clean-shutdown marker. Safe for
// concurrent use.
type Manager struct {
	opts   ManagerOptions
	logger *slog.Logger
	clean  bool

	mu          lockorder.Mutex[lockorder.LogManager]
	logs        map[TopicPartition]*Log
	offline     map[TopicPartition]error
	recoveredHW map[TopicPartition]int64
	// Checkpointed values kept for partitions that are not open (offline
	// ones), so a rewrite does not lose them.
	keptHW, keptRecovery, keptStart map[TopicPartition]int64
	// Partitions the checkpoint files on disk may still name though their
	// log is gone (deleted, or its directory missing at open): hwStale for
	// the HW file, rpStale for the recovery-point and log-start files. A
	// log created again under that name must not take the old log's
	// entries after a crash, so creation rewrites the files first
	// (dropStaleCheckpoints) unless a write since has dropped them. The
	// value is staleGen at the deletion: a write that began before a later
	// deletion of the same partition does not clear it.
	hwStale, rpStale map[TopicPartition]uint64
	staleGen         uint64
	// lastHW is the latest HW of each open log: the one last checkpointed
	// from the HighWatermark getter, or handed over by KeepHighWatermark
	// when the getter stopped knowing the partition.
	lastHW map[TopicPartition]int64
	// handovers counts KeepHighWatermark calls; handedAt is the count at
	// each partition's last one. A checkpoint that read the getter before
	// a handover does not overwrite the HW handed over with what it read.
	handovers uint64
	handedAt  map[TopicPartition]uint64
	closed    bool
	abandoned bool // closed by Abandon, not Close
	// busy holds the partitions whose logs GetOrCreate is opening or
	// Delete is closing and renaming, outside mu (both sync directories);
	// the other callers for that partition, Close and Abandon wait for the
	// channel to close, so no file of the data dir is written after they
	// return and a deletion never races a re-creation of its directory.
	busy map[TopicPartition]chan struct{}
	// removing counts the renamed directories of deleted partitions whose
	// files are still being removed in the background (removeInBackground);
	// Close and Abandon wait for them.
	removing sync.WaitGroup

	// hwMu and rpMu serialise the writes of the HW checkpoint and of the
	// recovery-point and log-start checkpoints. They are separate because a
	// Log's truncation hook takes rpMu while the caller may hold its own
	// partition lock, and the HW getter (which may take that lock) runs
	// before hwMu is taken, never under a Manager lock.
	hwMu, rpMu  lockorder.Mutex[lockorder.LogCheckpoint]
	stop        chan struct{}
	done        chan struct{}
	cleanerDone chan struct{} // closed when the cleaner goroutine ends; nil when none runs
	cleaner     cleanerStats
}

// OpenManager opens every partition log in opts.Dir. A partition that cannot
// be opened is reported by Offline and left alone; a corrupt
// replication-offset or log-start checkpoint fails the whole directory, a
// corrupt recovery-point checkpoint only forces full recovery.
func OpenManager(opts ManagerOptions) (*Manager, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS
	}
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ConfigFor == nil {
		opts.ConfigFor = func(string) Config { return DefaultConfig() }
	}
	if opts.Files == nil {
		opts.Files = NewFileCache(DefaultMaxOpenFiles)
	}
	opts.Dir = strings.TrimSuffix(opts.Dir, "/")
	m := &Manager{
		opts: opts, logger: opts.Logger.With("data_dir", opts.Dir),
		logs: map[TopicPartition]*Log{}, offline: map[TopicPartition]error{}, recoveredHW: map[TopicPartition]int64{},
		lastHW: map[TopicPartition]int64{}, handedAt: map[TopicPartition]uint64{}, busy: map[TopicPartition]chan struct{}{},
		hwStale: map[TopicPartition]uint64{}, rpStale: map[TopicPartition]uint64{},
	}
	fsys, dir := opts.FS, opts.Dir
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return nil, storageErr(err, "creating data directory %s", dir)
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, storageErr(err, "listing data directory %s", dir)
	}
	_, err = fsys.Stat(dir + "/" + cleanShutdownMarkerFile)
	m.clean = err == nil
	recovery, err := ReadOffsetCheckpoint(fsys, dir, recoveryCheckpointFile)
	if err != nil {
		m.logger.Warn("recovery point checkpoint unreadable; recovering every log in full", "err", err)
		recovery, m.clean = map[TopicPartition]int64{}, false
	}
	starts, err := ReadOffsetCheckpoint(fsys, dir, logStartCheckpointFile)
	if err != nil {
		return nil, storageErr(err, "loading data directory %s", dir)
	}
	hws, err := ReadOffsetCheckpoint(fsys, dir, hwCheckpointFile)
	if err != nil {
		return nil, storageErr(err, "loading data directory %s", dir)
	}
	// From here on a crash must count as unclean.
	if m.clean {
		if err := fsys.Remove(dir + "/" + cleanShutdownMarkerFile); err != nil {
			return nil, storageErr(err, "removing %s/%s", dir, cleanShutdownMarkerFile)
		}
		if err := fsys.SyncDir(dir); err != nil {
			return nil, storageErr(err, "syncing %s", dir)
		}
	}
	m.keptHW, m.keptRecovery, m.keptStart = hws, recovery, starts

	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() {
			continue
		}
		if strings.HasSuffix(name, deletingSuffix) {
			m.removeInBackground(dir+"/"+name, nil)
			continue
		}
		tp, err := ParseTopicPartition(name)
		if err != nil {
			m.logger.Warn("ignoring directory that is not a partition", "dir", name, "err", err)
			continue
		}
		l, err := Open(Options{
			FS: fsys, Files: opts.Files, Dir: dir + "/" + name, Config: opts.ConfigFor(tp.Topic),
			Logger: opts.Logger.With("partition", tp.String()), Now: opts.Now,
			CleanShutdown: m.clean, RecoveryPoint: recovery[tp], LogStartOffset: starts[tp],
			RecoveryPointLowered: m.persistRecoveryPoints, PersistRecoveryPoints: m.CheckpointRecoveryPoints,
			OnStorageError: opts.OnStorageError, ObserveWrite: opts.ObserveAppendWrite,
		})
		if err != nil {
			m.logger.Error("partition offline: its log cannot be opened", "partition", tp.String(), "err", err)
			m.offline[tp] = err
			continue
		}
		m.logs[tp] = l
		m.recoveredHW[tp] = min(max(hws[tp], l.LogStartOffset()), l.LogEndOffset())
	}
	// Entries of partitions with no directory belong to deleted logs (a
	// crash before the checkpoints were rewritten): they are not carried
	// over, and a log created under that name will not take them.
	for _, f := range []struct {
		kept  map[TopicPartition]int64
		stale map[TopicPartition]uint64
	}{{hws, m.hwStale}, {recovery, m.rpStale}, {starts, m.rpStale}} {
		for tp := range f.kept {
			_, open := m.logs[tp]
			if _, off := m.offline[tp]; !open && !off {
				delete(f.kept, tp)
				f.stale[tp] = 0
			}
		}
	}
	if err := m.checkpointLoweredRecoveryPoints(recovery); err != nil {
		closeLogs(m.logs)
		return nil, err
	}
	if !opts.NoBackground {
		m.stop, m.done = make(chan struct{}), make(chan struct{})
		go m.background()
		if opts.CleanerEnable {
			m.cleanerDone = make(chan struct{})
			go m.cleanerLoop()
		}
	}
	return m, nil
}

// checkpointLoweredRecoveryPoints writes the recovery points (synced)
// before any log is served when loading lowered one below its checkpoint:
// a crash mid-truncation, after the cut and before the checkpoint's
// rewrite. Left to the next periodic write, a second power loss in between
// would have the stale point trust the segments below it, written after
// the cut and perhaps never synced, with only a sanity check.
func (m *Manager) checkpointLoweredRecoveryPoints(checkpointed map[TopicPartition]int64) error {
	lowered := false
	for tp, l := range m.logs {
		if rp, ok := checkpointed[tp]; ok && l.RecoveryPoint() < rp {
			m.logger.Warn("loading lowered the recovery point; checkpointing it before serving the log",
				"partition", tp.String(), "checkpointed", rp, "recovery_point", l.RecoveryPoint())
			lowered = true
		}
	}
	if !lowered {
		return nil
	}
	if err := m.CheckpointRecoveryPoints(); err != nil {
		return storageErr(err, "checkpointing the recovery points lowered at loading")
	}
	return nil
}

// HadCleanShutdown reports whether the directory was shut down cleanly last time.
func (m *Manager) HadCleanShutdown() bool { return m.clean }

// Log returns an open partition log.
func (m *Manager) Log(tp TopicPartition) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[tp]
	return l, ok
}

// Len is how many partitions are open: what placing a new one weighs,
// without Partitions' sorted copy (per creation, that copy made creating
// thousands of partitions quadratic).
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.logs)
}

// Partitions lists the open partitions, sorted.
func (m *Manager) Partitions() []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.SortedFunc(maps.Keys(m.logs), func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmpInt(a.Partition, b.Partition)
	})
}

// Offline returns the partitions whose logs could not be opened, and why.
func (m *Manager) Offline() map[TopicPartition]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.offline)
}

// RecoveredHighWatermark is the checkpointed high watermark found at open,
// clamped to [log start, LEO] of the recovered log; 0 clamped when none was
// checkpointed. ok is false for partitions not opened at startup.
func (m *Manager) RecoveredHighWatermark(tp TopicPartition) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	hw, ok := m.recoveredHW[tp]
	return hw, ok
}

// KeepHighWatermark hands over an open log's HW when the HighWatermark
// getter stops knowing the partition (a replica stopped without deletion
// keeps its log): the checkpoints go on writing it, and a replica made for
// the log again starts from it (LatestHighWatermark). Without it a HW that
// moved since the last checkpoint would be lost.
func (m *Manager) KeepHighWatermark(tp TopicPartition, hw int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.logs[tp]; ok {
		m.lastHW[tp] = hw
		m.handovers++
		m.handedAt[tp] = m.handovers
	}
}

// LatestHighWatermark is the latest HW the manager holds for an open log:
// kept or last checkpointed, else the one recovered at open.
func (m *Manager) LatestHighWatermark(tp TopicPartition) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if hw, ok := m.lastHW[tp]; ok {
		return hw, true
	}
	hw, ok := m.recoveredHW[tp]
	return hw, ok
}

// GetOrCreate returns the partition's log, creating it (empty) if absent.
// The creation's directory syncs run without the manager's lock, so other
// partitions' lookups and creations do not wait for this one's disk.
func (m *Manager) GetOrCreate(tp TopicPartition, cfg Config) (*Log, error) {
	if err := tp.Validate(); err != nil {
		return nil, err
	}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		if l, ok := m.logs[tp]; ok {
			m.mu.Unlock()
			return l, nil
		}
		if err, ok := m.offline[tp]; ok {
			m.mu.Unlock()
			return nil, fmt.Errorf("partition %s is offline: %w", tp, err)
		}
		if wait, ok := m.busy[tp]; ok {
			m.mu.Unlock()
			<-wait
			continue
		}
		done := make(chan struct{})
		m.busy[tp] = done
		m.mu.Unlock()

		l, err := m.create(tp, cfg)
		m.mu.Lock()
		// Close or Abandon began meanwhile; it waits for us but does not
		// know this log, so we close it (as they would) before letting
		// them go on. Without mu: a log's locks come before the Manager's.
		orphan, abandoned := err == nil && m.closed, m.abandoned
		if err == nil && !orphan {
			m.logs[tp] = l
		}
		if orphan {
			m.mu.Unlock()
			if abandoned {
				l.Abandon()
			} else {
				_ = l.Close()
			}
			m.mu.Lock()
		}
		delete(m.busy, tp)
		close(done)
		m.mu.Unlock()
		if orphan {
			return nil, ErrClosed
		}
		return l, err
	}
}

// note passes a storage error of this directory to its owner.
func (m *Manager) note(err error) error {
	if err != nil && m.opts.OnStorageError != nil && kerr.CodeOf(err) == kerr.KafkaStorageError {
		m.opts.OnStorageError(err)
	}
	return err
}

// create opens a new partition log and makes its directory durable.
func (m *Manager) create(tp TopicPartition, cfg Config) (*Log, error) {
	if err := m.dropStaleCheckpoints(tp); err != nil {
		return nil, m.note(err)
	}
	l, err := Open(Options{
		FS: m.opts.FS, Files: m.opts.Files, Dir: m.opts.Dir + "/" + tp.String(), Config: cfg,
		Logger: m.opts.Logger.With("partition", tp.String()), Now: m.opts.Now,
		RecoveryPointLowered: m.persistRecoveryPoints, PersistRecoveryPoints: m.CheckpointRecoveryPoints,
		OnStorageError: m.opts.OnStorageError, ObserveWrite: m.opts.ObserveAppendWrite,
	})
	if err != nil {
		return nil, m.note(err)
	}
	if err := m.opts.FS.SyncDir(m.opts.Dir); err != nil {
		l.Close()
		return nil, m.note(storageErr(err, "syncing %s", m.opts.Dir))
	}
	return l, nil
}

// waitIdleLocked returns with mu held once no creation or deletion of tp
// is in flight.
func (m *Manager) waitIdleLocked(tp TopicPartition) {
	for {
		wait, ok := m.busy[tp]
		if !ok {
			return
		}
		m.mu.Unlock()
		<-wait
		m.mu.Lock()
	}
}

// Delete closes the partition's log and deletes its directory: renamed
// (durably) before it returns, so a crash part-way leaves a directory the
// next open finishes deleting rather than a damaged log, and removed in the
// background (removeInBackground). After Close or Abandon it returns
// ErrClosed and touches nothing.
func (m *Manager) Delete(tp TopicPartition) error {
	m.mu.Lock()
	m.waitIdleLocked(tp)
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	done := make(chan struct{})
	m.busy[tp] = done
	defer func() {
		m.mu.Lock()
		delete(m.busy, tp)
		close(done)
		m.mu.Unlock()
	}()
	l, ok := m.logs[tp]
	delete(m.logs, tp)
	delete(m.offline, tp)
	delete(m.recoveredHW, tp)
	delete(m.keptHW, tp)
	delete(m.keptRecovery, tp)
	delete(m.keptStart, tp)
	delete(m.lastHW, tp)
	delete(m.handedAt, tp)
	m.staleGen++
	m.hwStale[tp], m.rpStale[tp] = m.staleGen, m.staleGen
	m.mu.Unlock()
	if ok {
		// The files go with the directory, so the log is abandoned, not
		// closed: nothing is flushed (an fsync of data about to be
		// deleted), and its background work (retired segments' renames
		// and unlinks, which wait for the device) is stopped where it
		// would write to the directory rather than waited for; the
		// removal below waits for the rest, as Close and Abandon wait for
		// the removal.
		l.Abandon()
	}
	fsys, dir := m.opts.FS, m.opts.Dir+"/"+tp.String()
	if _, err := fsys.Stat(dir); vfs.IsNotExist(err) {
		return nil
	}
	doomed := fmt.Sprintf("%s.%d%s", dir, m.opts.Now().UnixNano(), deletingSuffix)
	if err := fsys.Rename(dir, doomed); err != nil {
		return storageErr(err, "renaming %s for deletion", dir)
	}
	if err := fsys.SyncDir(m.opts.Dir); err != nil {
		return storageErr(err, "syncing %s", m.opts.Dir)
	}
	m.removeInBackground(doomed, l)
	return nil
}

// removeInBackground removes a deleted partition's renamed directory in a
// goroutine, as Kafka deletes its "-delete" directories: freeing a
// partition's blocks can take seconds (a file system mounted with discard
// trims them first), and the controller's next requests to this broker
// wait behind the StopReplica that deletes it. A directory left by a crash
// or a failure is removed when the data dir is next opened. The goroutine
// also waits for what is left of the deleted log's background work (l, if
// not nil), so that nothing of it outlives the Manager's Close.
func (m *Manager) removeInBackground(doomed string, l *Log) {
	m.removing.Add(1)
	go func() {
		defer m.removing.Done()
		if err := m.opts.FS.RemoveAll(doomed); err != nil {
			m.logger.Warn("could not finish deleting a partition; the next start deletes it", "dir", doomed, "err", err)
		}
		if l != nil {
			l.bg.Wait()
		}
	}()
}

// dropStaleCheckpoints rewrites, before a log named tp is created, the
// checkpoint files that may still hold a deleted tp log's entries. Opened
// after a crash with them, the new log took the old log start (its
// acknowledged records below it were gone for readers, and retention
// deleted them), the old recovery point (unsynced data trusted) and the
// old HW (records not yet committed served as committed). Kafka rewrites
// the recovery-point and log-start files when it deletes a log; here the
// rewrite waits for a creation that needs it, which a periodic write
// usually makes unnecessary, so deleting many partitions costs no fsyncs.
func (m *Manager) dropStaleCheckpoints(tp TopicPartition) error {
	m.mu.Lock()
	_, hw := m.hwStale[tp]
	_, rp := m.rpStale[tp]
	m.mu.Unlock()
	var errs []error
	if hw {
		// Without the getter, which may take a partition lock the caller
		// holds: the other logs' last written (or kept) HWs.
		errs = append(errs, m.checkpointHighWatermarksAsked(false))
	}
	if rp {
		errs = append(errs, m.CheckpointRecoveryPoints())
	}
	return errors.Join(errs...)
}

// clearStale forgets the stale entries a checkpoint write covered: pending
// is the stale set as it was when the written offsets were taken, which
// named no deleted log (mu held).
func clearStale(stale, pending map[TopicPartition]uint64) {
	for tp, gen := range pending {
		if stale[tp] == gen {
			delete(stale, tp)
		}
	}
}

// CheckpointHighWatermarks writes replication-offset-checkpoint from the
// HighWatermark getter. The Manager does so at Close and every 5 s whether
// or not a high watermark moved, as Kafka does: on an idle dir it is the
// write that finds a failed disk (one turned read-only, one whose writes
// fail) within seconds, before the controller keeps the broker as a leader
// or ISR member that a first write would find dead.
func (m *Manager) CheckpointHighWatermarks() error { return m.checkpointHighWatermarksAsked(true) }

// checkpointHighWatermarksAsked is CheckpointHighWatermarks; without ask
// it does not call the getter and writes each log's last known HW.
func (m *Manager) checkpointHighWatermarksAsked(ask bool) error {
	// The getter is the caller's code: call it without any Manager lock.
	m.mu.Lock()
	since := m.handovers
	m.mu.Unlock()
	fresh := map[TopicPartition]int64{}
	asked := map[TopicPartition]*Log{}
	if m.opts.HighWatermark != nil && ask {
		for tp, l := range m.openLogs() {
			if hw, ok := m.opts.HighWatermark(tp); ok {
				fresh[tp], asked[tp] = hw, l
			}
		}
	}
	m.hwMu.Lock()
	defer m.hwMu.Unlock()
	m.mu.Lock()
	if m.abandoned {
		m.mu.Unlock()
		return ErrClosed
	}
	out, pending := maps.Clone(m.keptHW), maps.Clone(m.hwStale)
	for tp, l := range m.logs {
		hw, ok := fresh[tp]
		if ok && (m.handedAt[tp] > since || asked[tp] != l) {
			// Handed over after the getter was read (the replica was
			// stopped meanwhile), or the log asked about was deleted
			// and created again meanwhile: what was read is older, or
			// the deleted log's.
			ok = false
		}
		if !ok {
			if hw, ok = m.lastHW[tp]; !ok {
				hw, ok = m.recoveredHW[tp]
			}
		}
		if ok {
			out[tp] = hw
			m.lastHW[tp] = hw
		}
	}
	m.mu.Unlock()
	if err := m.writeCheckpoint(hwCheckpointFile, out); err != nil {
		return err
	}
	m.mu.Lock()
	clearStale(m.hwStale, pending)
	m.mu.Unlock()
	return nil
}

// writeCheckpoint writes one of the directory's offset checkpoints and
// reports how long it took.
func (m *Manager) writeCheckpoint(name string, offsets map[TopicPartition]int64) error {
	began := time.Now()
	err := WriteOffsetCheckpoint(m.opts.FS, m.opts.Dir, name, offsets)
	if m.opts.ObserveCheckpoint != nil {
		m.opts.ObserveCheckpoint(name, time.Since(began))
	}
	return err
}

// CheckpointRecoveryPoints writes recovery-point-offset-checkpoint and
// log-start-offset-checkpoint from the open logs (every minute whether or
// not they moved, as Kafka does, at Close and after a truncation).
func (m *Manager) CheckpointRecoveryPoints() error {
	m.rpMu.Lock()
	defer m.rpMu.Unlock()
	m.mu.Lock()
	if m.abandoned { // a crashed broker writes nothing more
		m.mu.Unlock()
		return ErrClosed
	}
	rps, starts, pending := maps.Clone(m.keptRecovery), maps.Clone(m.keptStart), maps.Clone(m.rpStale)
	for tp, l := range m.logs {
		rps[tp], starts[tp] = l.RecoveryPoint(), l.LogStartOffset()
	}
	m.mu.Unlock()
	if err := errors.Join(
		m.writeCheckpoint(recoveryCheckpointFile, rps),
		m.writeCheckpoint(logStartCheckpointFile, starts),
	); err != nil {
		return err
	}
	m.mu.Lock()
	clearStale(m.rpStale, pending)
	m.mu.Unlock()
	return nil
}

// persistRecoveryPoints is each Log's RecoveryPointLowered hook.
func (m *Manager) persistRecoveryPoints() error {
	if err := m.CheckpointRecoveryPoints(); err != nil {
		return storageErr(err, "checkpointing recovery points after a truncation")
	}
	return nil
}

// Close stops the background work, closes every log (flushing it), writes
// the checkpoints and, if all of that succeeded and no partition is offline,
// the clean-shutdown marker.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.waitAllIdleLocked()
	logs := maps.Clone(m.logs)
	offline := len(m.offline)
	m.mu.Unlock()
	m.removing.Wait()
	if m.stop != nil {
		close(m.stop)
		<-m.done
		if m.cleanerDone != nil {
			<-m.cleanerDone
		}
	}
	errs := closeLogs(logs)
	errs = append(errs, m.CheckpointHighWatermarks(), m.CheckpointRecoveryPoints())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if offline > 0 {
		m.logger.Warn("not marking a clean shutdown: some partitions are offline", "offline", offline)
		return nil
	}
	if err := vfs.WriteFileAtomic(m.opts.FS, m.opts.Dir, cleanShutdownMarkerFile, nil); err != nil {
		return storageErr(err, "writing %s/%s", m.opts.Dir, cleanShutdownMarkerFile)
	}
	return nil
}

// waitAllIdleLocked returns with mu held once no creation or deletion is
// in flight (with closed set, none starts).
func (m *Manager) waitAllIdleLocked() {
	for len(m.busy) > 0 {
		for tp := range m.busy {
			m.waitIdleLocked(tp)
			break
		}
	}
}

// closeParallelism is how many logs Close closes at once. Each close
// waits on fsyncs (the log's tail, both indexes, a producer snapshot) that
// take milliseconds and barely use the CPU; one after another, a broker
// with 2,000 partitions took 16 s to shut down (BenchmarkManagerCloseManyLogs).
const closeParallelism = 16

// closeLogs closes every log, closeParallelism at a time, and returns
// their errors.
func closeLogs(logs map[TopicPartition]*Log) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	slots := make(chan struct{}, closeParallelism)
	for tp, l := range logs {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := l.Close(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("closing %s: %w", tp, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

func (m *Manager) openLogs() map[TopicPartition]*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.logs)
}

// RunRetention applies retention and producer expiry to every log whose
// high watermark is known.
func (m *Manager) RunRetention() {
	for tp, l := range m.openLogs() {
		if m.opts.HighWatermark == nil {
			break
		}
		hw, ok := m.opts.HighWatermark(tp)
		if !ok {
			continue
		}
		before := l.LogStartOffset()
		n, err := l.DeleteOldSegments(hw)
		if err != nil {
			m.logger.Warn("retention failed", "partition", tp.String(), "err", err)
		} else if n > 0 {
			m.logger.Info("deleted old segments", "partition", tp.String(), "segments", n,
				"log_start_offset_before", before, "log_start_offset", l.LogStartOffset(), "high_watermark", hw)
		}
		// Even a failed deletion may have removed some segments first.
		if l.LogStartOffset() != before && m.opts.LogStartMoved != nil {
			m.opts.LogStartMoved(tp)
		}
		l.ExpireProducers()
	}
}

// FlushDue applies flush.ms to every log.
func (m *Manager) FlushDue() {
	for tp, l := range m.openLogs() {
		if err := l.FlushIfDue(); err != nil && !errors.Is(err, ErrClosed) {
			m.logger.Warn("scheduled flush failed", "partition", tp.String(), "err", err)
		}
	}
}

func (m *Manager) background() {
	defer close(m.done)
	every := func(d, def time.Duration) *time.Ticker {
		if d <= 0 {
			d = def
		}
		return time.NewTicker(d)
	}
	hw := every(m.opts.HighWatermarkCheckpointInterval, 5*time.Second)
	rp := every(m.opts.RecoveryCheckpointInterval, time.Minute)
	ret := every(m.opts.RetentionCheckInterval, 5*time.Minute)
	fl := every(m.opts.FlushCheckInterval, time.Second)
	defer hw.Stop()
	defer rp.Stop()
	defer ret.Stop()
	defer fl.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-hw.C:
			// Written whether or not anything moved, as Kafka does: on an
			// idle dir this is the only I/O, and a dead disk must show up
			// within seconds, not at the next write a leader election or a
			// produce happens to make there (one small file and two fsyncs
			// per dir and interval, Kafka's cost too).
			if err := m.CheckpointHighWatermarks(); err != nil {
				m.logger.Warn("high watermark checkpoint failed", "err", m.note(err))
			}
		case <-rp.C:
			if err := m.CheckpointRecoveryPoints(); err != nil {
				m.logger.Warn("recovery point checkpoint failed", "err", m.note(err))
			}
		case <-ret.C:
			m.RunRetention()
		case <-fl.C:
			m.FlushDue()
		}
	}
}
