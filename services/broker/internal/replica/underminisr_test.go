package replica

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// Writes refused because the ISR is below min.insync.replicas are counted
// under their topic and warned about, but a producer retrying them cannot
// flood the log: one line per underMinISRWarnEvery, which says how many
// went unlogged. A deleted topic's series go with it.
func TestWritesRefusedUnderMinISRAreCountedByTopicAndWarnedRateLimited(t *testing.T) {
	e := newEnv(t)
	logs := &lockedBuffer{}
	e.logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.m, e.meta = e.newManager(1)
	e.updateMetadata()
	e.state(1, 1, 1, []int32{1}, map[string]string{"min.insync.replicas": "2"})
	refused := func() float64 {
		return testutil.ToFloat64(e.m.metrics.underMinISR.WithLabelValues(tp0.Topic, kerr.NotEnoughReplicas.String()))
	}
	warnings := func() int { return strings.Count(logs.String(), "the ISR is below min.insync.replicas") }

	for range 5 {
		if _, err := e.m.Produce(t.Context(), tp0, -1, batch("a"), produceTimeout); kerr.CodeOf(err) != kerr.NotEnoughReplicas {
			t.Fatalf("want NOT_ENOUGH_REPLICAS, got %v", err)
		}
	}
	if n := refused(); n != 5 {
		t.Fatalf("refusals counted for topic %q: %v, want 5", tp0.Topic, n)
	}
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings for 5 refusals within %v, want 1:\n%s", n, underMinISRWarnEvery, logs)
	}
	if !strings.Contains(logs.String(), "topic=t partition=0") {
		t.Fatalf("the warning does not name the partition:\n%s", logs)
	}

	e.clock.Advance(underMinISRWarnEvery)
	if _, err := e.m.Produce(t.Context(), tp0, -1, batch("a"), produceTimeout); kerr.CodeOf(err) != kerr.NotEnoughReplicas {
		t.Fatalf("want NOT_ENOUGH_REPLICAS, got %v", err)
	}
	if n := warnings(); n != 2 || !strings.Contains(logs.String(), "unlogged_since_last_warning=4") {
		t.Fatalf("after %v: %d warnings, want 2, the second naming 4 unlogged:\n%s", underMinISRWarnEvery, n, logs)
	}

	stop := &controlv1.StopReplicaRequest{ControllerId: 100, ControllerEpoch: e.ctrlEpoch, BrokerEpoch: brokerEpochs[1],
		Partitions: []*controlv1.StopReplicaPartition{{Topic: tp0.Topic, Partition: tp0.Partition, LeaderEpoch: 1, Delete: true}}}
	if _, err := e.m.StopReplica(stop); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(e.m.metrics.underMinISR); n != 0 {
		t.Fatalf("%d series left after the topic's last replica was deleted, want 0", n)
	}
}
