package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/aclsync"
	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/partition"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/conntrack"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/retry"
	"tidemark.io/services/quotasync"
)

// Timings of the broker's link to the cluster.
const (
	sessionReportInterval = 500 * time.Millisecond
	sessionRetry          = 200 * time.Millisecond
	sessionHelloTimeout   = 2 * time.Second
	shutdownAttempts      = 5
	// shutdownAttemptTimeout bounds one ControlledShutdown call.
	shutdownAttemptTimeout = 4 * time.Second
)

// registrar keeps this broker registered in etcd (its lease is the broker's
// liveness; the key's create revision its broker epoch) and keeps a session
// stream open to the active controller, reporting replica progress and
// events. A lost registration is renewed with a new epoch.
type registrar struct {
	b      *Broker
	cli    *clientv3.Client
	store  *metastore.Store
	events *eventBuffer

	mu  lockorder.Mutex[lockorder.Registrar]
	reg *metastore.Registration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startRegistrar(ctx context.Context, b *Broker, events *eventBuffer) (*registrar, error) {
	// The main client's connections are recorded, so that a registration
	// lost over a dead one is made again on a new one (Options.Redial).
	conns := conntrack.NewConns()
	opts := b.cfg.Etcd
	opts.Dialer = conns.Dialer(opts.Dialer)
	cli, err := opts.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", b.cfg.ID, err)
	}
	// Watches get a client of their own, which a silent watch may close
	// and dial again without touching the lease's connection.
	store, err := metastore.New(cli, metastore.Options{Prefix: b.cfg.Etcd.Prefix, Logger: b.log, WatchClient: b.cfg.Etcd.Client, Redial: conns.Close})
	if err != nil {
		cli.Close()
		return nil, err
	}
	r := &registrar{b: b, cli: cli, store: store, events: events}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	// The ACL bindings first: users' requests wait for them (authz
	// StoredBindings), and a fast restart's registration below may wait
	// out its previous lease.
	r.wg.Add(1)
	go func() { defer r.wg.Done(); aclsync.Run(r.ctx, store, b.authz, b.follow, b.log) }()
	// The users' SCRAM credentials too: a SASL login waits for their first
	// load (scramsync.DefaultLoadWait at most).
	r.wg.Add(1)
	go func() { defer r.wg.Done(); b.users.Run(r.ctx, store, b.follow) }()
	// The client quota entities too: the broker registers (and so is
	// given partitions and clients) only once it holds them, so no client
	// is throttled by the static quotas alone for a moment and then by its
	// entity. Later changes, and reloads after a failed watch, replace
	// them whole.
	quotasLoaded := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		quotasync.Run(r.ctx, store, b.quotas, b.follow, b.log, func() { close(quotasLoaded) })
	}()
	if err := r.checkClusterID(ctx); err != nil {
		r.cancel()
		r.wg.Wait()
		cli.Close()
		return nil, err
	}
	if err := waitQuotas(ctx, quotasLoaded); err != nil {
		r.cancel()
		r.wg.Wait()
		cli.Close()
		return nil, err
	}
	if err := r.register(ctx); err != nil {
		r.cancel()
		r.wg.Wait()
		cli.Close()
		return nil, err
	}
	b.fence.start()
	r.wg.Add(3)
	go func() { defer r.wg.Done(); r.keepRegistered() }()
	go func() { defer r.wg.Done(); r.sessionLoop() }()
	go func() { defer r.wg.Done(); b.producerIDs.runPrefetch(r.ctx) }()
	return r, nil
}

// waitQuotas waits for the first load of the client quota entities.
func waitQuotas(ctx context.Context, loaded <-chan struct{}) error {
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("loading the client quota entities from etcd: %w", ctx.Err())
	}
}

// register creates the lease-bound registration, waiting out a previous
// incarnation's lease if it is still live (a fast restart).
func (r *registrar) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*r.b.cfg.SessionTimeout+10*time.Second)
	defer cancel()
	reg, err := r.store.RegisterBroker(ctx, metastore.BrokerInfo{
		ID: r.b.cfg.ID, Address: r.b.Advertised(), Rack: r.b.cfg.Rack,
		StaticConfigs: maps.Clone(r.b.cfg.Settings), Endpoints: r.b.endpoints(),
	}, r.b.cfg.SessionTimeout, metastore.WaitForExpiry())
	if err != nil {
		return fmt.Errorf("registering broker %d in etcd: %w", r.b.cfg.ID, err)
	}
	r.b.fence.registered(reg, func() {
		r.mu.Lock()
		r.reg = reg
		r.mu.Unlock()
		r.fenceOlderControllers(reg)
		old := r.b.epoch.Swap(reg.Epoch())
		if old != 0 {
			r.b.srv.SetServing(grpcserver.IncarnationService(old), false)
		}
		r.b.srv.SetServing(grpcserver.IncarnationService(reg.Epoch()), true)
	})
	r.b.log.Info("registered", "broker_epoch", reg.Epoch(), "session_timeout", r.b.cfg.SessionTimeout)
	if afterRegisterHook != nil {
		afterRegisterHook(r.b, reg.Epoch())
	}
	return nil
}

