// Package broker is a tidemark broker: it hosts partition replicas, serves
// produce and fetch to clients, replicates as leader or follower, and obeys
// the active controller. Start runs one in-process, so the cluster tests and
// the broker binary share the same code.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
	"tidemark.io/services/broker/internal/group"
	"tidemark.io/services/broker/internal/grpcapi"
	"tidemark.io/services/broker/internal/kafkaapi"
	"tidemark.io/services/broker/internal/logdirs"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/broker/internal/metadata"
	"tidemark.io/services/broker/internal/netcut"
	"tidemark.io/services/broker/internal/parkedfs"
	"tidemark.io/services/broker/internal/quota"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/etcdfollow"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/lifecycle"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/telemetry"
	"tidemark.io/services/recordbatch"
	"tidemark.io/services/scramsync"
	"tidemark.io/services/topicconfig"
)

// Broker is a running broker.
type Broker struct {
	cfg Config
	log *slog.Logger
	tel *telemetry.Telemetry
	srv *grpcserver.Server
	lis net.Listener
	// kafka serves Kafka's wire protocol on kafkaSockets, one per named
	// listener; nil without Kafka listeners.
	kafka        *kafkaapi.Server
	quotas       *quota.Manager      // follows the client quota entities in etcd (services/quotasync)
	users        *scramsync.Users    // follows the users' SCRAM credentials in etcd
	follow       *etcdfollow.Metrics // how current the followed etcd states are
	kafkaSockets []kafkaSocket
	logs         *logdirs.Dirs
	// metaMu orders the rewrites of the data dir's meta.properties (the
	// cluster id once learned, the replaced log dirs once settled).
	metaMu sync.Mutex
	// replacedDirs are the log dirs whose logs this start may lack
	// (logdirsformat.go); the session reports refusals under them.
	replacedDirs []string
	// logDirOffline counts log dirs gone offline (read by tests).
	logDirOffline atomic.Int32
	meta          *metadata.Cache
	peers         *replica.Peers
	rm            *replica.Manager
	reg           *registrar
	// authz decides every caller; the registrar keeps its stored ACL
	// bindings equal to etcd's.
	authz       *authz.Authorizer
	fence       *leaseFence // nil without etcd
	producerIDs *producerIDs
	// groups is the group coordinator of the __consumer_offsets
	// partitions this broker leads.
	groups *group.Coordinator
	done   chan error
	// draining is cancelled when the broker starts to stop: open follower
	// fetch streams end after their current round trip, so the server's
	// graceful stop does not wait on streams that would otherwise live on.
	draining context.Context
	drain    context.CancelFunc

	epoch    atomic.Int64
	stopOnce sync.Once
	stopErr  error
}

