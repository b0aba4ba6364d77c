package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
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
	c.StartBroker(3)
	seg := filepath.Join(c.BrokerConfig(3).DataDir, "reborn-0", "00000000000000000000.log")
	if st, err := os.Stat(seg); err != nil || st.Size() == 0 {
		t.Fatalf("broker 3's stray log: %v %v (the test needs one)", st, err)
	}

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