// afterRegisterHook, when set (by tests), runs once a new broker epoch is
// visible to the control requests' checks.
var afterRegisterHook func(b *Broker, brokerEpoch int64)

// fenceOlderControllers raises the newest controller epoch seen to the one
// etcd held at the registration, before the new broker epoch is stored. A
// new process starts at controller epoch 0, and a deposed controller that
// resumed (a frozen process) learns the new broker epoch from etcd: were it
// stored first, that controller could tell the broker roles from its stale
// view until the active controller's first push.
func (r *registrar) fenceOlderControllers(reg *metastore.Registration) {
	if epoch := reg.ControllerEpoch(); epoch > 0 {
		_ = r.b.meta.CheckControllerEpoch(epoch) // an older one than already seen changes nothing
	}
}

func (r *registrar) current() *metastore.Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reg
}

// keepRegistered re-registers once etcd says the lease is lost (it expired
// during a partition from etcd or a stall, or the controller declared this
// broker dead): the new epoch tells the controller it is a new incarnation
// to be told its role again. A lease that outlived a silence (an etcd
// restart, a cut shorter than the TTL) is kept, with its epoch.
func (r *registrar) keepRegistered() {
	for {
		reg := r.current()
		select {
		case <-r.ctx.Done():
			return
		case <-reg.Done():
		}
		if r.ctx.Err() != nil {
			return
		}
		r.b.fence.lost(reg)
		r.b.log.Warn("registration lost; registering again", "old_broker_epoch", reg.Epoch(), "why", reg.LostReason())
		for r.ctx.Err() == nil {
			if err := r.register(r.ctx); err == nil {
				break
			} else {
				r.b.log.Warn("re-registration failed", "err", err)
			}
			_ = retry.Sleep(r.ctx, time.Second)
		}
	}
}

// controllerClient dials the active controller as etcd names it (the
// truth right after a failover, when the metadata cache may still name the
// dead one), falling back to the metadata cache when etcd does not answer.
func (r *registrar) controllerClient(ctx context.Context) (controlv1.ControllerServiceClient, string, int32, error) {
	addr := ""
	lookup, cancel := context.WithTimeout(ctx, 2*time.Second)
	info, ok, err := r.store.ActiveController(lookup)
	cancel()
	epoch := info.Epoch
	switch {
	case err == nil && ok:
		addr = info.Address
	case err == nil:
		return nil, "", 0, kerr.New(kerr.NotController, "no active controller")
	default:
		if c := r.b.meta.Controller(); c != nil {
			addr = c.GetAddress()
		}
		if addr == "" {
			return nil, "", 0, err
		}
		epoch = r.b.meta.ControllerEpoch()
	}
	conn, err := r.b.peers.Controller(addr)
	if err != nil {
		return nil, "", 0, err
	}
	return controlv1.NewControllerServiceClient(conn), addr, epoch, nil
}

// sessionLoop keeps a BrokerSession stream open to the active controller.
// When the stream breaks the controller may declare this broker dead after
// a short grace period, so it reconnects at once.
func (r *registrar) sessionLoop() {
	for r.ctx.Err() == nil {
		err := r.runSession()
		if r.ctx.Err() != nil {
			return
		}
		r.b.log.Debug("controller session ended", "err", err)
		_ = retry.Sleep(r.ctx, sessionRetry)
	}
}