// Start opens the data directory (recovering logs after a crash), binds the
// listener and serves. With etcd endpoints configured it registers with the
// cluster and opens its session to the active controller; without, it waits
// for a controller to push metadata to it (in-process tests).
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *Broker, err error) {
	defer func() {
		if err != nil {
			closeGiven(cfg.Listener, cfg.KafkaListener)
			closeGiven(slices.Collect(maps.Values(cfg.KafkaNamedListeners))...)
		}
	}()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = logging.OrDiscard(log)
	if err := vfs.MkdirAllDurable(vfs.OS, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("--data.dir %s: %w", cfg.DataDir, err)
	}
	cfg.Telemetry.TLS = cfg.TLS // an https:// OTLP endpoint is dialled with the broker's certificate
	tel, err := telemetry.Setup(ctx, cfg.Telemetry, telemetry.Identity{
		Service: fmt.Sprintf("tidemark-broker-%d", cfg.ID), Kind: "broker", NodeID: cfg.ID, Rack: cfg.Rack,
	}, log)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, log: log, tel: tel, meta: metadata.New(), done: make(chan error, 1)}
	fail := func(err error) (*Broker, error) {
		b.closeAll(context.Background())
		return nil, err
	}

	lis, err := listen(cfg.Listener, cfg.Listen)
	if err != nil {
		return fail(fmt.Errorf("--listen %s: %w", cfg.Listen, err))
	}
	b.lis = lis
	if err := b.bindKafka(); err != nil {
		return fail(err)
	}

	static, err := topicconfig.ResolveBroker(cfg.Settings)
	if err != nil {
		return fail(err)
	}
	lostDirs, replacedDirs, err := prepareLogDirs(cfg, log)
	if err != nil {
		return fail(err)
	}
	b.replacedDirs = replacedDirs
	var rmRef atomic.Pointer[replica.Manager]
	// One bound on open segment files for the whole broker, every log dir.
	segmentFiles := logstore.NewFileCache(int(static.LogMaxOpenFiles))
	disk := newDiskMetrics(tel.Registry)
	if ok, err := parkedfs.Available(); !ok {
		log.Warn("io_uring refused: removals, renames and truncations of log files are blocking system calls, each holding one of the broker's GOMAXPROCS while the file system frees blocks (with a discard mount, while the device trims them)", "err", err)
	}
	managerOptions := func(dir string) logstore.ManagerOptions {
		return logstore.ManagerOptions{Logger: log.With("log_dir", dir), Files: segmentFiles,
			ObserveAppendWrite: disk.observeAppendWrite, ObserveCheckpoint: disk.observeCheckpoint,
			HighWatermark: func(tp logstore.TopicPartition) (int64, bool) {
				if rm := rmRef.Load(); rm != nil {
					return rm.HighWatermark(tp)
				}
				return 0, false
			},
			// Retention moved a log's start: the replica's state machine must
			// see it (divergence checks, preferred read replica, dashboards).
			LogStartMoved: func(tp logstore.TopicPartition) {
				if rm := rmRef.Load(); rm != nil {
					rm.SyncLogStartOffset(tp)
				}
			},
			RetentionCheckInterval:          time.Duration(static.LogRetentionCheckIntervalMs) * time.Millisecond,
			HighWatermarkCheckpointInterval: time.Duration(static.ReplicaHighWatermarkCheckpointIntervalMs) * time.Millisecond,
			RecoveryCheckpointInterval:      time.Duration(static.LogFlushOffsetCheckpointIntervalMs) * time.Millisecond,
			CleanerEnable:                   static.LogCleanerEnable,
			CleanerBackoff:                  time.Duration(static.LogCleanerBackoffMs) * time.Millisecond,
			CleanerDedupeBytes:              static.LogCleanerDedupeBufferSize,
			// Loading drops the producers already expired, so it needs
			// producer.id.expiration.ms; a dynamic value is not known
			// yet and reaches each log with the first config pass.
			ConfigFor: func(string) logstore.Config {
				c := logstore.DefaultConfig()
				c.ProducerIDExpiration = time.Duration(static.ProducerIDExpirationMs) * time.Millisecond
				return c
			},
		}
	}
	b.logs, err = logdirs.Open(cfg.logDirs(), logdirs.Options{Manager: managerOptions, Logger: log, Lost: lostDirs,
		OnOffline: func(off logdirs.Offline) {
			if rm := rmRef.Load(); rm != nil {
				rm.LogDirFailed(off.Partitions, off.Err)
			}
			b.logDirOffline.Add(1)
			if len(b.logs.OfflineDirs()) == len(cfg.logDirs()) {
				// Kafka's rule: a broker with no log dir left serves
				// nothing; it stops (the process exits) so that an
				// operator sees it down rather than half alive.
				log.Error("Every log dir is offline; shutting down", "log_dirs", cfg.logDirs())
				select {
				case b.done <- fmt.Errorf("every log dir is offline (last: %w)", off.Err):
				default:
				}
			}
		}})
	if err != nil {
		return fail(fmt.Errorf("log dirs %v: %w", cfg.logDirs(), err))
	}
	tel.Registry.MustRegister(cleanerCollector{logs: b.logs})
	// Kafka's OfflineLogDirectoryCount: the alert on a failed disk, idle
	// or not (an idle dir fails at its next checkpoint, within seconds).
	tel.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidemark_log_offline_dirs",
		Help: "Log dirs of this broker that are offline (a storage error, or unusable since startup); their partitions answer KAFKA_STORAGE_ERROR until the broker restarts."},
		func() float64 { return float64(len(b.logs.OfflineDirs())) }))
	tel.Registry.MustRegister(fileCacheCollector{files: segmentFiles, max: int(static.LogMaxOpenFiles)})
	for tp, why := range b.logs.Offline() {
		log.Error("partition log is offline", "topic", tp.Topic, "partition", tp.Partition, "err", why)
	}

	peerCreds, err := cfg.TLS.DialOption()
	if err != nil {
		return fail(err)
	}
	serverCreds, err := cfg.TLS.ServerCredentials()
	if err != nil {
		return fail(err)
	}
	faults := replica.NewFaults(cfg.FaultInjection)
	peerDial := cfg.Dialer
	var isolation []grpc.UnaryServerInterceptor
	if cfg.FaultInjection {
		// Only with fault injection on does the broker dial through the
		// cuts an isolation fault makes (isolation.go).
		peerDial = netcut.Dialer(cfg.Dialer, func(addr string) bool { return b.peers.IsController(addr) }, faults.Isolation)
		b.cfg.Etcd.Dialer = netcut.Dialer(cfg.Etcd.Dialer, nil, faults.Isolation)
		isolation = append(isolation, controllerRequestsLost(faults))
	}
	b.peers = replica.NewPeers(peerDial, tel.Tracing(), peerCreds)
	events := newEventBuffer(512)
	var leaderFence func() replica.Fence
	if len(cfg.Etcd.Endpoints) > 0 {
		b.fence = newLeaseFence(log, tel.Registry, func() int {
			n := 0
			if rm := rmRef.Load(); rm != nil {
				for _, r := range rm.Replicas() {
					if r.IsLeader() {
						n++
					}
				}
			}
			return n
		})
		b.fence.whileFenced = func() {
			if rm := rmRef.Load(); rm != nil {
				rm.WakeParkedProduce()
			}
		}
		leaderFence = b.fence.Check
	}
	b.rm, err = replica.New(replica.Options{
		BrokerID: cfg.ID, Rack: cfg.Rack, Store: replica.NewDirsStore(b.logs), Meta: b.meta, Peers: b.peers,
		BrokerEpoch: b.epoch.Load, AwaitRegistration: len(cfg.Etcd.Endpoints) > 0, Static: cfg.Settings, Logger: log,
		Tracer: tel.Tracer("tidemark/broker"), Events: events, Faults: faults, Registry: tel.Registry,
		LeaderFence: leaderFence, LostLogs: len(replacedDirs) > 0, LostLogsSettled: b.lostLogsSettled,
	})
	if err != nil {
		return fail(err)
	}
	rmRef.Store(b.rm)

	az, err := authz.New(authz.Options{Config: cfg.Authz, TLS: cfg.TLS.Enabled(), FaultInjection: cfg.FaultInjection, Logger: log, Registry: tel.Registry,
		StoredBindings: len(cfg.Etcd.Endpoints) > 0})
	if err != nil {
		return fail(err)
	}
	b.authz = az
	b.producerIDs = newProducerIDs(b)
	b.quotas = quota.New(tel.Registry, nil)
	b.users = scramsync.New(log, 0)
	b.follow = etcdfollow.NewMetrics(tel.Registry)
	api := &grpcapi.Broker{RM: b.rm, ProducerIDs: b.producerIDs, Quotas: b.quotas, ClientID: kafkaapi.ClientID}
	b.srv = grpcserver.New(grpcserver.Options{Logger: log, TracerProvider: tel.Tracing(), Authorizer: az, Credentials: serverCreds,
		Limits: cfg.Limits, AnswerBytesPerConnection: cfg.MaxQueuedAnswerBytes, Registerer: tel.Registry, Admit: api.Admit, Unary: isolation,
		// The fetch stream lives for many round trips; grpcapi traces each
		// round trip itself instead of one span for the whole stream.
		// So does the produce stream, per request.
		StatsFilter: func(info *stats.RPCTagInfo) bool {
			return info.FullMethodName != "/"+telemetry.ReplicaFetchSpan && info.FullMethodName != telemetry.ProduceStreamMethod
		},
	})
	b.draining, b.drain = context.WithCancel(context.Background())
	api.TracerProvider, api.Draining = tel.Tracing(), b.draining
	api.Authorize = func(ctx context.Context, method string, req any) error {
		_, err := az.Authorize(ctx, method, req)
		return err
	}
	brokerv1.RegisterBrokerServiceServer(b.srv, api)
	replicationv1.RegisterReplicationServiceServer(b.srv, &grpcapi.Replication{RM: b.rm, TracerProvider: tel.Tracing(), Draining: b.draining, Faults: faults,
		BrokerEpochOf: func(id int32) (int64, bool) {
			br, ok := b.meta.Broker(id)
			return br.Epoch, ok && br.Epoch > 0
		}})
	if b.fence != nil {
		controlv1.RegisterBrokerControlServiceServer(b.srv, fencedControl{Control: &grpcapi.Control{RM: b.rm}, f: b.fence})
	} else {
		controlv1.RegisterBrokerControlServiceServer(b.srv, &grpcapi.Control{RM: b.rm})
	}
	faultv1.RegisterFaultInjectionServiceServer(b.srv, &grpcapi.Faults{F: faults, BrokerID: cfg.ID})
	b.groups = group.New(group.Options{Host: groupHost{b: b}, Logger: log.With("component", "group-coordinator"), Registry: tel.Registry})
	groupv1.RegisterGroupServiceServer(b.srv, &group.Service{C: b.groups})
	if err := authz.Covers(b.srv.GetServiceInfo()); err != nil {
		return fail(err)
	}
	if len(b.kafkaSockets) > 0 {
		if err := b.startKafka(api, az); err != nil {
			return fail(err)
		}
	}
	if len(cfg.Etcd.Endpoints) > 0 {
		// Not serving until registered: a fast restart waits out its
		// previous incarnation's lease, and the controller's health probe
		// must not take this process for that incarnation.
		b.srv.SetServing("", false)
	} else {
		b.srv.MarkAllServing()
	}
	go func() {
		if err := b.srv.Serve(lis); err != nil {
			b.done <- err
		}
	}()

	if len(cfg.Etcd.Endpoints) > 0 {
		b.reg, err = startRegistrar(ctx, b, events)
		if err != nil {
			return fail(err)
		}
		b.srv.MarkAllServing()
	}
	log.Info("broker started", "id", cfg.ID, "listen", lis.Addr().String(), "kafka_listeners", b.kafkaListenersLog(), "rack", cfg.Rack, "data_dir", cfg.DataDir,
		"clean_shutdown", b.logs.HadCleanShutdown(), "partitions_on_disk", len(b.logs.Partitions()),
		"log_retention_check_interval_ms", static.LogRetentionCheckIntervalMs,
		"replica_high_watermark_checkpoint_interval_ms", static.ReplicaHighWatermarkCheckpointIntervalMs, "log_max_open_files", static.LogMaxOpenFiles,
		"log_cleaner_enable", static.LogCleanerEnable, "log_cleaner_dedupe_buffer_size", static.LogCleanerDedupeBufferSize)
	return b, nil
}

