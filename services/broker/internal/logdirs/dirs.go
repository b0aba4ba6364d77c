// Package logdirs holds a broker's log directories (log.dirs): one
// logstore.Manager per directory, where each partition's log lives in
// exactly one. A storage error in a directory (EIO, ENOSPC, a failed fsync
// or checkpoint) takes that whole directory offline, as Kafka does: its
// logs are abandoned, its partitions answer KAFKA_STORAGE_ERROR, and the
// owner is told so it can stop the replicas and tell the controller. The
// other directories keep serving.
//
// Concurrency: mu guards the placement of new logs and the record of
// offline partitions; it may be held while a Manager's lock is taken (to
// look a log up), never the other way, and no disk work happens under it. A directory going
// offline is handled on its own goroutine: the storage error may be
// reported with a log's locks held.
package logdirs

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/platform/kerr"
)

// TopicPartition names one partition.
type TopicPartition = logstore.TopicPartition

// Offline describes a directory that went offline.
type Offline struct {
	Dir string
	Err error
	// Partitions are the logs the directory held.
	Partitions []TopicPartition
}

// State is one directory as DescribeLogDirs shows it.
type State struct {
	Dir        string
	Err        error // nil while online
	Partitions int
}

// dir is one log directory.
type dir struct {
	path   string
	m      *logstore.Manager // nil if it failed to open
	failed atomic.Pointer[error]
	// settled is set (under Dirs.mu) once an offline directory's
	// partitions are recorded in offlineParts.
	settled bool
}

