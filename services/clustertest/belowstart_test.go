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

	"tidemark.io/services/client"
)

// Every broker killed after DeleteRecords, each finding on restart a
// segment below the log start that never reached the disk (zeros: a
// power loss brought back a retired segment whose rename and data were
// not yet durable, as when DeleteRecords deletes a segment right after its
// roll). The brokers start, the partition is whole again with HW = LEO,
// and every record from the log start is on every replica. Before, loading
// cut each log at the damaged segment and deleted every segment after it:
// all three replicas came back empty and the acknowledged records were
// gone.
func TestADamagedSegmentBelowTheLogStartLosesNoRecord(t *testing.T) {
	c := Start(t, Options{})
	const topic = "trimmed"
	c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2", "segment.bytes": "1024"})
	reps := c.Partition(topic, 0).GetReplicas()
	var want []string
	for i := range 12 {
		v := fmt.Sprintf("r%d-%0100d", i, 0)
		if _, err := c.Produce(context.Background(), topic, 0, -1, v); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	c.WaitSettled(15*time.Second, topic, 0, reps)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const start = 8
	if low, err := c.Client().DeleteRecords(ctx, topic, 0, start); err != nil || low != start {
		t.Fatalf("delete below %d: low watermark %d, %v", start, low, err)
	}
	want = want[start:]
	for _, id := range reps {
		c.CrashBroker(id)
	}
	for _, id := range reps {
		dir := filepath.Join(c.BrokerConfig(id).DataDir, topic+"-0")
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var logs []string
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".log") {
				logs = append(logs, e.Name())
			}
		}
		slices.Sort(logs)
		if len(logs) == 0 || logs[0] == "00000000000000000000.log" {
			t.Fatalf("broker %d holds segments %v: the test needs the first one deleted", id, logs)
		}
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), make([]byte, 512), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range reps {
		c.StartBroker(id)
	}
	c.WaitSettled(30*time.Second, topic, 0, reps)
	if logs := c.SameLogs(topic, 0, reps...); !slices.Equal(logs, want) {
		t.Fatalf("the replicas hold %d records %v, want %d from offset %d", len(logs), logs, len(want), start)
	}
	c.WaitHWAtLEO(topic, 0, reps...)
	if off, err := pollFirst(t, c.Client(), topic, client.ResetEarliest); err != nil || off != start {
		t.Fatalf("a consumer from the earliest offset read first %d, %v; want %d", off, err, start)
	}
}