// Addr is the bound gRPC address.
func (b *Broker) Addr() string { return b.lis.Addr().String() }

// Advertised is the address other nodes should dial.
func (b *Broker) Advertised() string {
	if b.cfg.Advertised != "" {
		return b.cfg.Advertised
	}
	return b.Addr()
}

// AnswerBytesReserved is what fetch answers hold of the gRPC connections'
// answer budgets: in all, and on the connection holding most.
func (b *Broker) AnswerBytesReserved() (total, largest int64) { return b.srv.AnswerBytesReserved() }

// ID is the broker id.
func (b *Broker) ID() int32 { return b.cfg.ID }

// Services lists the gRPC services and methods the broker serves (the
// authorization tests check each has a policy).
func (b *Broker) Services() map[string]grpc.ServiceInfo { return b.srv.GetServiceInfo() }

// Replicas gives tests and tools access to the replica manager.
func (b *Broker) Replicas() *replica.Manager { return b.rm }

// Failed reports a fatal serving error.
func (b *Broker) Failed() <-chan error { return b.done }

// Stop shuts the broker down in order: a controlled shutdown first (the
// controller moves this broker's leaderships away while it still serves),
// then stop taking requests, stop replication, flush and checkpoint the logs
// (writing the clean-shutdown marker), leave the cluster, flush telemetry.
func (b *Broker) Stop(ctx context.Context) error {
	b.stopOnce.Do(func() {
		if b.reg != nil {
			b.reg.controlledShutdown(ctx)
		}
		b.stopErr = b.closeAll(ctx)
	})
	return b.stopErr
}

