package clustertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
)

// A consumer that read a topic before it was deleted and created again,
// with fewer records this time than its position, reads the new topic
// from its start as its reset policy says. The new log diverges from the
// leader epoch the consumer read last (both incarnations begin at epoch
// 0): taken for a truncation of the old log, it moved the position to the
// new log's end, past records never returned.
func TestConsumerReadsATopicCreatedAgainFromItsStart(t *testing.T) {
	c := Start(t, Options{Brokers: 1, Controllers: 1})
	ctx := context.Background()
	produce := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if _, err := c.Produce(ctx, "again", 0, -1, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cs, err := client.NewConsumer(c.Client(), client.ConsumerOptions{Topic: "again", Reset: client.ResetEarliest, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	read := func(n int) []string {
		t.Helper()
		var got []string
		for end := time.Now().Add(15 * time.Second); len(got) < n && time.Now().Before(end); {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			recs, err := cs.Poll(pctx)
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
	c.CreateTopic("again", 1, 1, nil)
	produce("old", 6)
	if got := read(6); len(got) != 6 {
		t.Fatalf("read %v from the first topic", got)
	}

	resp, err := c.Admin().DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: []string{"again"}, TimeoutMs: 10000})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	c.CreateTopic("again", 1, 1, nil)
	produce("new", 3)
	if got, want := read(3), []string{"new-0", "new-1", "new-2"}; !slices.Equal(got, want) {
		t.Fatalf("read %v from the topic created again, want %v (position %d)", got, want, cs.Position())
	}
}