func (d *dir) offline() error {
	if e := d.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// Dirs is a broker's log directories.
type Dirs struct {
	dirs      []*dir
	log       *slog.Logger
	onOffline func(Offline)

	mu lockorder.Mutex[lockorder.LogDirs]
	// offlineParts maps a partition whose directory went offline to it.
	offlineParts map[TopicPartition]*dir
	// placing holds partitions whose new log is being created, and where.
	placing map[TopicPartition]*dir
	// blind is set when a directory was offline from the start: its
	// partitions are unknown, so no new log may be created anywhere (it
	// could be a partition whose data is on that directory).
	blind bool
	wg    sync.WaitGroup
}

// Options configures Open.
type Options struct {
	// Manager returns a directory's logstore options (Dir is set by Open;
	// OnStorageError is Open's).
	Manager func(path string) logstore.ManagerOptions
	// OnOffline, if set, is called once per directory that goes offline,
	// after its logs were abandoned, on a goroutine of its own.
	OnOffline func(Offline)
	// Lost are directories not to open, and why: offline from the start,
	// like one that cannot be opened (a formatted dir found empty or
	// missing: an unmounted disk must not be mistaken for a new one).
	Lost   map[string]error
	Logger *slog.Logger
}

// Open opens every directory. A directory that cannot be opened is offline
// from the start; Open fails only when none can be.
func Open(paths []string, o Options) (*Dirs, error) {
	if len(paths) == 0 {
		return nil, errors.New("logdirs: no log directory")
	}
	ds := &Dirs{log: o.Logger, onOffline: o.OnOffline, offlineParts: map[TopicPartition]*dir{}, placing: map[TopicPartition]*dir{}}
	if ds.log == nil {
		ds.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for _, p := range paths {
		if slices.ContainsFunc(ds.dirs, func(d *dir) bool { return d.path == p }) {
			return nil, fmt.Errorf("logdirs: %s is listed twice", p)
		}
		d := &dir{path: p}
		var m *logstore.Manager
		err := o.Lost[p]
		if err == nil {
			mo := o.Manager(p)
			mo.Dir = p
			mo.OnStorageError = func(err error) { ds.fail(d, err) }
			m, err = logstore.OpenManager(mo)
		}
		if err != nil {
			err = fmt.Errorf("log dir %s: %w", p, err)
			d.failed.Store(&err)
			ds.blind = true
			ds.log.Error("Log directory is offline: it could not be opened; no new replica will be created on this broker "+
				"until it restarts with the directory readable, since any partition's log may be on it", "dir", p, "err", err)
			errs = append(errs, err)
		}
		d.m = m
		d.settled = m == nil // blind covers a directory offline from the start
		ds.dirs = append(ds.dirs, d)
	}
	if len(errs) == len(paths) {
		return nil, errors.Join(errs...)
	}
	// A partition's log is in exactly one directory: a second copy is a
	// stale one (Kafka refuses to start: "Duplicate log directories").
	seen := map[TopicPartition]string{}
	for _, d := range ds.online() {
		tps := d.m.Partitions()
		for tp := range d.m.Offline() {
			tps = append(tps, tp)
		}
		for _, tp := range tps {
			if other, ok := seen[tp]; ok {
				for _, d := range ds.online() {
					_ = d.m.Close()
				}
				return nil, fmt.Errorf("logdirs: partition %s has a log in both %s and %s: refusing to start, one of them is stale", tp, other, d.path)
			}
			seen[tp] = d.path
		}
	}
	return ds, nil
}

// fail takes d offline (once): its logs are abandoned without flushing,
// their partitions remembered, and the owner told.
func (ds *Dirs) fail(d *dir, err error) {
	wrapped := fmt.Errorf("log dir %s is offline: %w", d.path, err)
	if !d.failed.CompareAndSwap(nil, &wrapped) {
		return
	}
	ds.log.Error("Log directory is offline after a storage error; its partitions answer KAFKA_STORAGE_ERROR", "dir", d.path, "err", err)
	ds.wg.Add(1)
	go func() {
		defer ds.wg.Done()
		// Abandon first: a log created meanwhile is then listed too. The
		// logs that could not be opened at startup were on this dir as well.
		d.m.Abandon()
		parts := d.m.Partitions()
		for tp := range d.m.Offline() {
			if !slices.Contains(parts, tp) {
				parts = append(parts, tp)
			}
		}
		slices.SortFunc(parts, func(a, b TopicPartition) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		ds.mu.Lock()
		for _, tp := range parts {
			ds.offlineParts[tp] = d
		}
		d.settled = true
		ds.mu.Unlock()
		if ds.onOffline != nil {
			ds.onOffline(Offline{Dir: d.path, Err: wrapped, Partitions: parts})
		}
	}()
}

// holder returns the online directory holding tp's log, or nil.
func (ds *Dirs) holder(tp TopicPartition) *dir {
	for _, d := range ds.dirs {
		if d.offline() != nil {
			continue
		}
		if _, ok := d.m.Log(tp); ok {
			return d
		}
		if _, ok := d.m.Offline()[tp]; ok {
			return d
		}
	}
	return nil
}

// storageError is the answer for a partition whose directory is offline.
func storageError(tp TopicPartition, d *dir) error {
	return kerr.New(kerr.KafkaStorageError, "partition %s is on an offline log dir: %v", tp, d.offline())
}

// GetOrCreate returns tp's log, creating it in the online directory with
// the fewest partitions (Kafka's placement) when no directory has it.
func (ds *Dirs) GetOrCreate(tp TopicPartition, cfg logstore.Config) (*logstore.Log, error) {
	ds.mu.Lock()
	if d, ok := ds.offlineParts[tp]; ok {
		ds.mu.Unlock()
		return nil, storageError(tp, d)
	}
	d := ds.placing[tp]
	if d == nil {
		d = ds.holder(tp)
	}
	if d == nil {
		for _, o := range ds.dirs {
			if o.offline() != nil && !o.settled {
				// Its partitions are not known yet: tp may be one of them.
				ds.mu.Unlock()
				return nil, kerr.New(kerr.KafkaStorageError,
					"partition %s has no log here, and log dir %s, going offline, may hold it: not creating one", tp, o.path)
			}
		}
		if ds.blind {
			ds.mu.Unlock()
			return nil, kerr.New(kerr.KafkaStorageError,
				"partition %s has no log here, and a log dir offline since startup may hold it: not creating one", tp)
		}
		d = ds.leastLoaded()
		if d == nil {
			ds.mu.Unlock()
			return nil, kerr.New(kerr.KafkaStorageError, "every log dir is offline")
		}
	}
	ds.placing[tp] = d
	ds.mu.Unlock()
	l, err := d.m.GetOrCreate(tp, cfg)
	ds.mu.Lock()
	delete(ds.placing, tp)
	ds.mu.Unlock()
	if err != nil && d.offline() != nil {
		return nil, storageError(tp, d)
	}
	return l, err
}

// leastLoaded is the online directory with the fewest partitions (mu held).
func (ds *Dirs) leastLoaded() *dir {
	var best *dir
	bestN := 0
	for _, d := range ds.dirs {
		if d.offline() != nil {
			continue
		}
		n := d.m.Len()
		for _, p := range ds.placing {
			if p == d {
				n++
			}
		}
		if best == nil || n < bestN {
			best, bestN = d, n
		}
	}
	return best
}

// Has reports whether tp has a log here: open, failed to open, or on a
// dir that went offline.
func (ds *Dirs) Has(tp TopicPartition) bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if _, ok := ds.offlineParts[tp]; ok {
		return true
	}
	return ds.holder(tp) != nil
}

// Log returns tp's open log.
func (ds *Dirs) Log(tp TopicPartition) (*logstore.Log, bool) {
	if d := ds.holder(tp); d != nil {
		return d.m.Log(tp)
	}
	return nil, false
}

// Partitions lists the open partitions of the online directories, sorted.
func (ds *Dirs) Partitions() []TopicPartition {
	var out []TopicPartition
	for _, d := range ds.online() {
		out = append(out, d.m.Partitions()...)
	}
	slices.SortFunc(out, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// Offline returns the partitions that cannot be served, and why: logs that
// failed to open and every log of an offline directory.
func (ds *Dirs) Offline() map[TopicPartition]error {
	out := map[TopicPartition]error{}
	for _, d := range ds.online() {
		maps.Copy(out, d.m.Offline())
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for tp, d := range ds.offlineParts {
		out[tp] = d.offline()
	}
	return out
}

// OfflinePartition reports whether tp's directory is offline.
func (ds *Dirs) OfflinePartition(tp TopicPartition) error {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d, ok := ds.offlineParts[tp]; ok {
		return storageError(tp, d)
	}
	return nil
}

// OfflineDirOf names the offline directory that held tp ("" if none).
func (ds *Dirs) OfflineDirOf(tp TopicPartition) string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d, ok := ds.offlineParts[tp]; ok {
		return d.path
	}
	return ""
}

// States describes every directory.
func (ds *Dirs) States() []State {
	var out []State
	for _, d := range ds.dirs {
		s := State{Dir: d.path, Err: d.offline()}
		if s.Err == nil {
			s.Partitions = d.m.Len()
		}
		out = append(out, s)
	}
	return out
}

// PartitionSize is one log's size on disk.
type PartitionSize struct {
	TopicPartition
	Bytes int64
}

// Described is one directory with its logs, for DescribeLogDirs.
type Described struct {
	State
	Logs []PartitionSize // sorted; none for an offline directory
}

// Describe lists every directory with its logs and their sizes.
func (ds *Dirs) Describe() []Described {
	var out []Described
	for _, s := range ds.States() {
		d := Described{State: s}
		if s.Err == nil {
			for _, dd := range ds.dirs {
				if dd.path != s.Dir {
					continue
				}
				for _, tp := range dd.m.Partitions() {
					if l, ok := dd.m.Log(tp); ok {
						d.Logs = append(d.Logs, PartitionSize{TopicPartition: tp, Bytes: l.Stats().SizeBytes})
					}
				}
			}
		}
		out = append(out, d)
	}
	return out
}

// OfflineDirs lists the offline directories.
func (ds *Dirs) OfflineDirs() []State {
	var out []State
	for _, s := range ds.States() {
		if s.Err != nil {
			out = append(out, s)
		}
	}
	return out
}

// RecoveredHighWatermark is the checkpointed HW found when tp's log was
// opened at startup.
func (ds *Dirs) RecoveredHighWatermark(tp TopicPartition) (int64, bool) {
	if d := ds.holder(tp); d != nil {
		return d.m.RecoveredHighWatermark(tp)
	}
	return 0, false
}

// LatestHighWatermark is the latest HW the directory holding tp keeps for
// it (logstore.Manager.LatestHighWatermark).
func (ds *Dirs) LatestHighWatermark(tp TopicPartition) (int64, bool) {
	if d := ds.holder(tp); d != nil {
		return d.m.LatestHighWatermark(tp)
	}
	return 0, false
}

// KeepHighWatermark hands tp's HW to the directory holding its log
// (logstore.Manager.KeepHighWatermark).
func (ds *Dirs) KeepHighWatermark(tp TopicPartition, hw int64) {
	if d := ds.holder(tp); d != nil {
		d.m.KeepHighWatermark(tp, hw)
	}
}

// CheckpointLogStart writes the log-start checkpoint of the directory
// holding tp's log (with its recovery points) now.
func (ds *Dirs) CheckpointLogStart(tp TopicPartition) error {
	if d := ds.holder(tp); d != nil {
		return d.m.CheckpointRecoveryPoints()
	}
	return nil
}

// Delete removes tp's log from the directory that holds it.
func (ds *Dirs) Delete(tp TopicPartition) error {
	if err := ds.OfflinePartition(tp); err != nil {
		return err
	}
	if d := ds.holder(tp); d != nil {
		return d.m.Delete(tp)
	}
	return nil
}

// HadCleanShutdown reports whether every online directory was shut down
// cleanly last time.
func (ds *Dirs) HadCleanShutdown() bool {
	for _, d := range ds.online() {
		if !d.m.HadCleanShutdown() {
			return false
		}
	}
	return true
}

// CleanerStats adds up the log cleaner's counters over the directories.
func (ds *Dirs) CleanerStats() logstore.CleanerStats {
	// The counters are summed over every directory, offline ones too: a
	// directory going offline must not make a counter decrease (Prometheus
	// would read it as a reset). Its gauges (last run, dirty ratio) go.
	var sum logstore.CleanerStats
	for _, d := range ds.dirs {
		if d.m == nil {
			continue
		}
		st := d.m.CleanerStats()
		if d.offline() != nil {
			st.LastDuration, st.MaxDirtyRatio = 0, 0
		}
		sum = sum.Add(st)
	}
	return sum
}

// Close closes the online directories (offline ones were abandoned).
func (ds *Dirs) Close() error {
	ds.wg.Wait()
	var errs []error
	for _, d := range ds.online() {
		errs = append(errs, d.m.Close())
	}
	return errors.Join(errs...)
}

// Abandon abandons every directory, as a crash would.
func (ds *Dirs) Abandon() {
	ds.wg.Wait()
	for _, d := range ds.dirs {
		if d.m != nil {
			d.m.Abandon()
		}
	}
}

func (ds *Dirs) online() []*dir {
	var out []*dir
	for _, d := range ds.dirs {
		if d.offline() == nil {
			out = append(out, d)
		}
	}
	return out
}
