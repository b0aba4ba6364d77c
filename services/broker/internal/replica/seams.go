package replica

import (
	"context"
	"time"

	"google.golang.org/grpc"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/broker/internal/logdirs"
	"tidemark.io/services/broker/internal/logstore"
)

// The replica manager reaches the outside world through three seams, so its
// decisions can be tested without disks, sockets or the wall clock: the
// partition logs (LogStore, Log), the network to peers and the controller
// (Transport), and time (Clock). Production wires the log store, the gRPC
// connection pool and the wall clock; the package's tests wire the real log
// store on vfs.MemFS, an in-memory controller and a clock moved by hand.

// Log is the part of a partition log (logstore.Log) the manager uses.
type Log interface {
	// AppendAsLeaderWithin bounds the record headers of the batches too.
	AppendAsLeaderWithin(records []byte, leaderEpoch int32, maxHeaders int64) (logstore.AppendInfo, error)
	// AppendAsFollowerUnflushed leaves batches after a gap to FlushGaps,
	// which must run before the new log end goes to the leader.
	AppendAsFollowerUnflushed(records []byte) (logstore.AppendInfo, error)
	FlushGaps() error
	// GapsUnflushed says whether FlushGaps has anything to flush.
	GapsUnflushed() bool
	Read(offset int64, maxBytes int, upperBound int64) (logstore.ReadResult, error)
	// ReadInto is Read into buf when its capacity suffices (pooled buffers).
	ReadInto(buf []byte, offset int64, maxBytes int, upperBound int64) (logstore.ReadResult, error)
	OffsetForTimestamp(ts, upperBound int64) (logstore.TimestampOffset, bool, error)
	// MaxTimestampOffset is the first record carrying the log's largest
	// timestamp, whatever the HW.
	MaxTimestampOffset() (logstore.TimestampOffset, bool, error)
	// EpochForOffset is the leader epoch offset was written in.
	EpochForOffset(offset int64) int32
	LogEndOffset() int64
	LogStartOffset() int64
	AdvanceLogStartOffset(offset, hw int64) error
	LatestEpoch() int32
	// EpochEntries is the leader-epoch cache, for dashboards and tests.
	EpochEntries() []logstore.EpochEntry
	EndOffsetForEpoch(epoch int32) (int32, int64)
	AssignEpochStartOffset(leaderEpoch int32) error
	TruncateTo(offset int64) (int64, error)
	TruncateFullyAndStartAt(offset int64) error
	SetConfig(c logstore.Config) error
	// Config is the configuration in force (max.message.bytes for checks
	// made before a request is decoded).
	Config() logstore.Config
	// TopicID is the topic id recorded with the log ("" if none);
	// SetTopicID records one in a log that has none.
	TopicID() string
	SetTopicID(id string) error
}

// LogStore is the part of the log manager (logstore.Manager) the replica
// manager uses: one data directory's logs.
type LogStore interface {
	GetOrCreate(tp TP, cfg logstore.Config) (Log, error)
	// Has reports whether tp has a log here, open or not (one that failed
	// to open, or is on a dir that went offline, counts).
	Has(tp TP) bool
	// LatestHighWatermark is the HW a replica made for tp's log starts
	// from; KeepHighWatermark hands it a stopped replica's HW.
	LatestHighWatermark(tp TP) (int64, bool)
	KeepHighWatermark(tp TP, hw int64)
	Delete(tp TP) error
	// PersistLogStart writes tp's log start to log-start-offset-checkpoint
	// now, not at the next periodic checkpoint: a start DeleteRecords moved
	// must not come back lower after a crash.
	PersistLogStart(tp TP) error
}

// logManager adapts *logstore.Manager to LogStore.
type logManager struct{ m *logstore.Manager }

// Partitions lists the logs on disk, hosted as replicas or not.
func (l logManager) Partitions() []TP { return l.m.Partitions() }

// TopicID is the topic id tp's log records, open as a replica or not.
func (l logManager) TopicID(tp TP) string {
	if lg, ok := l.m.Log(tp); ok {
		return lg.TopicID()
	}
	return ""
}

func (l logManager) GetOrCreate(tp TP, cfg logstore.Config) (Log, error) {
	lg, err := l.m.GetOrCreate(tp, cfg)
	if err != nil {
		return nil, err
	}
	return lg, nil
}
func (l logManager) Has(tp TP) bool {
	if _, ok := l.m.Log(tp); ok {
		return true
	}
	_, ok := l.m.Offline()[tp]
	return ok
}
func (l logManager) LatestHighWatermark(tp TP) (int64, bool) { return l.m.LatestHighWatermark(tp) }
func (l logManager) KeepHighWatermark(tp TP, hw int64)       { l.m.KeepHighWatermark(tp, hw) }
func (l logManager) Delete(tp TP) error                      { return l.m.Delete(tp) }
func (l logManager) PersistLogStart(TP) error                { return l.m.CheckpointRecoveryPoints() }