// Crash stops the broker the way kill -9 would, as far as an in-process test
// can: no controlled shutdown, no final flush or checkpoint, no
// clean-shutdown marker; the registration lease is left to expire.
func (b *Broker) Crash() {
	b.stopOnce.Do(func() {
		if b.fence != nil {
			b.fence.close() // before the registration goes: no "Fencing myself" on the way out
		}
		if b.reg != nil {
			b.reg.abandon()
		}
		if b.drain != nil {
			b.drain() // a Kafka listener still waiting for metadata closes
		}
		if b.kafka != nil {
			b.kafka.Close()
		}
		b.srv.Server.Stop()
		b.groups.Close()
		b.rm.Close()
		b.peers.Close()
		b.logs.Abandon()
		_ = b.tel.Close(context.Background())
		b.stopErr = errors.New("crashed")
	})
}

// deregisterReserve is the part of a stop's deadline kept for deleting the
// registration (one etcd call) after the server's drain.
const deregisterReserve = 2 * time.Second

func (b *Broker) closeAll(ctx context.Context) error {
	var errs []error
	if b.drain != nil {
		b.drain()
	}
	if b.groups != nil {
		// Parked JoinGroup and SyncGroup calls answer NOT_COORDINATOR now
		// rather than hold up the server's graceful stop.
		b.groups.Close()
	}
	if b.kafka != nil {
		b.kafka.Close()
	}
	b.closeKafkaSockets() // those not served yet
	if b.srv != nil {
		// A follower that vanished mid-stream never sends the request its
		// stream handler waits for; bound the wait when the caller did not,
		// and leave the deregistration below its share when it did.
		var sctx context.Context
		var cancel context.CancelFunc
		if dl, ok := ctx.Deadline(); ok {
			sctx, cancel = context.WithDeadline(ctx, dl.Add(-min(deregisterReserve, time.Until(dl)/4)))
		} else {
			sctx, cancel = context.WithTimeout(ctx, lifecycle.DefaultShutdownTimeout/2)
		}
		b.srv.Stop(sctx)
		cancel()
	}
	if b.rm != nil {
		b.rm.Close()
	}
	if b.fence != nil {
		b.fence.close()
	}
	if b.reg != nil {
		errs = append(errs, b.reg.close(ctx))
	}
	if b.peers != nil {
		b.peers.Close()
	}
	if b.logs != nil {
		errs = append(errs, b.logs.Close())
	}
	if b.lis != nil && b.srv == nil {
		_ = b.lis.Close()
	}
	errs = append(errs, b.tel.Close(ctx))
	return errors.Join(errs...)
}

