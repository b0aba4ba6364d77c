package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/client"
)

// Followers drop the pages behind their tail (log.follower.cached.bytes at
// its 4 MiB floor, on real files). The follower that then leads serves every
// acknowledged record, read back from the disk; when the old leader returns
// the partition is whole again (full ISR, HW = LEO on every replica, same
// logs) and stays so through a quiet spell.
func TestFollowerThatDroppedItsPagesLeadsWithEveryRecord(t *testing.T) {
	c := Start(t, Options{BrokerSettings: map[string]string{"log.follower.cached.bytes": "4194304"},
		Adjust: func(cfg *broker.Config) { cfg.Telemetry.MetricsListen = "127.0.0.1:0" }})
	c.CreateTopic("drop", 1, 3, map[string]string{"min.insync.replicas": "2"})
	reps := c.Partition("drop", 0).GetReplicas()
	leader := c.Leader("drop", 0)

	// 12 MiB acknowledged by all: three times the tail each follower keeps.
	cl := c.Client()
	p, err := client.NewProducer(cl, client.ProducerOptions{Acks: client.AcksAll})
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 4096)
	var acked []string
	failed := make(chan error, 3000)
	for i := range 3000 {
		v := fmt.Sprintf("d%05d-%s", i, pad)
		p.ProduceAsync(client.Record{Topic: "drop", Partition: 0, ManualPartition: true, Value: []byte(v)},
			func(_ client.Result, err error) {
				if err != nil {
					failed <- err
				}
			})
		acked = append(acked, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), <-failed)
	}
	for _, id := range reps {
		if id == leader {
			continue
		}
		c.WaitFor(10*time.Second, fmt.Sprintf("follower %d dropping pages behind its tail", id), func() bool {
			return c.Metric(id, "tidemark_log_follower_cache_dropped_bytes_total") >= 4<<20
		})
	}
	if got := c.Metric(leader, "tidemark_log_follower_cache_dropped_bytes_total"); got != 0 {
		t.Fatalf("the leader dropped %v bytes of its pages", got)
	}

	c.CrashBroker(leader)
	var next int32
	c.WaitFor(15*time.Second, "a new leader", func() bool {
		next = c.Partition("drop", 0).GetLeader()
		return next >= 0 && next != leader
	})
	if got := c.consumeAll("drop", 0, int64(len(acked))); !slices.Equal(got, acked) {
		t.Fatalf("new leader %d served %d records, want the %d acknowledged in order", next, len(got), len(acked))
	}

	c.StartBroker(leader)
	whole := func() bool {
		if len(c.Partition("drop", 0).GetIsr()) != 3 {
			return false
		}
		for _, id := range reps {
			hw, leo, ok := c.Broker(id).ReplicaOffsets("drop", 0)
			if !ok || hw != leo || leo != int64(len(acked)) {
				return false
			}
		}
		return true
	}
	c.WaitFor(20*time.Second, "full ISR and HW = LEO on every replica", whole)
	time.Sleep(2 * time.Second) // nothing happens for a while
	if !whole() {
		t.Fatalf("after a quiet spell: ISR %v, or a replica's HW is not its LEO", c.Partition("drop", 0).GetIsr())
	}
	AssertAllPresent(t, acked, c.SameLogs("drop", 0, reps...))
}

// consumeAll reads the partition from offset 0 to its high watermark from
// its leader, fetch after fetch, once the leader the controller names has
// taken over (its LeaderAndIsr may still be on the way) and its high
// watermark covers want records (a new leader learns the HW from its
// followers' next fetches).
func (c *Cluster) consumeAll(topic string, p int32, want int64) []string {
	c.T.Helper()
	var leader int32
	c.WaitFor(15*time.Second, fmt.Sprintf("the leader of %s-%d serving %d records", topic, p, want), func() bool {
		leader = c.Partition(topic, p).GetLeader()
		if leader < 0 {
			return false
		}
		resp, err := c.BrokerClient(leader).Fetch(context.Background(), &brokerv1.FetchRequest{
			Topic: topic, Partition: p, Offset: 0, CurrentLeaderEpoch: -1, MaxBytes: 1024})
		return err == nil && resp.GetHighWatermark() >= want
	})
	var out []string
	for offset := int64(0); ; {
		resp, err := c.BrokerClient(leader).Fetch(context.Background(), &brokerv1.FetchRequest{
			Topic: topic, Partition: p, Offset: offset, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20})
		if err != nil {
			c.T.Fatalf("consumer fetch at %d from broker %d: %v", offset, leader, err)
		}
		for _, r := range resp.GetRecords() {
			if r.GetOffset() >= offset {
				out = append(out, string(r.GetValue()))
				offset = r.GetOffset() + 1
			}
		}
		if offset >= resp.GetHighWatermark() || len(resp.GetRecords()) == 0 {
			return out
		}
	}
}
