package controller

import (
	"net"
	"testing"
	"time"

	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/grpcserver"
)

// freeze plays a broker process that is alive but wedged (a stalled disk, a
// long pause on a busy host): its session stream breaks, its lease is no
// longer renewed, its health check fails, and its address still accepts
// connections.
func (b *fakeBroker) freeze() {
	b.srv.SetServing("", false)
	b.srv.SetServing(grpcserver.IncarnationService(b.brokerEpoch()), false)
	b.silence()
	b.closeSession()
}

// TestFastFailoverNeedsARefusedConnection: a broker whose session broke and
// whose health check times out may be alive behind a partition or paused,
// holding its lease and serving as leader; the controller must leave it to
// its lease (on which the broker fences itself) instead of revoking it and
// electing a second leader beside it.
func TestFastFailoverNeedsARefusedConnection(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1)
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "t", [][]int32{{1, 2, 3}}, nil)
	eventually(t, 10*time.Second, "sessions open", func() bool {
		return c.brokers[1].sessionOpen() && c.brokers[2].sessionOpen() && c.brokers[3].sessionOpen()
	})

	c.brokers[1].mu.Lock()
	reg := c.brokers[1].reg
	c.brokers[1].mu.Unlock()
	frozen := time.Now()
	c.brokers[1].freeze()
	heldUntil := reg.LeaseHeldUntil()
	s := c.waitState("t", 0, 3*brokerTTL, "new leader at lease expiry", func(s metastore.PartitionState) bool { return s.Leader != 1 && s.Leader > 0 })
	elected := time.Now()
	t.Logf("frozen leader replaced after %s (lease %s, held until %s)", elected.Sub(frozen), brokerTTL, heldUntil.Sub(frozen))
	if elected.Before(heldUntil) {
		t.Fatalf("leader %d elected %s before the frozen broker's lease could expire", s.Leader, heldUntil.Sub(elected))
	}
	if n := c.logs.count("declaring it dead now"); n != 0 {
		t.Fatalf("the frozen broker was revoked through fast failover (%d log lines)", n)
	}
	if c.logs.count("not known to be dead", "broker_id=1") != 1 {
		t.Fatal("no log line saying the broker was left to its lease")
	}
}

// TestFastFailoverSeesARestartedProcess: a broker killed and started again
// at once cannot register until its previous incarnation's lease expires,
// and meanwhile it answers at the same address. It does not serve the old
// incarnation's health service, so the controller knows that incarnation
// is gone and elects new leaders at once instead of waiting for the lease.
func TestFastFailoverSeesARestartedProcess(t *testing.T) {
	c := newCluster(t)
	// The grace stays under the lease's TTL, so the election comes from
	// the health check, not the lease.
	c1 := c.startController(1, func(cfg *Config) { cfg.BrokerSessionGrace = 2 * time.Second })
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 3)
	c.createTopic(c1, "t", [][]int32{{1, 2, 3}}, nil)
	eventually(t, 10*time.Second, "sessions open", func() bool {
		return c.brokers[1].sessionOpen() && c.brokers[2].sessionOpen() && c.brokers[3].sessionOpen()
	})

	b := c.brokers[1]
	b.mu.Lock()
	reg, cli := b.reg, b.cli
	b.mu.Unlock()
	killed := time.Now()
	// The old process's listener goes first, and the restarted process
	// serves at the address before the controller sees the session break:
	// the controller probes the address as soon as it does, and a probe
	// that found nothing listening yet would take the process-gone path
	// (connection refused) instead of the one this test is about.
	b.srv.Server.Stop()
	heldUntil := reg.LeaseHeldUntil()
	// The restarted process: serving, but not registered yet.
	var lis net.Listener
	eventually(t, 5*time.Second, "the address to be free again", func() bool {
		var err error
		lis, err = net.Listen("tcp", b.addr)
		return err == nil
	})
	next := grpcserver.New(grpcserver.Options{})
	next.MarkAllServing()
	go func() { _ = next.Serve(lis) }()
	t.Cleanup(next.Server.Stop)
	_ = cli.Close() // the rest of kill: the session breaks
	b.closeSession()

	c.waitState("t", 0, 3*brokerTTL, "new leader", func(s metastore.PartitionState) bool { return s.Leader != 1 && s.Leader > 0 })
	elected := time.Now()
	t.Logf("restarted leader replaced after %s (lease held until %s)", elected.Sub(killed), heldUntil.Sub(killed))
	if c.logs.count("declaring it dead now", "broker_id=1") != 1 || c.logs.count("is not broker epoch") == 0 {
		t.Fatal("the replaced incarnation was not declared dead through fast failover")
	}
}
