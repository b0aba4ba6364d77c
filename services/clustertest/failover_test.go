package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// producer writes values 0..n with acks=all, retrying retriable errors
// against whatever the controller says is the leader, and records what was
// acknowledged and what failed for good.
type producer struct {
	c      *Cluster
	topic  string
	mu     sync.Mutex
	acked  []string
	failed []error
	stop   chan struct{}
	done   chan struct{}
}

func startProducer(c *Cluster, topic string, n int) *producer {
	p := &producer{c: c, topic: topic, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; i < n; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			v := "v" + strconv.Itoa(i)
			deadline := time.Now().Add(20 * time.Second)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := c.Produce(ctx, topic, 0, -1, v)
				cancel()
				if err == nil {
					p.mu.Lock()
					p.acked = append(p.acked, v)
					p.mu.Unlock()
					break
				}
				if !kerr.CodeOf(err).Retriable() || time.Now().After(deadline) {
					p.mu.Lock()
					p.failed = append(p.failed, fmt.Errorf("%s: %w", v, err))
					p.mu.Unlock()
					break
				}
				time.Sleep(25 * time.Millisecond)
			}
		}
	}()
	return p
}

func (p *producer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

func (p *producer) finish(t testing.TB) []string {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.failed) > 0 {
		t.Errorf("%d writes failed after retries, first: %v", len(p.failed), p.failed[0])
	}
	return p.acked
}

// Playbook 1 with the real controller: kill -9 the leader; a new leader from
// the ISR, in assignment order, within a bounded time; no acknowledged
// record lost; the old leader returns, truncates if needed, rejoins the
// ISR; a preferred election hands leadership back.
func TestLeaderCrashFailoverAndPreferredElection(t *testing.T) {
	leaderCrashFailoverAndPreferredElection(t, Options{})
}

// The same playbook with mutual TLS on every link (node to node, node to
// controller, the test's client as admin).
func TestLeaderCrashFailoverAndPreferredElectionOverMutualTLS(t *testing.T) {
	leaderCrashFailoverAndPreferredElection(t, Options{Secure: true})
}

func leaderCrashFailoverAndPreferredElection(t *testing.T, o Options) {
	c := Start(t, o)
	c.CreateTopic("orders", 1, 3, map[string]string{"min.insync.replicas": "2"})
	pd := c.Partition("orders", 0)
	leader, replicas := pd.GetLeader(), pd.GetReplicas()
	if leader != replicas[0] {
		t.Fatalf("initial leader %d is not the preferred replica %v", leader, replicas)
	}
	p := startProducer(c, "orders", 100000)
	c.WaitFor(10*time.Second, "writes before the crash", func() bool { return p.count() >= 50 })

	killed := time.Now()
	c.CrashBroker(leader)
	var newLeader int32
	c.WaitFor(10*time.Second, "a new leader", func() bool {
		newLeader = c.Partition("orders", 0).GetLeader()
		return newLeader >= 0 && newLeader != leader
	})
	took := time.Since(killed)
	if newLeader != replicas[1] {
		t.Fatalf("new leader %d, want %d: the next ISR member in assignment order %v", newLeader, replicas[1], replicas)
	}
	t.Logf("leader %d killed; broker %d leads after %v", leader, newLeader, took.Round(time.Millisecond))
	before := p.count()
	c.WaitFor(15*time.Second, "writes on the new leader", func() bool { return p.count() >= before+50 })

	c.StartBroker(leader)
	c.WaitFor(20*time.Second, "the old leader back in the ISR", func() bool {
		return slices.Contains(c.Partition("orders", 0).GetIsr(), leader)
	})
	resp, err := c.Admin().ElectLeaders(context.Background(), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions:   []*commonv1.TopicPartition{{Topic: "orders", Partition: 0}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("preferred election: %v %v", resp, err)
	}
	c.WaitFor(10*time.Second, "leadership back on the preferred replica", func() bool {
		return c.Partition("orders", 0).GetLeader() == leader
	})
	c.WaitFor(10*time.Second, "writes after the preferred election", func() bool { return p.count() >= before+100 })
	acked := p.finish(t)
	log := c.SameLogs("orders", 0, replicas...)
	AssertAllPresent(t, acked, log)
	t.Logf("%d acknowledged writes, %d records in every replica", len(acked), len(log))
}

// Controlled shutdown: a rolling restart of every broker under acks=all
// traffic costs no write that the producer's retries cannot carry through.
func TestRollingRestartLosesNoWrite(t *testing.T) {
	c := Start(t, Options{})
	c.CreateTopic("roll", 1, 3, map[string]string{"min.insync.replicas": "2"})
	p := startProducer(c, "roll", 100000)
	c.WaitFor(10*time.Second, "first writes", func() bool { return p.count() >= 30 })
	for id := int32(1); id <= 3; id++ {
		if err := c.StopBroker(id); err != nil {
			t.Fatalf("stop broker %d: %v", id, err)
		}
		if l := c.Partition("roll", 0).GetLeader(); l == id {
			t.Fatalf("broker %d still leads after its controlled shutdown", id)
		}
		n := p.count()
		c.WaitFor(15*time.Second, "writes while a broker is down", func() bool { return p.count() >= n+20 })
		c.StartBroker(id)
		c.WaitFor(20*time.Second, fmt.Sprintf("broker %d back in the ISR", id), func() bool {
			return len(c.Partition("roll", 0).GetIsr()) == 3
		})
	}
	acked := p.finish(t)
	AssertAllPresent(t, acked, c.SameLogs("roll", 0, 1, 2, 3))
}

// Controller failover: killing the active controller hands office to the
// standby with controller_epoch + 1, and a leader election still happens
// afterwards.
func TestControllerFailoverThenElection(t *testing.T) {
	c := Start(t, Options{})
	c.CreateTopic("ctl", 1, 3, map[string]string{"min.insync.replicas": "2"})
	active, epoch := c.ActiveController()
	c.StopController(active)
	var next, nextEpoch int32
	c.WaitFor(10*time.Second, "the standby to take office", func() bool {
		next, nextEpoch = c.ActiveController()
		return next >= 0 && next != active
	})
	if nextEpoch != epoch+1 {
		t.Fatalf("controller epoch %d -> %d, want +1", epoch, nextEpoch)
	}
	if _, err := c.Produce(context.Background(), "ctl", 0, -1, "after-failover"); err != nil {
		t.Fatalf("produce after controller failover: %v", err)
	}
	leader := c.Partition("ctl", 0).GetLeader()
	c.CrashBroker(leader)
	// The election is written before the new leader hears of it: wait
	// until the broker itself acts as leader.
	c.WaitFor(10*time.Second, "an election by the new controller", func() bool {
		l := c.Partition("ctl", 0).GetLeader()
		return l >= 0 && l != leader && c.Leads(l, "ctl", 0)
	})
	if _, err := c.Produce(context.Background(), "ctl", 0, -1, "after-election"); err != nil {
		t.Fatalf("produce after the election: %v", err)
	}
}
