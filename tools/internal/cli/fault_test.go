package cli_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// faultCluster is a cluster whose brokers serve the fault-injection API and
// drop a follower that has not caught up for 2 s from the ISR, with the
// topic "links": one partition led by broker 1, followed by 2 and 3.
func faultCluster(t *testing.T) *tcluster {
	t.Helper()
	c := startClusterWith(t, clustertest.Options{
		BrokerSettings: map[string]string{"replica.lag.time.max.ms": "2000"},
		Adjust:         func(cfg *broker.Config) { cfg.FaultInjection = true },
	})
	c.run(t, "", "topics", "create", "--topic", "links", "--replica-assignment", "1:2:3", "--config", "min.insync.replicas=2").ok(t)
	c.waitISR(t, "links-0 led by broker 1 with ISR 1,2,3", 1, 2, 3)
	for i := range 5 {
		if _, err := c.Produce(context.Background(), "links", 0, -1, fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitHWAtLEO("links", 0, 1, 2, 3)
	return c
}

// waitISR waits until links-0 is led by broker 1 with exactly the ISR isr,
// as the controller describes it.
func (c *tcluster) waitISR(t *testing.T, what string, isr ...int32) {
	t.Helper()
	c.WaitFor(20*time.Second, what, func() bool {
		p := c.Partition("links", 0)
		got := slices.Sorted(slices.Values(p.GetIsr()))
		return p.GetLeader() == 1 && slices.Equal(got, isr)
	})
}

// writes produces acks=all records to links-0 until stopped, and counts
// the acknowledged ones.
type writes struct {
	acked atomic.Int64
	stop  chan struct{}
	done  sync.WaitGroup
}

func startWrites(c *tcluster, tag string) *writes {
	w := &writes{stop: make(chan struct{})}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			if _, err := c.Produce(ctx, "links", 0, -1, fmt.Sprintf("%s-%d", tag, i)); err == nil {
				w.acked.Add(1)
			}
			cancel()
		}
	}()
	return w
}

func (w *writes) finish() {
	close(w.stop)
	w.done.Wait()
}

// leo is broker id's LEO of links-0.
func (c *tcluster) leo(t *testing.T, id int32) int64 {
	t.Helper()
	_, leo, ok := c.Broker(id).ReplicaOffsets("links", 0)
	if !ok {
		t.Fatalf("broker %d has no replica of links-0", id)
	}
	return leo
}

