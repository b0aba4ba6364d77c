package broker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/grpcapi"
	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// fenceCheckInterval is how often the fence's state is logged and exported
// when it changes. Produce and fetch do not wait for it: they ask the fence
// with the clock read at the call.
const fenceCheckInterval = 50 * time.Millisecond

// leaseMargin is how long before LeaseHeldUntil the broker stops acting as
// leader: it covers a difference in clock rate between this broker and the
// etcd leader of up to 5 % of the TTL (NTP keeps it under 0.05 %), and the
// moments between the fence check and the answer leaving the process.
func leaseMargin(ttl time.Duration) time.Duration {
	return max(ttl/20, 100*time.Millisecond)
}

// leaseFence decides whether this broker may act as a partition leader.
// Leaderships are held under the registration lease: once etcd may have
// expired the lease (the controller then elects other leaders) the broker
// refuses produce and consumer fetches on every partition it leads (but
// where etcd's silence is all of it, the replica manager lets in-sync
// followers vouch for acks=all writes and reads: replica.Fence), until
// etcd confirms the lease again or, when the registration was lost, until
// it has registered again and the controller has told the new incarnation
// its roles (a full LeaderAndIsr for the new broker epoch). See DESIGN.md,
// "Broker liveness".
type leaseFence struct {
	log   *slog.Logger
	gauge prometheus.Gauge
	led   func() int

	// mu orders registration changes with LeaderAndIsr application, so a
	// request of the old incarnation cannot slip in between the new
	// registration and the count of leaderships it starts with. The check
	// itself takes no lock.
	mu        lockorder.Mutex[lockorder.Fence]
	reg       atomic.Pointer[metastore.Registration]
	confirmed atomic.Int64 // newest broker epoch whose roles the controller confirmed

	// whileFenced runs on every check while fenced: parked acks=all
	// writes look again at whether their followers still vouch.
	whileFenced func()

	fenced    atomic.Bool // as last logged and exported
	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

func newLeaseFence(log *slog.Logger, reg prometheus.Registerer, led func() int) *leaseFence {
	f := &leaseFence{log: log, led: led, stop: make(chan struct{}),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_broker_fenced",
			Help: "1 while this broker's registration lease is unconfirmed or lost: it refuses acks=0/1 writes, and acks=all writes and reads of partitions its in-sync followers stopped fetching."})}
	if reg != nil {
		reg.MustRegister(f.gauge)
	}
	return f
}

