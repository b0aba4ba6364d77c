package replica

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// configUpdate is an UpdateMetadata carrying topic configs and dynamic
// broker configs, as the controller sends after a config change.
func (e *env) configUpdate(topics map[string]map[string]string, broker map[string]string) {
	e.t.Helper()
	req := &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch,
		Controller: &commonv1.Node{Id: 100, Address: ctrlAddr}, BrokerConfigs: broker}
	for t, cfg := range topics {
		req.TopicConfigs = append(req.TopicConfigs, &controlv1.TopicConfig{Topic: t, Configs: cfg})
	}
	if err := e.m.UpdateMetadata(req); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) minISROf(tp TP) int32 {
	e.t.Helper()
	r, ok := e.m.Replica(tp)
	if !ok {
		e.t.Fatalf("%v not hosted", tp)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.MinInsyncReplicas
}

// An UpdateMetadata that changes no config resolves none; a change of a
// topic's configs resolves that topic once, however many partitions it
// has, and reaches each of them; a change of the dynamic broker configs
// resolves every topic again.
func TestTopicConfigsAreResolvedOnlyWhenTheyChange(t *testing.T) {
	e := newEnv(t)
	var tps []TP
	for _, topic := range []string{"a", "b"} {
		for p := range int32(4) {
			tp := TP{Topic: topic, Partition: p}
			e.stateOf(tp, 1, 1, 1, []int32{1, 2, 3}, map[string]string{})
			tps = append(tps, tp)
		}
	}
	resolutions := func() int { return int(testutil.ToFloat64(e.m.metrics.configResolutions)) }
	same := map[string]map[string]string{"a": {}, "b": {}}
	e.configUpdate(same, nil)
	base := resolutions()
	for i := range 5 {
		e.configUpdate(same, nil)
		if got := resolutions() - base; got != 0 {
			t.Fatalf("update %d without a config change resolved %d topic configs", i, got)
		}
	}

	e.configUpdate(map[string]map[string]string{"a": {"min.insync.replicas": "2"}, "b": {}}, nil)
	if got := resolutions() - base; got != 1 {
		t.Fatalf("a change of topic a resolved %d topic configs, want 1", got)
	}
	for _, tp := range tps {
		want := int32(1)
		if tp.Topic == "a" {
			want = 2
		}
		if got := e.minISROf(tp); got != want {
			t.Fatalf("%v: min.insync.replicas %d, want %d", tp, got, want)
		}
	}

	base = resolutions()
	e.configUpdate(map[string]map[string]string{"a": {"min.insync.replicas": "2"}, "b": {}}, map[string]string{"min.insync.replicas": "3"})
	if got := resolutions() - base; got != 2 {
		t.Fatalf("a change of the broker configs resolved %d topic configs, want 2", got)
	}
	for _, tp := range tps {
		want := int32(3)
		if tp.Topic == "a" {
			want = 2 // the topic's own setting wins
		}
		if got := e.minISROf(tp); got != want {
			t.Fatalf("%v after the broker change: min.insync.replicas %d, want %d", tp, got, want)
		}
	}
}

// BenchmarkUpdateMetadataWithoutConfigChange is the cost of an
// UpdateMetadata (e.g. a leader moved elsewhere) that changes no config,
// per hosted replica count: it must not grow by a config resolution per
// replica.
func BenchmarkUpdateMetadataWithoutConfigChange(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			e := newEnv(b)
			topics := map[string]map[string]string{}
			for i := range n {
				tp := TP{Topic: fmt.Sprintf("t%d", i/10), Partition: int32(i % 10)}
				topics[tp.Topic] = map[string]string{"retention.ms": "3600000"}
				e.stateOf(tp, 2, 1, 1, []int32{1, 2, 3}, topics[tp.Topic])
			}
			e.configUpdate(topics, nil)
			b.ResetTimer()
			for b.Loop() {
				e.configUpdate(topics, nil)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/replica")
		})
	}
}