var _ lifecycle.Stopper = (*Broker)(nil)

// MetricsAddr is the bound address of /metrics, or "" when it is off.
func (b *Broker) MetricsAddr() string { return b.tel.MetricsAddr() }

// ReadLog returns the values of every record in a hosted replica's log, in
// offset order, whether committed or not: what is on this broker's disk.
// Tests and tools compare replicas with it.
func (b *Broker) ReadLog(topic string, partition int32) ([]string, error) {
	r, ok := b.rm.Replica(replica.TP{Topic: topic, Partition: partition})
	if !ok {
		return nil, nil
	}
	var out []string
	lg := r.Log()
	for off := lg.LogStartOffset(); off < lg.LogEndOffset(); {
		rr, err := lg.Read(off, 1<<20, lg.LogEndOffset())
		if err != nil {
			return nil, err
		}
		if len(rr.Records) == 0 {
			break
		}
		for batch, err := range recordbatch.All(rr.Records) {
			if err != nil {
				return nil, err
			}
			for rec, err := range batch.Records() {
				if err != nil {
					return nil, err
				}
				out = append(out, string(rec.Value))
			}
		}
		off = rr.NextOffset
	}
	return out, nil
}

// ReadLogKeys returns the keys of every record in a hosted replica's log,
// tombstones included, in offset order (tests look for compacted keys).
func (b *Broker) ReadLogKeys(topic string, partition int32) ([][]byte, error) {
	r, ok := b.rm.Replica(replica.TP{Topic: topic, Partition: partition})
	if !ok {
		return nil, nil
	}
	var out [][]byte
	lg := r.Log()
	for off := lg.LogStartOffset(); off < lg.LogEndOffset(); {
		rr, err := lg.Read(off, 1<<20, lg.LogEndOffset())
		if err != nil {
			return nil, err
		}
		if rr.NextOffset <= off {
			break
		}
		for batch, err := range recordbatch.All(rr.Records) {
			if err != nil {
				return nil, err
			}
			for rec, err := range batch.Records() {
				if err != nil {
					return nil, err
				}
				if rec.Offset >= off {
					out = append(out, append([]byte(nil), rec.Key...))
				}
			}
		}
		off = rr.NextOffset
	}
	return out, nil
}

