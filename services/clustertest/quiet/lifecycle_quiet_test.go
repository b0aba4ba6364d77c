package quiet

import (
	"context"
	"testing"
	"time"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
)

// A SIGTERM while the active controller is frozen (SIGSTOP: its
// connections stall open) and a standby takes office within about a
// second: the broker's controlled shutdown gives up the call to the frozen
// controller once the new one speaks, moves its leaderships through it and
// stops cleanly, deregistered, within the process's 15 s. Before, the one
// call held the whole budget and the stop failed.
func TestControlledShutdownDuringControllerFreeze(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Controllers: 2, PausableControllers: true})
	c.CreateTopic("cs", 1, 3, nil)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("cs", 0).GetIsr()) == 3 })
	leader := c.Leader("cs", 0)
	active, epoch := c.ActiveController()
	c.PauseController(active)
	defer c.ResumeController(active)

	// As lifecycle.WaitAndStop does on SIGTERM: 15 s for the whole stop.
	b := c.TakeBroker(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		id, e := c.ActiveController()
		t.Fatalf("graceful stop during a controller failover failed: %v (active controller now %d epoch %d, was %d epoch %d)", err, id, e, active, epoch)
	}
}

// A leader cut off from etcd past its lease (the controllers still
// reach it) returns, and nothing is produced afterwards: it must register
// again, follow, rejoin the ISR, be unfenced, and every replica must reach
// HW = LEO without new traffic.
func TestQuietReturnAfterLostLease(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Controllers: 2})
	c.CreateTopic("quiet", 1, 3, map[string]string{"min.insync.replicas": "2"})
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("quiet", 0).GetIsr()) == 3 })
	old := c.Leader("quiet", 0)
	for i := 0; i < 5; i++ {
		if _, err := c.Produce(context.Background(), "quiet", 0, -1, "v"); err != nil {
			t.Fatal(err)
		}
	}
	c.EtcdLink(old).Pause()
	c.WaitFor(20*time.Second, "another leader", func() bool {
		l := c.Partition("quiet", 0).GetLeader()
		return l > 0 && l != old
	})
	// A few acks=1 writes to the new leader while the old one is away.
	newLeader := c.Partition("quiet", 0).GetLeader()
	c.WaitFor(10*time.Second, "new leader acting", func() bool { return c.Leads(newLeader, "quiet", 0) })
	for i := 0; i < 3; i++ {
		if _, err := c.Produce(context.Background(), "quiet", 0, 1, "w"); err != nil {
			t.Fatal(err)
		}
	}
	c.EtcdLink(old).Resume()
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return len(c.Partition("quiet", 0).GetIsr()) == 3
	})
	c.WaitFor(5*time.Second, "old leader unfenced", func() bool { return !c.Broker(old).Fenced() })
	c.WaitHWAtLEO("quiet", 0, 1, 2, 3)
	for id := int32(1); id <= 3; id++ {
		isr, _ := c.ReplicaISR(id, "quiet", 0)
		t.Logf("broker %d: isr %v fenced %v", id, isr, c.Broker(id).Fenced())
	}
}

// The sole replica's broker loses its lease (etcd link cut past the
// TTL) and returns; nothing is produced afterwards. It must lead again,
// unfenced, with HW = LEO.
func TestQuietReturnOfSoleReplica(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 2, Controllers: 1})
	clustertest.CreateAssigned(t, c, "solo", [][]int32{{1}}, nil)
	for i := 0; i < 5; i++ {
		if _, err := c.Produce(context.Background(), "solo", 0, -1, "v"); err != nil {
			t.Fatal(err)
		}
	}
	// Let the HW checkpoint and everything settle, then cut etcd.
	c.EtcdLink(1).Pause()
	c.WaitFor(20*time.Second, "solo offline", func() bool { return c.Partition("solo", 0).GetLeader() < 0 })
	c.EtcdLink(1).Resume()
	c.WaitFor(20*time.Second, "broker 1 leads solo again", func() bool {
		return c.Partition("solo", 0).GetLeader() == 1 && c.Leads(1, "solo", 0)
	})
	c.WaitFor(5*time.Second, "unfenced", func() bool { return !c.Broker(1).Fenced() })
	c.WaitFor(10*time.Second, "HW = LEO = 5", func() bool {
		hw, leo, ok := c.Broker(1).ReplicaOffsets("solo", 0)
		return ok && hw == 5 && leo == 5
	})
	if _, err := c.Produce(context.Background(), "solo", 0, -1, "after"); err != nil {
		t.Fatal(err)
	}
}

// A leader killed and started again twice within its session timeout, the
// second incarnation killed while it waits out the first's lease; then
// nothing is produced: the ISR becomes whole again, the broker unfenced and
// every replica's HW reaches the LEO without new traffic.
func TestLeaderRestartedTwiceWithinTTL(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Adjust: func(cfg *broker.Config) { cfg.SessionTimeout = 4 * time.Second }})
	c.CreateTopic("twice", 1, 3, map[string]string{"min.insync.replicas": "2"})
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("twice", 0).GetIsr()) == 3 })
	old := c.Leader("twice", 0)
	for i := 0; i < 5; i++ {
		if _, err := c.Produce(context.Background(), "twice", 0, -1, "v"); err != nil {
			t.Fatal(err)
		}
	}
	c.CrashBroker(old)
	// A second incarnation that never gets to register: killed while it
	// waits out the first one's lease.
	cfg := c.BrokerConfig(old)
	cfg.Listener, cfg.KafkaListener = nil, nil
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	if b, err := broker.Start(ctx, cfg, nil); err == nil {
		b.Crash() // it registered within 500 ms after all
	}
	cancel()
	c.StartBroker(old)
	c.CrashBroker(old)
	c.StartBroker(old)
	c.WaitFor(30*time.Second, "full ISR again", func() bool { return len(c.Partition("twice", 0).GetIsr()) == 3 })
	c.WaitFor(5*time.Second, "unfenced", func() bool { return !c.Broker(old).Fenced() })
	c.WaitHWAtLEO("twice", 0, 1, 2, 3)
	if _, err := c.Produce(context.Background(), "twice", 0, -1, "after"); err != nil {
		t.Fatal(err)
	}
}

// A SIGTERM while the broker is cut off from etcd (the controllers still
// reach it): the leadership moves through the controller, and the
// deregistration etcd cannot hear is bounded (the lease expires by itself),
// so the stop succeeds. Before, it waited out its whole deadline and failed.
func TestStopWhileCutOffFromEtcd(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3})
	c.CreateTopic("cut", 1, 3, nil)
	c.WaitFor(10*time.Second, "full ISR", func() bool { return len(c.Partition("cut", 0).GetIsr()) == 3 })
	leader := c.Leader("cut", 0)
	c.EtcdLink(leader).Pause()
	defer c.EtcdLink(leader).Resume()
	b := c.TakeBroker(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		t.Fatalf("stop while cut off from etcd: %v", err)
	}
	c.WaitFor(10*time.Second, "a new leader", func() bool {
		l := c.Partition("cut", 0).GetLeader()
		return l >= 0 && l != leader
	})
}