// §7.3 (③): the link between broker 1 and broker 2 breaks while both
// still reach etcd and the controller. With `tidemark fault cut` from
// leader 1 to follower 2, broker 2 stops fetching and leaves the ISR while
// broker 3 stays and acks=all writes go on; healed, it catches up and
// rejoins, every replica at HW = LEO. The same both ways, healed by
// `tidemark fault clear`.
func TestFaultCutLinkTakesTheFollowerOutOfTheISR(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := faultCluster(t)

	t.Run("one way: leader 1 cannot reach follower 2", func(t *testing.T) {
		r := c.run(t, "", "fault", "cut", "--from", "1", "--to", "2").ok(t)
		contains(t, r.out, "link 1 → 2 cut: nothing broker 1 sends reaches broker 2")
		r = c.run(t, "", "fault", "list").ok(t)
		contains(t, r.out, "BROKER  FAULT\n1       link 1 → 2 cut\n")
		if strings.Contains(r.out, "2 → 1") {
			t.Fatalf("a one-way cut listed the other way too:\n%s", r.out)
		}

		w := startWrites(c, "cut")
		start := time.Now()
		c.waitISR(t, "broker 2 out of the ISR, broker 3 in it, leader still 1", 1, 3)
		t.Logf("broker 2 left the ISR %s after the cut", time.Since(start).Round(time.Millisecond))
		// Broker 2 fetches nothing while the leader takes writes and broker
		// 3 copies them.
		acked, stuck, lead := w.acked.Load(), c.leo(t, 2), c.leo(t, 1)
		time.Sleep(time.Second)
		if got := c.leo(t, 2); got != stuck {
			t.Fatalf("cut-off broker 2's LEO moved from %d to %d", stuck, got)
		}
		if c.leo(t, 1) <= lead || w.acked.Load() <= acked {
			t.Fatalf("no acks=all write went on without broker 2 (leader LEO %d then %d, acked %d then %d)", lead, c.leo(t, 1), acked, w.acked.Load())
		}
		if c.leo(t, 3) <= stuck {
			t.Fatalf("broker 3's LEO %d is not past cut-off broker 2's %d", c.leo(t, 3), stuck)
		}
		w.finish()

		r = c.run(t, "", "fault", "heal", "--from", "1", "--to", "2").ok(t)
		contains(t, r.out, "link 1 → 2 healed")
		c.waitISR(t, "broker 2 back in the ISR", 1, 2, 3)
		c.WaitHWAtLEO("links", 0, 1, 2, 3)
		if r := c.run(t, "", "fault", "list").ok(t); r.out != "BROKER  FAULT\n" {
			t.Fatalf("faults left after the heal:\n%s", r.out)
		}
	})

	t.Run("one way: follower 2 cannot reach leader 1", func(t *testing.T) {
		c.run(t, "", "fault", "cut", "--from", "2", "--to", "1").ok(t)
		w := startWrites(c, "back")
		c.waitISR(t, "broker 2 out of the ISR, broker 3 in it, leader still 1", 1, 3)
		w.finish()
		c.run(t, "", "fault", "heal", "--from", "2", "--to", "1").ok(t)
		c.waitISR(t, "broker 2 back in the ISR", 1, 2, 3)
		c.WaitHWAtLEO("links", 0, 1, 2, 3)
	})

	t.Run("both ways, healed by clear", func(t *testing.T) {
		r := c.run(t, "", "fault", "cut", "--from", "1", "--to", "2", "--both").ok(t)
		contains(t, r.out, "link 1 → 2 cut", "link 2 → 1 cut")
		r = c.run(t, "", "fault", "list", "--broker", "2").ok(t)
		if r.out != "BROKER  FAULT\n2       link 2 → 1 cut\n" {
			t.Fatalf("broker 2's faults:\n%s", r.out)
		}
		w := startWrites(c, "both")
		c.waitISR(t, "broker 2 out of the ISR, broker 3 in it, leader still 1", 1, 3)
		w.finish()
		r = c.run(t, "", "fault", "clear").ok(t)
		contains(t, r.out, "broker 1: faults cleared, links healed", "broker 2: faults cleared, links healed", "broker 3: faults cleared, links healed")
		c.waitISR(t, "broker 2 back in the ISR", 1, 2, 3)
		c.WaitHWAtLEO("links", 0, 1, 2, 3)
	})

	t.Run("refusals", func(t *testing.T) {
		c.run(t, "", "fault", "cut", "--from", "9", "--to", "1").fails(t, cli.ExitFailed, "broker 9 is not in the cluster")
	})
}

// §7.1 (①): a slow follower. `tidemark fault slow` makes broker 3 wait
// before each fetch (the console's and REST's delayMs); a delay longer than
// replica.lag.time.max.ms under steady writes takes it out of the ISR, and
// `tidemark fault clear` lets it back.
func TestFaultSlowFollowerLeavesTheISR(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := faultCluster(t)

	r := c.run(t, "", "fault", "slow", "--broker", "3", "--delay", "3s", "--topic", "links").ok(t)
	contains(t, r.out, "broker 3: fetches of links-* delayed 3000 ms")
	r = c.run(t, "", "fault", "list", "--broker", "3").ok(t)
	if r.out != "BROKER  FAULT\n3       fetches of links-* delayed 3000 ms\n" {
		t.Fatalf("broker 3's faults:\n%s", r.out)
	}
	w := startWrites(c, "slow")
	c.waitISR(t, "slow broker 3 out of the ISR", 1, 2)
	w.finish()
	c.run(t, "", "fault", "clear", "--broker", "3").ok(t)
	c.waitISR(t, "broker 3 back in the ISR", 1, 2, 3)
	c.WaitHWAtLEO("links", 0, 1, 2, 3)

	r = c.run(t, "", "fault", "stall", "--broker", "2", "--topic", "links", "--partition", "0").ok(t)
	contains(t, r.out, "broker 2: fetches of links-0 stalled")
	c.run(t, "", "fault", "clear").ok(t)
	if r := c.run(t, "", "fault", "list").ok(t); r.out != "BROKER  FAULT\n" {
		t.Fatalf("faults left after clear:\n%s", r.out)
	}
}

