package groups

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
)

// recreateCase is a consumer that read a topic's first incarnation up to
// its end, then the topic deleted and created again.
type recreateCase struct {
	c     *clustertest.Cluster
	topic string
	cs    *client.Consumer
}

func newRecreateCase(t *testing.T, c *clustertest.Cluster, topic string) *recreateCase {
	t.Helper()
	// A client of its own: the cluster's produces and admin calls teach it
	// nothing of the topic's new incarnation.
	cs, err := client.NewConsumer(c.Client(), client.ConsumerOptions{Topic: topic, Reset: client.ResetEarliest, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &recreateCase{c: c, topic: topic, cs: cs}
}

func (rc *recreateCase) produce(t *testing.T, prefix string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := rc.c.Produce(context.Background(), rc.topic, 0, -1, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
			t.Fatal(err)
		}
	}
}

func (rc *recreateCase) read(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	for end := time.Now().Add(15 * time.Second); len(got) < n && time.Now().Before(end); {
		pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		recs, err := rc.cs.Poll(pctx)
		cancel()
		if err != nil {
			t.Logf("poll: %v", err)
		}
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	return got
}

func (rc *recreateCase) recreate(t *testing.T) {
	t.Helper()
	resp, err := rc.c.Admin().DeleteTopics(context.Background(), &adminv1.DeleteTopicsRequest{Topics: []string{rc.topic}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	rc.c.CreateTopic(rc.topic, 1, 1, nil)
}

// A consumer that read a topic before it was deleted and created again
// reads the new topic from its start as its reset policy says, whatever
// the new topic holds against its position. With fewer records, the new
// log diverges from the leader epoch the consumer read last (both
// incarnations begin at epoch 0): taken for a truncation of the old log,
// it moved the position to the new log's end. With as many or more, the
// log holds the position and its epoch: the consumer read on at its old
// offset, skipping the new topic's first records, unless its fetch names
// the topic id it read.
func TestConsumerReadsATopicCreatedAgainFromItsStart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1})
	const old = 6
	for _, tc := range []struct {
		name string
		n    int // records of the new topic before the consumer looks
	}{{"fewer", 3}, {"as many", old}, {"more", old + 3}} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newRecreateCase(t, c, fmt.Sprintf("again-%d", tc.n))
			c.CreateTopic(rc.topic, 1, 1, nil)
			rc.produce(t, "old", 0, old)
			if got := rc.read(t, old); len(got) != old {
				t.Fatalf("read %v from the first topic", got)
			}
			rc.recreate(t)
			rc.produce(t, "new", 0, tc.n)
			rc.produce(t, "new", tc.n, 2) // after the consumer's position too
			want := clustertest.Values("new", tc.n+2)
			if got := rc.read(t, len(want)); !slices.Equal(got, want) {
				t.Fatalf("read %v from the topic created again, want %v (position %d)", got, want, rc.cs.Position())
			}
		})
	}
}

// A consumer polling while its topic is deleted and created again, and
// written to, reads the new topic from its start.
func TestConsumerPollingThroughATopicCreatedAgain(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1})
	rc := newRecreateCase(t, c, "again-polled")
	c.CreateTopic(rc.topic, 1, 1, nil)
	rc.produce(t, "old", 0, 4)
	if got := rc.read(t, 4); len(got) != 4 {
		t.Fatalf("read %v from the first topic", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []string, 1)
	go func() {
		var vals []string
		for ctx.Err() == nil && len(vals) < 8 {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			recs, _ := rc.cs.Poll(pctx)
			pcancel()
			for _, r := range recs {
				vals = append(vals, string(r.Value))
			}
		}
		got <- vals
	}()
	rc.recreate(t)
	rc.produce(t, "new", 0, 8)
	select {
	case vals := <-got:
		if want := clustertest.Values("new", 8); !slices.Equal(vals, want) {
			t.Fatalf("read %v while the topic was created again, want %v", vals, want)
		}
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("read %v in 30 s, want 8 records of the new topic", <-got)
	}
}

// A consumer started at an offset, on a client whose metadata still holds
// the topic's old id, reads the topic created again from that offset: the
// position is in the topic as the first fetch finds it. It took the cached
// id, its first fetch was refused UNKNOWN_TOPIC_ID, and it reset by its
// policy as if the topic had been created again under a position it read,
// dropping the offset it was given.
func TestConsumerStartedAtAnOffsetOnAStaleCacheKeepsIt(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1})
	cl := c.Client()
	first, err := client.NewConsumer(cl, client.ConsumerOptions{Topic: "stale", Reset: client.ResetEarliest, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rc := &recreateCase{c: c, topic: "stale", cs: first}
	c.CreateTopic(rc.topic, 1, 1, nil)
	rc.produce(t, "old", 0, 3)
	if got := rc.read(t, 3); len(got) != 3 {
		t.Fatalf("read %v from the first topic", got)
	}
	rc.recreate(t)
	rc.produce(t, "new", 0, 6)
	// The same client, whose cache knows the first topic's id.
	cs, err := client.NewConsumer(cl, client.ConsumerOptions{Topic: rc.topic, StartOffset: 2,
		Reset: client.ResetEarliest, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rc.cs = cs
	want := clustertest.Values("new", 6)[2:]
	if got := rc.read(t, len(want)); !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v from offset 2 of the topic created again", got, want)
	}
}