// start begins logging and exporting the fence's changes from its present
// state (after the first registration, so a starting broker logs nothing).
func (f *leaseFence) start() {
	fenced := f.reason(time.Now()) != ""
	f.fenced.Store(fenced)
	f.gauge.Set(b2f(fenced))
	f.wg.Add(1)
	go f.watch()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Check is the replica manager's LeaderFence: no error while the broker
// may act as leader, else a retriable NOT_LEADER_OR_FOLLOWER without a
// leader hint (the client refreshes its metadata and finds the new
// leader), saying whether etcd's silence is the only reason (the replica
// manager then lets a partition's in-sync followers vouch for it).
func (f *leaseFence) Check() replica.Fence {
	why, silent := f.why(time.Now())
	if why == "" {
		return replica.Fence{}
	}
	return replica.Fence{LeaseSilent: silent,
		Err: kerr.New(kerr.NotLeaderOrFollower, "this broker has fenced itself as leader: %s", why)}
}

// reason says why the broker is fenced at now, or "".
func (f *leaseFence) reason(now time.Time) string {
	why, _ := f.why(now)
	return why
}

// why is reason, and whether the lease being unconfirmed (not lost) is
// all of it.
func (f *leaseFence) why(now time.Time) (string, bool) {
	reg := f.reg.Load()
	if why := f.hardReason(reg); why != "" {
		return why, false
	}
	if now.After(reg.LeaseHeldUntil().Add(-leaseMargin(reg.TTL()))) {
		return fmt.Sprintf("registration lease unconfirmed for %.1f s (TTL %s)",
			now.Sub(reg.LeaseConfirmedAt()).Seconds(), reg.TTL()), true
	}
	return "", false
}

// hardReason is a reason to be fenced that no follower can vouch against:
// no registration, a lost one, or a new one whose roles the controller has
// not confirmed.
func (f *leaseFence) hardReason(reg *metastore.Registration) string {
	if reg == nil {
		return "not registered"
	}
	select {
	case <-reg.Done():
		return "registration lost (" + reg.LostReason() + ")"
	default:
	}
	if c := f.confirmed.Load(); c < reg.Epoch() {
		return fmt.Sprintf("registered again as broker epoch %d; waiting for the controller to confirm its roles", reg.Epoch())
	}
	return ""
}

// registered installs a new registration. A broker that leads nothing has
// no roles to be told again: it acts on the LeaderAndIsr requests that come
// for the new epoch. One that still leads partitions from its previous
// incarnation waits for the controller's full LeaderAndIsr of the new
// epoch, which tells it which of them it still leads.
func (f *leaseFence) registered(reg *metastore.Registration, storeEpoch func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	storeEpoch()
	f.reg.Store(reg)
	if f.led() == 0 {
		f.confirm(reg.Epoch())
	}
}

// confirmIfLeadingNothing confirms the registration once the broker leads
// nothing: its old leaderships were taken away while it was out (its
// partitions moved off it as strays, their topics deleted), so there are
// no roles left to be told, as at registered; a controller with nothing to
// place on it sends it no LeaderAndIsr. The watch calls it on every tick.
func (f *leaseFence) confirmIfLeadingNothing() {
	if reg := f.reg.Load(); reg == nil || f.confirmed.Load() >= reg.Epoch() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if reg := f.reg.Load(); reg != nil && f.confirmed.Load() < reg.Epoch() && f.led() == 0 {
		f.confirm(reg.Epoch())
	}
}

// lost drops the registration: fenced until the next one.
func (f *leaseFence) lost(reg *metastore.Registration) {
	f.reg.CompareAndSwap(reg, nil)
}

func (f *leaseFence) confirm(epoch int64) {
	for {
		cur := f.confirmed.Load()
		if epoch <= cur || f.confirmed.CompareAndSwap(cur, epoch) {
			return
		}
	}
}

// watch logs and exports every change of the fence.
func (f *leaseFence) watch() {
	defer f.wg.Done()
	t := time.NewTicker(fenceCheckInterval)
	defer t.Stop()
	since := time.Now()
	var epoch int64 // the registration's epoch when the fence went up
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		f.confirmIfLeadingNothing()
		if reg := f.reg.Load(); reg != nil && !f.fenced.Load() {
			epoch = reg.Epoch()
		}
		why := f.reason(time.Now())
		fenced := why != ""
		if fenced && f.whileFenced != nil {
			f.whileFenced()
		}
		if fenced == f.fenced.Load() {
			continue
		}
		f.fenced.Store(fenced)
		if fenced {
			f.gauge.Set(1)
			f.log.Warn(fmt.Sprintf("Fencing myself as leader of %d partitions: %s", f.led(), why))
			since = time.Now()
			continue
		}
		f.gauge.Set(0)
		reg := f.reg.Load()
		how := "etcd confirmed the registration lease again"
		if reg.Epoch() != epoch {
			how = fmt.Sprintf("registered as broker epoch %d and the controller told it its roles, or it leads nothing any more", reg.Epoch())
		}
		f.log.Info(fmt.Sprintf("Unfencing: acting as leader of %d partitions again after %.1f s: %s",
			f.led(), time.Since(since).Seconds(), how))
	}
}

func (f *leaseFence) close() {
	f.closeOnce.Do(func() { close(f.stop) })
	f.wg.Wait()
}

// fencedControl applies the controller's pushes, noting when the controller
// has told this incarnation all its roles (a full LeaderAndIsr).
type fencedControl struct {
	*grpcapi.Control
	f *leaseFence
}

func (c fencedControl) LeaderAndIsr(ctx context.Context, req *controlv1.LeaderAndIsrRequest) (*controlv1.LeaderAndIsrResponse, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	resp, err := c.Control.LeaderAndIsr(ctx, req)
	// Only the full push names every role: an incremental one for the new
	// epoch (a partition created meanwhile) may come first, and the broker
	// would then lead on partitions whose leadership moved while it was out.
	if err == nil && resp.GetErrorCode() == 0 && req.GetFull() {
		c.f.confirm(req.GetBrokerEpoch())
	}
	return resp, err
}