// NewDirsStore is the LogStore over a broker's log dirs.
func NewDirsStore(d *logdirs.Dirs) LogStore { return logDirsStore{d} }

// logDirsStore adapts *logdirs.Dirs to LogStore.
type logDirsStore struct{ d *logdirs.Dirs }

// Partitions lists the logs of the online dirs, hosted as replicas or not.
func (l logDirsStore) Partitions() []TP { return l.d.Partitions() }

// TopicID is the topic id tp's log records, open as a replica or not.
func (l logDirsStore) TopicID(tp TP) string {
	if lg, ok := l.d.Log(tp); ok {
		return lg.TopicID()
	}
	return ""
}

func (l logDirsStore) GetOrCreate(tp TP, cfg logstore.Config) (Log, error) {
	lg, err := l.d.GetOrCreate(tp, cfg)
	if err != nil {
		return nil, err
	}
	return lg, nil
}
func (l logDirsStore) Has(tp TP) bool                          { return l.d.Has(tp) }
func (l logDirsStore) LatestHighWatermark(tp TP) (int64, bool) { return l.d.LatestHighWatermark(tp) }
func (l logDirsStore) KeepHighWatermark(tp TP, hw int64)       { l.d.KeepHighWatermark(tp, hw) }
func (l logDirsStore) Delete(tp TP) error                      { return l.d.Delete(tp) }
func (l logDirsStore) PersistLogStart(tp TP) error             { return l.d.CheckpointLogStart(tp) }

// Transport carries the manager's calls to other brokers and to the active
// controller. Addresses come from the metadata cache.
type Transport interface {
	// Replication returns the replication service of the broker at addr:
	// the fetch stream and OffsetForLeaderEpoch. A fetch stream is reopened
	// when the client returned for the leader changes.
	Replication(addr string) (replicationv1.ReplicationServiceClient, error)
	// AlterPartition sends one batched ISR change to the controller at addr.
	AlterPartition(ctx context.Context, addr string, req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error)
}

// peerTransport is the Transport over pooled gRPC connections.
type peerTransport struct{ peers *Peers }

func (t peerTransport) conn(addr string) (*grpc.ClientConn, error) { return t.peers.Conn(addr) }

func (t peerTransport) Replication(addr string) (replicationv1.ReplicationServiceClient, error) {
	conn, err := t.conn(addr)
	if err != nil {
		return nil, err
	}
	return replicationClient{replicationv1.NewReplicationServiceClient(conn), conn}, nil
}

func (t peerTransport) AlterPartition(ctx context.Context, addr string, req *controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
	conn, err := t.peers.Controller(addr)
	if err != nil {
		return nil, err
	}
	return controlv1.NewControllerServiceClient(conn).AlterPartition(ctx, req)
}

// replicationClient remembers its connection: two clients over the same
// pooled connection are the same peer (the fetch stream keeps living).
type replicationClient struct {
	replicationv1.ReplicationServiceClient
	conn *grpc.ClientConn
}

// samePeer reports whether a and b reach the same peer the same way.
func samePeer(a, b replicationv1.ReplicationServiceClient) bool {
	ra, okA := a.(replicationClient)
	rb, okB := b.(replicationClient)
	if okA && okB {
		return ra.conn == rb.conn
	}
	return a == b
}

// Clock is the manager's only source of time: every deadline, backoff and
// period in its decision paths (purgatory timeouts and max waits, the ISR
// expiration period, AlterPartition and fetch backoffs, the caught-up times
// fed to the state machine) is read from it, never from package time.
type Clock interface {
	Now() time.Time
	// NewTimer fires once after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc runs f in its own goroutine after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a Clock's one-shot timer.
type Timer interface {
	// C delivers the fire time (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop reports whether it stopped the timer before it fired.
	Stop() bool
}

// WallClock is the real clock.
type WallClock struct{}

func (WallClock) Now() time.Time { return time.Now() }

func (WallClock) NewTimer(d time.Duration) Timer { return wallTimer{t: time.NewTimer(d)} }

func (WallClock) AfterFunc(d time.Duration, f func()) Timer {
	return wallTimer{t: time.AfterFunc(d, f)}
}

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop() bool          { return w.t.Stop() }
