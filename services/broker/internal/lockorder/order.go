// Package lockorder is the broker's lock order as code. Each mutex in the
// broker is a Mutex or RWMutex typed by its class below; a class's rank
// says where it sits in the order (services/broker/LOCKORDER.md). A
// goroutine may take a lock only when every lock it already holds has a
// smaller rank; two locks of one rank are never held together.
//
// In an ordinary build the types are sync.Mutex and sync.RWMutex with no
// added cost. Built with -tags lockcheck, every acquisition is checked
// against the locks its goroutine holds, and an out-of-order one ends the
// process with both locks named and the stack, before it can deadlock.
package lockorder

// Class names one kind of lock and its rank.
type Class interface{ info() class }

type class struct {
	rank int
	name string
}

// The classes, in order. Leaves share one rank: nothing but the file
// cache's lock is taken while one is held.
type (
	// ProducerIDs is the broker's producer id allocator's mu; it is held
	// while a block is fetched from the controller, so nothing may be
	// held when it is taken.
	ProducerIDs struct{}
	// Fence is the broker's leaseFence.mu (registration changes against
	// LeaderAndIsr application).
	Fence struct{}
	// Registrar is the registrar's mu (the current registration); taken
	// by the fence's callback.
	Registrar struct{}
	// ControlRequests is replica.Manager.ctrlMu: the controller's
	// LeaderAndIsr, UpdateMetadata and StopReplica are applied under it,
	// one at a time, and checked against the newest controller epoch
	// again once it is held.
	ControlRequests struct{}
	// ReplicaManager is replica.Manager.mu (the partition map).
	ReplicaManager struct{}
	// Replica is replica.Replica.mu (a partition's state machine and
	// every change of its log's contents).
	Replica struct{}
	// LogWriter is logstore.Log.mu (the writer mutex).
	LogWriter struct{}
	// LogFlush is logstore.Log.flushMu; never held with LogWriter, hence
	// the same rank.
	LogFlush struct{}
	// LogSyncs is logstore.Log.syncMu (flushes and the log's other
	// long background file work, shared; truncation, swaps and closing,
	// exclusive, before fileMu).
	LogSyncs struct{}
	// LogFiles is logstore.Log.fileMu.
	LogFiles struct{}
	// LogCheckpoint is the log Manager's hwMu or rpMu (one checkpoint
	// file's writes); the two are never held together.
	LogCheckpoint struct{}
	// LogDirs is logdirs.Dirs.mu (placement of new logs, offline
	// partitions); it looks logs up in the managers under it.
	LogDirs struct{}
	// LogManager is logstore.Manager.mu (the map of logs).
	LogManager struct{}
	// FetcherManager is the replica fetcher manager's mu (its map of
	// fetchers); held while a fetcher's partitions change.
	FetcherManager struct{}
	// Fetcher is one replica fetcher's mu (its partition map).
	Fetcher struct{}
	// Leaf is every lock that is held for a short step and never while
	// taking another: indexes, the epoch cache, waiter sets,
	// the AlterPartition queue, faults, the metadata cache, events, quotas,
	// the group coordinator's state.
	Leaf struct{}
	// FileCache is logstore.FileCache.mu (the broker's open segment
	// files); file operations borrow handles from it under any log lock,
	// index locks included, and nothing is taken while it is held.
	FileCache struct{}
)

func (ProducerIDs) info() class     { return class{5, "producer ids"} }
func (Fence) info() class           { return class{10, "broker fence"} }
func (Registrar) info() class       { return class{15, "broker registrar"} }
func (ControlRequests) info() class { return class{18, "control requests"} }
func (ReplicaManager) info() class  { return class{20, "replica manager"} }
func (Replica) info() class         { return class{30, "replica"} }
func (LogWriter) info() class       { return class{40, "log writer"} }
func (LogFlush) info() class        { return class{40, "log flush"} }
func (LogSyncs) info() class        { return class{45, "log syncs"} }
func (LogFiles) info() class        { return class{50, "log files"} }
func (LogCheckpoint) info() class   { return class{60, "log checkpoint"} }
func (LogDirs) info() class         { return class{65, "log dirs"} }
func (LogManager) info() class      { return class{70, "log manager"} }
func (FetcherManager) info() class  { return class{80, "fetcher manager"} }
func (Fetcher) info() class         { return class{90, "fetcher"} }
func (Leaf) info() class            { return class{100, "leaf"} }
func (FileCache) info() class       { return class{110, "file cache"} }

// Ranks lists every class's name and rank, in order, for the document's
// test.
func Ranks() []struct {
	Name string
	Rank int
} {
	cs := []Class{ProducerIDs{}, Fence{}, Registrar{}, ControlRequests{}, ReplicaManager{}, Replica{}, LogWriter{}, LogFlush{}, LogSyncs{}, LogFiles{}, LogCheckpoint{}, LogDirs{}, LogManager{}, FetcherManager{}, Fetcher{}, Leaf{}, FileCache{}}
	out := make([]struct {
		Name string
		Rank int
	}, len(cs))
	for i, c := range cs {
		out[i].Name, out[i].Rank = c.info().name, c.info().rank
	}
	return out
}
