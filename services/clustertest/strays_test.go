package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest/history"
)

// A topic deleted while one of its replicas' brokers is down leaves that
// broker's log behind. When a topic of the same name is created again on
// that broker and written before the broker first reaches the new leader,
// the old log must not be taken for the new topic's: one leader epoch 0
// looks like the other, so the follower would truncate the old log to the
// new leader's end and keep old records at offsets where the leader holds
// new ones, a divergence no truncation rule sees. Two guards: the broker's
// sweep of logs whose topic is gone when it first learns the metadata, and
// the topic id recorded with each log (KIP-516; the replica package tests
// that one, since the sweep leaves no stray for it here).
func TestRecreatedTopicNeverReopensAStrayLog(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	create := func() {
		t.Helper()
		resp, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{TimeoutMs: 10000, Topics: []*adminv1.TopicSpec{{
			Name: "reborn", Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2, 3}}}}}})
		if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
			t.Fatalf("create: %v %v", resp, err)
		}
	}
	create()
	for i := range 6 {
		if _, err := c.Produce(context.Background(), "reborn", 0, -1, fmt.Sprintf("old-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.SameLogs("reborn", 0, 1, 2, 3)
	oldID := c.topicID("reborn")

	// Broker 3 is away while the topic is deleted: its log stays on disk.
	c.CrashBroker(3)
	if _, err := c.Admin().DeleteTopics(context.Background(), &adminv1.DeleteTopicsRequest{Topics: []string{"reborn"}, TimeoutMs: 10000}); err != nil {
		t.Fatal(err)
	}
	// Looked at before the start: the broker sweeps it as soon as it
	// learns the metadata, which may come before StartBroker returns.
	seg := filepath.Join(c.BrokerConfig(3).DataDir, "reborn-0", "00000000000000000000.log")
	if st, err := os.Stat(seg); err != nil || st.Size() == 0 {
		t.Fatalf("broker 3's stray log: %v %v (the test needs one)", st, err)
	}
	c.StartBroker(3)

	// The same name again, written (fewer records than the stray holds)
	// while broker 3 cannot reach the other brokers yet.
	c.Net.Partition(BrokerName(3), BrokerName(1))
	c.Net.Partition(BrokerName(3), BrokerName(2))
	// The new assignment names broker 3: the controller must count it
	// alive again (its previous lease gone and the new one taken).
	c.WaitBrokerAlive(3)
	create()
	if id := c.topicID("reborn"); id == "" || id == oldID {
		t.Fatalf("the new topic's id is %q, the old one's %q", id, oldID)
	}
	for i := range 3 {
		if _, err := c.Produce(context.Background(), "reborn", 0, 1, fmt.Sprintf("new-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Net.HealAll()
	logs := c.SameLogs("reborn", 0, 1, 2, 3)
	if want := []string{"new-0", "new-1", "new-2"}; !slices.Equal(logs, want) {
		t.Fatalf("the replicas hold %v, want %v", logs, want)
	}
	c.WaitFor(20*time.Second, "a full ISR", func() bool { return len(c.Partition("reborn", 0).GetIsr()) == 3 })
}

func (c *Cluster) topicID(name string) string {
	c.T.Helper()
	resp, err := c.Admin().DescribeTopics(context.Background(), &adminv1.DescribeTopicsRequest{Topics: []string{name}})
	if err != nil || len(resp.GetTopics()) != 1 {
		c.T.Fatalf("describe %s: %v %v", name, resp, err)
	}
	return resp.GetTopics()[0].GetTopicId()
}

// A topic deleted and created again at once, round after round, ends with
// one log per replica holding only the last incarnation's records, which
// survive a quiet spell and a crash of every broker in turn, and no other
// directory of the name. Liveness afterwards: a leader, the full ISR, and
// HW = LEO on every replica. (DeleteTopics answers once the replicas are
// deleted, so here a creation never meets a deletion still under way on a
// broker; logstore's TestManagerDeleteInFlightHoldsUpAbandonAndRecreation
// covers that.)
func TestTopicDeletedAndRecreatedInQuickSuccession(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	ctx := context.Background()
	for round := range 4 {
		c.CreateTopic("again", 1, 3, nil)
		for i := range 3 {
			if _, err := c.Produce(ctx, "again", 0, -1, fmt.Sprintf("r%d-%d", round, i)); err != nil {
				t.Fatalf("round %d, produce %d: %v", round, i, err)
			}
		}
		resp, err := c.Admin().DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: []string{"again"}, TimeoutMs: 10000})
		if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
			t.Fatalf("round %d, delete: %v %v", round, resp, err)
		}
	}
	c.CreateTopic("again", 1, 3, nil)
	want := []string{"last-0", "last-1", "last-2"}
	for _, v := range want {
		if _, err := c.Produce(ctx, "again", 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	time.Sleep(time.Second) // nothing happens for a while
	for id := int32(1); id <= 3; id++ {
		c.CrashBroker(id)
		c.StartBroker(id)
		c.WaitBrokerAlive(id)
		c.WaitFor(20*time.Second, fmt.Sprintf("a full ISR after broker %d's restart", id), func() bool {
			p := c.Partition("again", 0)
			return p.GetLeader() >= 0 && len(p.GetIsr()) == 3
		})
	}
	if logs := c.SameLogs("again", 0, 1, 2, 3); !slices.Equal(logs, want) {
		t.Fatalf("the replicas hold %v, want %v", logs, want)
	}
	c.WaitFor(20*time.Second, "a leader, the full ISR and HW = LEO on every replica", func() bool {
		p := c.Partition("again", 0)
		if !c.Leads(p.GetLeader(), "again", 0) || len(p.GetIsr()) != 3 {
			return false
		}
		for id := int32(1); id <= 3; id++ {
			hw, leo, ok := c.Broker(id).ReplicaOffsets("again", 0)
			if !ok || hw != leo || leo != int64(len(want)) {
				return false
			}
		}
		return true
	})
	for id := int32(1); id <= 3; id++ {
		ents, err := os.ReadDir(c.BrokerConfig(id).DataDir)
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "again") {
				dirs = append(dirs, e.Name())
			}
		}
		if !slices.Equal(dirs, []string{"again-0"}) {
			t.Errorf("broker %d's data dir holds %v, want only again-0", id, dirs)
		}
	}
}

// A client that was quiet while a topic it knew was deleted and created
// again writes to and reads from the new topic. The old topic's partition
// had a higher leader epoch than the new one starts at, and the client's
// cache keeps the newer of two epochs it hears: without the topic's id in
// metadata it took the new leader's answers for a lagging broker's and kept
// routing to the old leader, so every write failed at its delivery timeout
// and a consumer, sending the old epoch, was refused for good.
func TestQuietClientFollowsATopicCreatedAgain(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	ctx := context.Background()
	CreateAssigned(t, c, "reborn", [][]int32{{1, 2, 3}}, nil)
	cl := c.Client()
	p, err := client.NewProducer(cl, client.ProducerOptions{Acks: client.AcksAll, DeliveryTimeout: 15 * time.Second, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	produce := func(v string) error {
		_, err := p.Produce(ctx, client.Record{Topic: "reborn", Partition: 0, ManualPartition: true, Value: []byte(v)})
		return err
	}
	if err := produce("old-0"); err != nil {
		t.Fatal(err)
	}
	// Raise the old partition's leader epoch (each reorder and preferred
	// election moves the leader), writing through the client each time so
	// its cache holds the newest epoch.
	for i, order := range [][]int32{{2, 3, 1}, {3, 1, 2}} {
		Reassign(t, c, "reborn", map[int32][]int32{0: order})
		if err := c.ElectPreferred([]history.TP{{Topic: "reborn", Partition: 0}}); err != nil {
			t.Fatal(err)
		}
		c.WaitFor(10*time.Second, fmt.Sprintf("broker %d leading", order[0]), func() bool {
			return c.Leads(order[0], "reborn", 0)
		})
		if err := produce(fmt.Sprintf("old-%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	old := c.Partition("reborn", 0)
	if old.GetLeaderEpoch() < 2 || old.GetLeader() != 3 {
		t.Fatalf("the old partition: %v", old)
	}
	resp, err := c.Admin().DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: []string{"reborn"}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	// Created again, led elsewhere, at leader epoch 0.
	CreateAssigned(t, c, "reborn", [][]int32{{1, 2, 3}}, nil)
	c.WaitFor(10*time.Second, "the new reborn-0 led by broker 1", func() bool { return c.Leads(1, "reborn", 0) })
	if err := produce("new-0"); err != nil {
		t.Fatalf("writing to the topic created again: %v", err)
	}
	cs, err := client.NewConsumer(cl, client.ConsumerOptions{Topic: "reborn", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var got []string
	for len(got) == 0 {
		recs, err := cs.Poll(pctx)
		if err != nil {
			t.Fatalf("reading the topic created again (read %v): %v", got, err)
		}
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	if !slices.Equal(got, []string{"new-0"}) {
		t.Fatalf("read %v, want [new-0]", got)
	}
}

// A topic whose log start DeleteRecords moved, deleted and created again at
// once, is written (acks=all) and then every broker is killed in turn: the
// new incarnation's records are all still there, from offset 0, on every
// replica. Each broker checkpoints log starts and recovery points once a
// minute (a DeleteRecords' start at once): before, the deleted log's
// entries stayed in those files until then, and a broker killed meanwhile
// opened the new log with the old log start, past its end, so its records
// were hidden from readers, and from the leader's consumers when it led.
func TestARecreatedTopicKeepsItsRecordsThroughACrash(t *testing.T) {
	c := Start(t, Options{Brokers: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "again"
	c.CreateTopic(topic, 1, 3, nil)
	for i := range 6 {
		if _, err := c.Produce(ctx, topic, 0, -1, fmt.Sprintf("old-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if low, err := c.Client().DeleteRecords(ctx, topic, 0, 6); err != nil || low != 6 {
		t.Fatalf("delete records below 6: low watermark %d, %v", low, err)
	}
	resp, err := c.Admin().DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: []string{topic}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	c.CreateTopic(topic, 1, 3, nil)
	want := []string{"new-0", "new-1", "new-2"}
	for _, v := range want {
		if _, err := c.Produce(ctx, topic, 0, -1, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	for id := int32(1); id <= 3; id++ {
		c.CrashBroker(id)
		c.StartBroker(id)
		c.WaitBrokerAlive(id)
		c.WaitFor(20*time.Second, fmt.Sprintf("a full ISR after broker %d's restart", id), func() bool {
			p := c.Partition(topic, 0)
			return p.GetLeader() >= 0 && len(p.GetIsr()) == 3
		})
	}
	if logs := c.SameLogs(topic, 0, 1, 2, 3); !slices.Equal(logs, want) {
		t.Fatalf("the replicas hold %v, want %v", logs, want)
	}
	c.WaitHWAtLEO(topic, 0, 1, 2, 3)
	if off, err := pollFirst(t, c.Client(), topic, client.ResetNone); err != nil || off != 0 {
		t.Fatalf("a consumer from offset 0 read first offset %d, %v; want 0", off, err)
	}
}
