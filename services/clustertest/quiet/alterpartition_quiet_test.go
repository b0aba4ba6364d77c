package quiet

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/clustertest"
)

// A leader's ISR shrink is logged with its reason, and a leader whose
// ISR change finds no controller to take it (every
// controller down, or an etcd outage) retries it every 200 ms until one
// answers. It warned on every attempt: five warnings a second for as long
// as the outage lasted, on every broker with a change to make. It warns
// once, then at most once a minute with the attempts so far, and says
// once when the change got through or new metadata replaced it.
func TestAnISRShrinkSaysWhyAndWithNoControllerToTakeItWarnsOnce(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	logs := &clustertest.LogBuf{}
	c.SetLog(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err := c.StopBroker(1); err != nil {
		t.Fatal(err)
	}
	c.StartBroker(1)
	c.WaitBrokerAlive(1)
	clustertest.CreateAssigned(t, c, "t", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "1"})
	if _, err := c.Produce(context.Background(), "t", 0, -1, "v0"); err != nil {
		t.Fatal(err)
	}
	c.StopController(1)
	c.StopController(2)
	c.CrashBroker(3)
	// A write broker 3 never fetches: the leader shrinks the ISR once
	// replica.lag.time.max.ms has passed.
	if _, err := c.BrokerClient(1).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "t", Partition: 0, Acks: 1, TimeoutMs: 5000,
		Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: clustertest.Record("v1")}}}); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(10*time.Second, "the leader to propose the shrink", func() bool {
		return len(logs.Lines("Shrinking ISR from 1,2,3 to 1,2")) == 1
	})
	// The line says why, as Kafka's names each out-of-sync replica's end
	// offset and last catch-up: broker 3 stopped at offset 1, the
	// leader's log ends at 2.
	if l := logs.Lines("Shrinking ISR from 1,2,3 to 1,2", "log end offset 2", "broker 3 at offset 1, last caught up"); len(l) != 1 {
		t.Fatalf("the shrink's line does not say which replica fell behind and how: %s", logs.Lines("Shrinking ISR"))
	}
	time.Sleep(3 * time.Second) // no controller: the sender retries every 200 ms
	if w := logs.Lines("AlterPartition", "will retry"); len(w) != 1 {
		t.Fatalf("%d warnings in 3 s without a controller, want 1:\n%s", len(w), w)
	}

	c.StartController(2)
	c.WaitFor(20*time.Second, "the shrink committed", func() bool {
		return slices.Equal(c.Partition("t", 0).GetIsr(), []int32{1, 2})
	})
	defer func() {
		if t.Failed() {
			t.Logf("broker 1's log:\n%s", strings.Join(logs.Lines("node=broker-1"), "\n"))
		}
	}()
	c.WaitFor(10*time.Second, "the leader to say its change got through", func() bool {
		return len(logs.Lines("level=INFO", "AlterPartition", "failed_attempts=")) == 1
	})
	if w := logs.Lines("AlterPartition", "will retry"); len(w) != 1 {
		t.Fatalf("%d warnings over the outage, want 1:\n%s", len(w), w)
	}
}
