package quiet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"tidemark.io/services/clustertest"
)

// Time retention and segment.ms rolls empty an idle topic while its
// brokers restart one right after the other (a follower, then the
// leader), nothing produced throughout. Afterwards every replica agrees
// on the log start offset (the end of what was written), the partition is
// whole (full ISR, HW = LEO), and a consumer positioned at an offset
// retention removed is told OFFSET_OUT_OF_RANGE, resets to the start and
// reads what is written next.
func TestRetentionOnAnIdleTopicAcrossQuickRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for time retention across restarts")
	}
	c := clustertest.Start(t, clustertest.Options{Kafka: true, BrokerSettings: map[string]string{"log.retention.check.interval.ms": "200", "replica.lag.time.max.ms": "1000"}})
	c.CreateTopic("aging", 1, 3, map[string]string{"min.insync.replicas": "2", "retention.ms": "2000", "segment.ms": "500"})
	reps := c.Partition("aging", 0).GetReplicas()
	const n = 5
	for i := range n {
		if _, err := c.Produce(context.Background(), "aging", 0, -1, fmt.Sprintf("old%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitSettled(15*time.Second, "aging", 0, reps)

	// Restarts in quick succession while retention comes due.
	leader := c.Partition("aging", 0).GetLeader()
	for _, id := range reps {
		if id == leader {
			continue
		}
		if err := c.StopBroker(id); err != nil {
			t.Fatal(err)
		}
		c.StartBroker(id)
		break
	}
	if err := c.StopBroker(leader); err != nil {
		t.Fatal(err)
	}
	c.StartBroker(leader)

	waitReplicasAt(c, t, "aging", 0, reps, n, "every replica's log start at the end of what was written, with nothing produced")
	c.WaitSettled(20*time.Second, "aging", 0, reps)

	cl := c.KafkaClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"aging": {0: kgo.NewOffset().At(1)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if _, err := c.Produce(context.Background(), "aging", 0, -1, "new"); err != nil {
		t.Fatalf("acks=all produce after retention: %v", err)
	}
	ctx := clustertest.CtxFor(t, 30*time.Second)
	var got []string
	var offsets []int64
	for len(got) == 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			offsets = append(offsets, r.Offset)
		})
	}
	if len(got) != 1 || got[0] != "new" || offsets[0] != n {
		t.Fatalf("a consumer at offset 1 (deleted) read %v at %v, want [new] at %d after resetting", got, offsets, n)
	}
	c.WaitHWAtLEO("aging", 0, reps...)
	if logs := c.SameLogs("aging", 0, reps...); len(logs) != 1 || logs[0] != "new" {
		t.Fatalf("replicas hold %v, want [new]", logs)
	}
}

// A follower down while records it never saw are written and then
// deleted by time retention comes back, after a quiet spell, with a log
// end below the leader's log start. With nothing produced it must start
// its log over at the leader's log start, rejoin the ISR and agree with
// the others on log start and end; the records it held are no longer
// anybody's.
func TestFollowerBackBelowTheLeadersLogStartRejoinsAnIdleTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for time retention while a follower is down")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: map[string]string{"log.retention.check.interval.ms": "200", "replica.lag.time.max.ms": "1000"}})
	c.CreateTopic("behind", 1, 3, map[string]string{"min.insync.replicas": "2", "retention.ms": "2000", "segment.ms": "500"})
	reps := c.Partition("behind", 0).GetReplicas()
	leader := c.Leader("behind", 0)
	for i := range 3 {
		if _, err := c.Produce(context.Background(), "behind", 0, -1, fmt.Sprintf("seen%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitSettled(15*time.Second, "behind", 0, reps)
	var follower int32
	for _, id := range reps {
		if id != leader {
			follower = id
			break
		}
	}
	c.CrashBroker(follower)
	c.WaitFor(15*time.Second, "the follower out of the ISR", func() bool {
		return len(c.Partition("behind", 0).GetIsr()) == 2
	})
	const n = 8
	for i := 3; i < n; i++ {
		if _, err := c.Produce(context.Background(), "behind", 0, -1, fmt.Sprintf("unseen%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor(30*time.Second, "retention to empty the running replicas", func() bool {
		for _, id := range reps {
			if id == follower {
				continue
			}
			if v, ok := c.View(id, "behind", 0); !ok || v.LogStart != n {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second) // quiet, the follower still down

	c.StartBroker(follower)
	var seen string
	defer func() {
		if t.Failed() {
			t.Logf("replicas last seen: %s", seen)
		}
	}()
	c.WaitFor(30*time.Second, "every replica at log start = LEO = the leader's, with nothing produced", func() bool {
		seen = ""
		ok := true
		for _, id := range reps {
			v, hosted := c.View(id, "behind", 0)
			seen += fmt.Sprintf("broker %d: %v; ", id, v)
			if !hosted || v.LogStart != n || v.LEO != n {
				ok = false
			}
		}
		return ok
	})
	c.WaitSettled(20*time.Second, "behind", 0, reps)
	if _, err := c.Produce(context.Background(), "behind", 0, -1, "new"); err != nil {
		t.Fatalf("acks=all produce after the follower's return: %v", err)
	}
	c.WaitHWAtLEO("behind", 0, reps...)
	if logs := c.SameLogs("behind", 0, reps...); len(logs) != 1 || logs[0] != "new" {
		t.Fatalf("replicas hold %v, want [new]", logs)
	}
}