func (r *registrar) runSession() error {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	client, addr, ctlEpoch, err := r.controllerClient(ctx)
	if err != nil {
		return err
	}
	// The controller answers the hello at once. Without that answer soon
	// the address is stale (a dead controller's, whose host may not even
	// refuse the connection): give up and look again, rather than sit in a
	// connection attempt while the new controller counts this broker's
	// session as broken.
	greeted := make(chan struct{})
	hello := time.AfterFunc(sessionHelloTimeout, func() {
		select {
		case <-greeted:
		default:
			cancel()
		}
	})
	defer hello.Stop()
	stream, err := client.BrokerSession(ctx)
	if err != nil {
		return fmt.Errorf("opening a session to controller %s: %w", addr, err)
	}
	epoch := r.b.epoch.Load()
	if err := stream.Send(&controlv1.BrokerSessionRequest{BrokerId: r.b.cfg.ID, BrokerEpoch: epoch,
		HeldProducerIdBlockEnd: r.b.producerIDs.heldBlockEnd()}); err != nil {
		return err
	}
	recvErr := make(chan error, 1)
	go func() {
		for first := true; ; first = false {
			if _, err := stream.Recv(); err != nil {
				recvErr <- err
				return
			}
			if first {
				close(greeted)
			}
		}
	}()
	select {
	case <-greeted:
	case err := <-recvErr:
		return fmt.Errorf("controller %s did not answer the session hello within %s: %w", addr, sessionHelloTimeout, err)
	}
	r.b.log.Debug("controller session open", "controller", addr, "broker_epoch", epoch)
	t := time.NewTicker(sessionReportInterval)
	defer t.Stop()
	reporter := newProgressReporter()
	newer := r.b.meta.NewerController()
	for {
		select {
		case err := <-recvErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			// A producer id block in hand before the first InitProducerId
			// and through a later etcd outage: asked while a controller
			// answers, until one is held (a no-op when enough are).
			r.b.producerIDs.askPrefetch()
		case <-r.events.notify:
		case <-newer:
			// Armed again before the check below reads the epoch.
			newer = r.b.meta.NewerController()
		}
		if r.b.epoch.Load() != epoch {
			return errors.New("broker epoch changed")
		}
		// A controller that froze (SIGSTOP, a VM paused) keeps this stream
		// open: its connection stalls, nothing closes it. Once this broker
		// has obeyed a newer controller, the session goes to that one, or
		// the new controller would never hear of the replicas that stay
		// idle, nor of this broker's events.
		if latest := r.b.meta.ControllerEpoch(); latest > ctlEpoch {
			r.b.log.Info("controller session moves to the new controller", "old_controller", addr,
				"old_controller_epoch", ctlEpoch, "controller_epoch", latest)
			return fmt.Errorf("controller %s (epoch %d) succeeded by epoch %d", addr, ctlEpoch, latest)
		}
		rep := reporter.next(time.Now(), r.b.progress())
		msg := &controlv1.BrokerSessionRequest{BrokerId: r.b.cfg.ID, BrokerEpoch: epoch,
			Replicas: rep.replicas, FullReport: rep.full, Removed: rep.removed, Events: r.events.drain(),
			OfflineLogDirs: r.b.offlineLogDirs(), HeldProducerIdBlockEnd: r.b.producerIDs.heldBlockEnd()}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
}

// offlineLogDirs lists the offline log dirs with the partitions each held:
// the replica manager's record of the replicas it stopped or could not
// create for want of their dir.
func (b *Broker) offlineLogDirs() []*controlv1.OfflineLogDir {
	offline := b.logs.OfflineDirs()
	refused := b.rm.OfflineReplicas()
	if len(offline) == 0 && len(refused) == 0 {
		return nil
	}
	byDir := map[string]*controlv1.OfflineLogDir{}
	var out []*controlv1.OfflineLogDir
	for _, s := range offline {
		d := &controlv1.OfflineLogDir{Path: s.Dir, Error: s.Err.Error()}
		byDir[s.Dir] = d
		out = append(out, d)
	}
	// A partition refused for a log a replaced dir may have held
	// (replica/lostlogs.go) goes under an entry of its own, marked lost_logs:
	// its data is gone, not unreachable, which lets an unclean election have
	// this broker lead it from empty. Any other refusal is for want of its
	// dir (a dir unreadable since startup holds logs nobody could list) and
	// goes under that dir, or the first offline one.
	lost := map[replica.TP]bool{}
	for _, tp := range b.rm.LostLogRefusals() {
		lost[tp] = true
	}
	var lostDir *controlv1.OfflineLogDir
	for _, tp := range refused {
		ref := &commonv1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
		d := byDir[b.logs.OfflineDirOf(tp)]
		switch {
		case d == nil && lost[tp]:
			if lostDir == nil {
				lostDir = &controlv1.OfflineLogDir{Path: strings.Join(b.replacedDirs, ","), LostLogs: true,
					Error: "replaced log dir: no log here for these partitions, which it may have held; not leading them or in their ISR with an empty log"}
			}
			lostDir.Partitions = append(lostDir.Partitions, ref)
			continue
		case d == nil && len(out) > 0:
			d = out[0]
		case d == nil:
			d = &controlv1.OfflineLogDir{Path: strings.Join(b.replacedDirs, ","),
				Error: "replaced log dir: no log here for these partitions, which it may have held; not leading them or in their ISR with an empty log"}
			out = append(out, d)
		}
		d.Partitions = append(d.Partitions, ref)
	}
	if lostDir != nil {
		out = append(out, lostDir)
	}
	return out
}

// progress lists every hosted replica's positions; a progressReporter
// picks what the controller has not heard yet.
func (b *Broker) progress() []hostedProgress {
	now := time.Now()
	var out []hostedProgress
	for _, rep := range b.rm.Replicas() {
		s := rep.Snapshot(now)
		p := &controlv1.ReplicaProgress{
			Topic: rep.TP().Topic, Partition: rep.TP().Partition, BrokerId: b.cfg.ID,
			LogEndOffset: s.LogEndOffset, HighWatermark: s.HighWatermark, LogStartOffset: s.LogStartOffset,
			LeaderEpoch: s.LeaderEpoch, Leader: s.Role == partition.RoleLeader,
		}
		// Reassignment progress compares an adding replica's bytes with
		// its leader's (ListPartitionReassignments).
		if st, ok := rep.Log().(interface{ Stats() logstore.Stats }); ok {
			p.SizeBytes = st.Stats().SizeBytes
		}
		if p.Leader {
			p.MaximalIsr = s.MaximalISR
			for _, f := range s.Followers {
				p.Followers = append(p.Followers, &controlv1.FollowerProgress{BrokerId: f.ID, LogEndOffset: f.LogEndOffset, LagMs: f.CaughtUpAgeMs})
			}
		}
		out = append(out, hostedProgress{instance: rep, p: p})
	}
	return out
}

// controlledShutdown asks the controller to move this broker's leaderships
// to other in-sync replicas before it stops, retrying while some remain.
func (r *registrar) controlledShutdown(ctx context.Context) {
	budget := 15 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		// Leave half of the caller's deadline to the rest of the stop
		// (the server's drain, the logs' flush, the deregistration).
		budget = min(budget, time.Until(dl)/2)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	for attempt := 1; attempt <= shutdownAttempts && ctx.Err() == nil; attempt++ {
		// A frozen controller holds the call open: give each attempt a
		// bound, and give it up once a newer controller has spoken.
		newer := r.b.meta.NewerController()
		actx, acancel := context.WithTimeout(ctx, shutdownAttemptTimeout)
		go func() {
			select {
			case <-newer:
				acancel()
			case <-actx.Done():
			}
		}()
		client, _, _, err := r.controllerClient(actx)
		if err == nil {
			var resp *controlv1.ControlledShutdownResponse
			resp, err = client.ControlledShutdown(actx, &controlv1.ControlledShutdownRequest{BrokerId: r.b.cfg.ID, BrokerEpoch: r.b.epoch.Load()})
			if err == nil && kerr.Code(resp.GetErrorCode()) == kerr.None {
				if len(resp.GetRemainingPartitions()) == 0 {
					acancel()
					r.b.log.Info("controlled shutdown complete: no leaderships left")
					return
				}
				err = fmt.Errorf("%d partitions still led here", len(resp.GetRemainingPartitions()))
			} else if err == nil {
				err = kerr.New(kerr.Code(resp.GetErrorCode()), "controlled shutdown refused")
			}
		}
		acancel()
		if err != nil && kerr.CodeOf(kerr.FromStatus(err)) == kerr.StaleBrokerEpoch {
			// This incarnation is not registered any more: the controller
			// has moved its leaderships already, and will refuse again.
			r.b.log.Warn("controlled shutdown refused: this broker's registration is gone", "err", err)
			return
		}
		r.b.log.Warn("controlled shutdown attempt failed", "attempt", attempt, "err", err)
		_ = retry.Sleep(ctx, time.Second)
	}
	r.b.log.Warn("proceeding with an uncontrolled shutdown")
}

// close leaves the cluster: the registration is revoked at once.
func (r *registrar) close(ctx context.Context) error {
	r.cancel()
	r.wg.Wait()
	var err error
	if reg := r.current(); reg != nil {
		// One etcd call: an etcd out of reach must not hold the stop to
		// its deadline (the lease then expires on its own).
		rctx, cancel := context.WithTimeout(ctx, deregisterReserve)
		if err = reg.Close(rctx); err != nil && rctx.Err() != nil && ctx.Err() == nil {
			r.b.log.Warn("could not deregister: etcd did not answer; the registration expires with its lease",
				"broker_epoch", reg.Epoch(), "ttl", reg.TTL(), "err", err)
			err = nil
		}
		cancel()
	}
	return errors.Join(err, r.cli.Close())
}

// abandon stops everything without revoking the lease, as a crash would:
// the registration expires after broker.session.timeout.ms.
func (r *registrar) abandon() {
	r.cancel()
	r.wg.Wait()
	_ = r.cli.Close()
}
