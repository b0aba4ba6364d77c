package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

func (c *cluster) produceKV(topic string, part int32, key, value []byte) error {
	leader := c.ctrl.state(topic, part).leader
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Key: key, Value: value})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.client(leader).Produce(ctx, &brokerv1.ProduceRequest{Topic: topic, Partition: part, Acks: -1, TimeoutMs: 5000,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)}})
	if err != nil {
		return kerr.FromStatus(err)
	}
	return nil
}

// A compacted topic on three brokers: every replica runs its own cleaner
// (log.cleaner.backoff.ms is short) and ends with the latest value per key;
// a consumer reads only those; keyless records are refused; /metrics shows
// the cleaner's work.
func TestCompactedTopicAcrossReplicas(t *testing.T) {
	c := newClusterFn(t, 3, map[string]string{"log.cleaner.backoff.ms": "100"}, func(cfg *broker.Config) {
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	})
	c.ctrl.createTopic("cmp", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024",
		"min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "2"})
	const keys, rounds = 5, 30
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k++ {
			if err := c.produceKV("cmp", 0, []byte("k"+strconv.Itoa(k)), []byte(strconv.Itoa(r)+"-"+strings.Repeat("v", 20))); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	err := c.produceKV("cmp", 0, nil, []byte("no key"))
	if e := kerr.As(err); e == nil || e.Code != kerr.InvalidRecord || !strings.Contains(e.Message, "has no key: a topic with cleanup.policy=compact needs one") {
		t.Fatalf("keyless record: %v", err)
	}
	total := keys * rounds
	for _, id := range []int32{1, 2, 3} {
		waitFor(t, 20*time.Second, "broker "+strconv.Itoa(int(id))+" to compact its replica", func() bool {
			return len(c.logValues(id, "cmp", 0)) < total/2
		})
	}
	// What a consumer reads: the latest value of every key is there, at its
	// offset; older values are gone from cleaned segments.
	got := c.consumeAll("cmp", 0)
	if len(got) >= total/2 {
		t.Fatalf("consumer read %d records of %d", len(got), total)
	}
	last := strconv.Itoa(rounds-1) + "-"
	n := 0
	for _, v := range got {
		if strings.HasPrefix(v, last) {
			n++
		}
	}
	if n != keys {
		t.Fatalf("consumer read %d latest values, want %d: %v", n, keys, got)
	}
	// A replica that lost its copy fetches the leader's compacted log,
	// gaps and emptied batches included, and ends with the same latest
	// values.
	c.crash(3)
	if err := os.RemoveAll(filepath.Join(c.cfgs[3].DataDir, "cmp-0")); err != nil {
		t.Fatal(err)
	}
	c.start(3)
	leaderLEO := c.replicaOf(1, "cmp", 0).Log().LogEndOffset()
	waitFor(t, 20*time.Second, "the wiped replica to catch up", func() bool {
		return c.replicaOf(3, "cmp", 0).Log().LogEndOffset() == leaderLEO
	})
	copied := map[string]bool{}
	for _, v := range c.logValues(3, "cmp", 0) {
		copied[v] = true
	}
	for _, v := range got {
		if strings.HasPrefix(v, last) && !copied[v] {
			t.Fatalf("the re-fetched replica lacks %q: %v", v, c.logValues(3, "cmp", 0))
		}
	}
	if n := len(c.logValues(3, "cmp", 0)); n >= total/2 {
		t.Fatalf("the re-fetched replica holds %d records", n)
	}
	// The leader wrote every record itself, so its cleaner's count is what
	// left its log. A pass syncs every group it swaps in and may still be
	// running: the counters follow each swap, the pass count its end.
	var passes, removed float64
	var held int
	waitFor(t, 20*time.Second, "broker 1's cleaner metrics to match its log", func() bool {
		body := scrape(t, c.brokers[1].MetricsAddr())
		passes = metricValue(t, body, "tidemark_log_cleaner_passes_total")
		removed = metricValue(t, body, "tidemark_log_cleaner_records_removed_total")
		held = len(c.logValues(1, "cmp", 0))
		return passes >= 1 && removed == float64(total-held)
	})
	if removed < float64(total/2) {
		t.Fatalf("records removed %v, the log holds %d of %d", removed, held, total)
	}
}

// consumeAll reads up to the HW; unlike consume it goes on past a fetch
// that returns no record (a batch compaction emptied) by its next offset.
func (c *cluster) consumeAll(topic string, part int32) []string {
	c.t.Helper()
	leader := c.ctrl.state(topic, part).leader
	var out []string
	for off := int64(0); ; {
		resp, err := c.client(leader).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: topic, Partition: part, Offset: off})
		if err != nil {
			c.t.Fatalf("fetch from %d: %v", leader, err)
		}
		for _, r := range resp.GetRecords() {
			out = append(out, string(r.GetValue()))
		}
		if resp.GetNextOffset() <= off || resp.GetNextOffset() >= resp.GetHighWatermark() {
			return out
		}
		off = resp.GetNextOffset()
	}
}