// IsLeader reports whether this broker hosts the partition and acts as its
// leader (it has applied the controller's decision).
func (b *Broker) IsLeader(topic string, partition int32) bool {
	r, ok := b.rm.Replica(replica.TP{Topic: topic, Partition: partition})
	return ok && r.IsLeader()
}

// ReplicaOffsets returns a hosted replica's high watermark and log end
// offset, as this broker knows them.
func (b *Broker) ReplicaOffsets(topic string, partition int32) (hw, leo int64, ok bool) {
	r, ok := b.rm.Replica(replica.TP{Topic: topic, Partition: partition})
	if !ok {
		return 0, 0, false
	}
	s := r.Snapshot(time.Now())
	return s.HighWatermark, s.LogEndOffset, true
}

// ProducerIDsHeld is how many idempotent producer ids the broker can hand
// out without asking the controller (a block is fetched ahead).
func (b *Broker) ProducerIDsHeld() int64 { return b.producerIDs.held() }

// Fenced reports whether this broker has fenced itself as leader (the
// tidemark_broker_fenced gauge): its registration lease is unconfirmed or
// lost, or its new incarnation has not yet been told its roles.

func (b *Broker) Fenced() bool { return b.fence != nil && b.fence.fenced.Load() }

// closeGiven closes the listeners Config gave when Start fails: Start took
// them over.
func closeGiven(ls ...net.Listener) {
	for _, l := range ls {
		if l != nil {
			_ = l.Close()
		}
	}
}

// listen is the listener given, or a new one bound on addr.
func listen(given net.Listener, addr string) (net.Listener, error) {
	if given != nil {
		return given, nil
	}
	return net.Listen("tcp", addr)
}