// log.follower.cached.bytes, a dynamic broker config outside the topic
// config, reaches every hosted log when it changes, and -1 (or 0) turns the
// page-cache drop off in the log's own terms.
func TestFollowerCachedBytesReachesTheLogs(t *testing.T) {
	e := newEnv(t)
	tp := TP{Topic: "a", Partition: 0}
	e.stateOf(tp, 1, 1, 1, []int32{1, 2, 3}, map[string]string{})
	topics := map[string]map[string]string{"a": {}}
	cachedOf := func() int64 {
		r, ok := e.m.Replica(tp)
		if !ok {
			t.Fatalf("%v not hosted", tp)
		}
		return r.log.Config().FollowerCachedBytes
	}
	for _, c := range []struct {
		set  map[string]string
		want int64
	}{
		{nil, 64 << 20},
		{map[string]string{"log.follower.cached.bytes": "-1"}, -1},
		{map[string]string{"log.follower.cached.bytes": "8388608"}, 8 << 20},
		{map[string]string{"log.follower.cached.bytes": "0"}, -1},
		{nil, 64 << 20},
	} {
		e.configUpdate(topics, c.set)
		if got := cachedOf(); got != c.want {
			t.Fatalf("broker configs %v: the log has FollowerCachedBytes %d, want %d", c.set, got, c.want)
		}
	}
}

// producer.id.expiration.ms, a dynamic broker config, reaches the hosted
// logs: the expiry pass then drops a producer idle that long, and its next
// batch, not starting at sequence 0, is answered UNKNOWN_PRODUCER_ID.
func TestProducerIDExpirationReachesTheLogs(t *testing.T) {
	e := newEnv(t)
	tp := TP{Topic: "a", Partition: 0}
	e.stateOf(tp, 1, 1, 1, []int32{1, 2, 3}, map[string]string{})
	r, ok := e.m.Replica(tp)
	if !ok {
		t.Fatalf("%v not hosted", tp)
	}
	if got := r.log.Config().ProducerIDExpiration; got != 24*time.Hour {
		t.Fatalf("default ProducerIDExpiration %v, want 24h", got)
	}
	e.configUpdate(map[string]map[string]string{"a": {}}, map[string]string{"producer.id.expiration.ms": "60000"})
	if got := r.log.Config().ProducerIDExpiration; got != time.Minute {
		t.Fatalf("after producer.id.expiration.ms=60000 the log has ProducerIDExpiration %v, want 1m", got)
	}
	batch := func(seq int32) []byte {
		var b recordbatch.Builder
		b.Append(recordbatch.Record{Timestamp: e.clock.Now().UnixMilli(), Value: []byte("v")})
		return b.Build(7, 0, seq)
	}
	if _, err := r.log.AppendAsLeaderWithin(batch(0), 1, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	expire := r.log.(interface{ ExpireProducers() int }).ExpireProducers
	if n := expire(); n != 0 {
		t.Fatalf("expired %d producers before producer.id.expiration.ms passed", n)
	}
	e.clock.Advance(2 * time.Minute)
	if n := expire(); n != 1 {
		t.Fatalf("expired %d producers, want 1", n)
	}
	_, err := r.log.AppendAsLeaderWithin(batch(1), 1, math.MaxInt64)
	if got := kerr.CodeOf(err); got != kerr.UnknownProducerID {
		t.Fatalf("next batch of the expired producer: %v (%v), want UNKNOWN_PRODUCER_ID", got, err)
	}
}

// Time configs as large as Kafka takes (segment.ms up to Long.MAX_VALUE,
// retention.ms of centuries) mean "practically never" and must reach the
// log as such: converted to a Duration without saturating they wrapped, to
// a negative segment.ms that refused the whole log config (the partition
// never hosted) or to a retention of a few years that deleted records the
// user meant to keep.
func TestHugeTimeConfigsReachTheLogAsForever(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2, 3}, map[string]string{
		"segment.ms": "9223372036854775807", "retention.ms": "100000000000000000"})
	r, ok := e.m.Replica(tp0)
	if !ok {
		t.Fatal("the partition is not hosted: its log config was refused")
	}
	cfg := r.Log().Config()
	const century = 100 * 365 * 24 * time.Hour
	if cfg.SegmentMs < century || cfg.RetentionMs < century {
		t.Fatalf("segment.ms %v, retention.ms %v: want both at least a century", cfg.SegmentMs, cfg.RetentionMs)
	}
	// And changed on a hosted partition.
	e.configUpdate(map[string]map[string]string{tp0.Topic: {"segment.ms": "10000000000000000", "retention.ms": "9223372036854775807"}}, nil)
	if cfg := r.Log().Config(); cfg.SegmentMs < century || cfg.RetentionMs < century {
		t.Fatalf("after the change: segment.ms %v, retention.ms %v", cfg.SegmentMs, cfg.RetentionMs)
	}
}