// brokerAlive is whether the controller counts broker id alive.
func (c *tcluster) brokerAlive(t *testing.T, id int32) bool {
	t.Helper()
	desc, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
	if err != nil {
		return false
	}
	for _, b := range desc.GetBrokers() {
		if b.GetNode().GetId() == id {
			return b.GetAlive()
		}
	}
	return false
}

// §7.3 (② ③): `tidemark fault isolate` cuts leader 1 off from etcd and the
// controllers. Its lease runs out, so the controller counts it dead and
// elects another leader with a higher leader epoch; `fault list` and
// `fault heal-isolation` still find it at its last address, and once healed
// it follows and the partition is whole. A follower isolated with --peers
// (from the other brokers too) leaves the ISR, `fault list` says so, and
// `fault clear` brings it back.
func TestFaultIsolateMovesTheLeadershipUntilHealed(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := faultCluster(t)
	epoch := c.Partition("links", 0).GetLeaderEpoch()

	r := c.run(t, "", "fault", "isolate", "--broker", "1").ok(t)
	contains(t, r.out, "broker 1: isolated from etcd and the controllers")
	c.WaitFor(20*time.Second, "another leader with a higher epoch, broker 1 dead to the controller", func() bool {
		p := c.Partition("links", 0)
		return p.GetLeader() > 1 && p.GetLeaderEpoch() > epoch && !c.brokerAlive(t, 1)
	})
	r = c.run(t, "", "fault", "list").ok(t)
	contains(t, r.out, "1       isolated from etcd and the controllers\n")
	r = c.run(t, "", "fault", "heal-isolation", "--broker", "1").ok(t)
	contains(t, r.out, "broker 1: isolation healed")
	whole := func(what string) {
		t.Helper()
		c.WaitFor(30*time.Second, what, func() bool {
			p := c.Partition("links", 0)
			return p.GetLeader() > 0 && len(p.GetIsr()) == 3
		})
		if _, err := c.Produce(context.Background(), "links", 0, -1, "after"); err != nil {
			t.Fatal(err)
		}
		c.WaitHWAtLEO("links", 0, 1, 2, 3)
		c.SameLogs("links", 0, 1, 2, 3)
	}
	whole("broker 1 back in the ISR")
	if c.Leads(1, "links", 0) {
		t.Fatal("healed broker 1 leads again")
	}
	if r := c.run(t, "", "fault", "list").ok(t); r.out != "BROKER  FAULT\n" {
		t.Fatalf("faults left after the heal:\n%s", r.out)
	}

	r = c.run(t, "", "fault", "isolate", "--broker", "1", "--peers").ok(t)
	contains(t, r.out, "broker 1: isolated from etcd, the controllers and the other brokers")
	c.WaitFor(20*time.Second, "isolated follower 1 out of the ISR", func() bool {
		return !slices.Contains(c.Partition("links", 0).GetIsr(), 1) && !c.brokerAlive(t, 1)
	})
	r = c.run(t, "", "fault", "list", "--broker", "1").ok(t)
	contains(t, r.out, "1       isolated from etcd, the controllers and the other brokers\n")
	r = c.run(t, "", "fault", "clear").ok(t)
	contains(t, r.out, "broker 1: faults cleared, links healed", "broker 2: faults cleared, links healed", "broker 3: faults cleared, links healed")
	whole("broker 1 back in the ISR after fault clear")
}
