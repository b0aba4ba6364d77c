package quiet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/clustertest"
)

// Retention renames a deleted segment's files and unlinks them in the
// background, after it returns; brokers that crash right after a pass,
// restarted in quick succession, bring back what was not yet durable.
// Once the partition is quiet and retention has run again: every replica
// in the ISR with HW = LEO, no retired (.deleted) file left in any data
// dir, no segment wholly below a replica's log start, and the records
// above the log start are the ones written, in order.
func TestRetentionThroughQuickCrashesLeavesNoRetiredFiles(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: map[string]string{"log.retention.check.interval.ms": "300"}})
	c.CreateTopic("gone", 1, 3, map[string]string{"min.insync.replicas": "2", "segment.bytes": "1024", "retention.bytes": "2048"})
	reps := c.Partition("gone", 0).GetReplicas()
	var written []string
	for i := range 120 {
		v := fmt.Sprintf("r%03d-%s", i, strings.Repeat("x", 40))
		if _, err := c.Produce(context.Background(), "gone", 0, -1, v); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		written = append(written, v)
	}
	c.WaitSettled(10*time.Second, "gone", 0, reps)
	for _, id := range reps {
		runRetention(c, id, "gone", 0)
	}
	// Crashes in quick succession, while the renames and unlinks run.
	leader := c.Partition("gone", 0).GetLeader()
	c.CrashBroker(leader)
	c.StartBroker(leader)
	other := reps[0]
	if other == leader {
		other = reps[1]
	}
	c.CrashBroker(other)
	c.StartBroker(other)

	// Quiet: nothing is produced.
	c.WaitSettled(20*time.Second, "gone", 0, reps)
	c.WaitFor(15*time.Second, "retention to leave no retired file and no segment below the log start", func() bool {
		for _, id := range reps {
			runRetention(c, id, "gone", 0)
			v, ok := c.View(id, "gone", 0)
			if !ok || !dirHoldsOnlyTheLog(c, id, "gone-0", v.LogStart) {
				return false
			}
		}
		return true
	})
	if _, err := c.Produce(context.Background(), "gone", 0, -1, "last"); err != nil {
		t.Fatalf("acks=all produce after the crashes: %v", err)
	}
	written = append(written, "last")
	lv, _ := c.View(c.Partition("gone", 0).GetLeader(), "gone", 0)
	var got []string
	for off := lv.LogStart; off < int64(len(written)); { // a fetch answer ends at a segment's end
		more := c.Consume("gone", 0, off)
		if len(more) == 0 {
			break
		}
		got = append(got, more...)
		off += int64(len(more))
	}
	if len(got) == 0 || int64(len(got)) != int64(len(written))-lv.LogStart || !slices.Equal(got, written[lv.LogStart:]) {
		t.Fatalf("consumer read %d records from the log start %d, not the last ones written: %v", len(got), lv.LogStart, got)
	}
}

// dirHoldsOnlyTheLog reports whether broker id's directory of a partition
// holds no retired (.deleted) file and no segment wholly below logStart,
// logging what it found otherwise.
func dirHoldsOnlyTheLog(c *clustertest.Cluster, id int32, part string, logStart int64) bool {
	c.T.Helper()
	ents, err := os.ReadDir(filepath.Join(c.BrokerConfig(id).DataDir, part))
	if err != nil {
		c.T.Logf("broker %d: %v", id, err)
		return false
	}
	var bases []int64
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".deleted") {
			c.T.Logf("broker %d still holds %s", id, name)
			return false
		}
		if b, ok := strings.CutSuffix(name, ".log"); ok {
			if n, err := strconv.ParseInt(b, 10, 64); err == nil {
				bases = append(bases, n)
			}
		}
	}
	slices.Sort(bases)
	if len(bases) > 1 && bases[1] <= logStart {
		c.T.Logf("broker %d: segments %v, log start %d: the first lies wholly below it", id, bases, logStart)
		return false
	}
	return len(bases) > 0
}
