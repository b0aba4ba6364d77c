package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tidemark.io/services/clustertest/history"
	"tidemark.io/services/recordbatch"
)

// batch encodes values as one batch at base, as a leader would store it.
func batch(base int64, values ...string) []byte {
	var b recordbatch.Builder
	for _, v := range values {
		b.Append(recordbatch.Record{Value: []byte(v), Timestamp: 1000})
	}
	out := slices.Clone(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence))
	recordbatch.Batch(out).SetBaseOffset(base)
	recordbatch.Batch(out).SetPartitionLeaderEpoch(3)
	return out
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func checkpoint(rows ...string) []byte {
	return []byte(fmt.Sprintf("0\n%d\n%s\n", len(rows), strings.Join(rows, "\n")))
}

// The reader must give the records a broker would serve: every segment in
// base-offset order, nothing below the checkpointed log start, the HW from
// the checkpoint, and a torn tail cut off with a note.
func TestReadReplicaFromSegments(t *testing.T) {
	dir := t.TempDir()
	tp := history.TP{Topic: "durable", Partition: 1}
	seg := filepath.Join(dir, "durable-1")
	writeFile(t, filepath.Join(seg, "00000000000000000000.log"), slices.Concat(batch(0, "a", "b"), batch(2, "c")))
	torn := batch(5, "f")
	writeFile(t, filepath.Join(seg, "00000000000000000003.log"), slices.Concat(batch(3, "d", "e"), torn[:len(torn)-3]))
	writeFile(t, filepath.Join(seg, "leader-epoch-checkpoint"), []byte("0\n1\n3 0\n"))
	writeFile(t, filepath.Join(dir, "log-start-offset-checkpoint"), checkpoint("durable 0 7", "durable 1 1"))
	writeFile(t, filepath.Join(dir, "replication-offset-checkpoint"), checkpoint("durable 1 4", "other 1 99"))

	rs, notes, err := readReplica(dir, 2, tp)
	if err != nil {
		t.Fatal(err)
	}
	want := []history.Record{{Offset: 1, Value: "b"}, {Offset: 2, Value: "c"}, {Offset: 3, Value: "d"}, {Offset: 4, Value: "e"}}
	if !slices.Equal(rs.Records, want) || rs.LogStart != 1 || rs.LEO != 5 || rs.HW != 4 || !rs.Readable || rs.Broker != 2 {
		t.Fatalf("read %+v", rs)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "segment 3") {
		t.Errorf("the torn tail should be noted once: %q", notes)
	}

	// Retention emptied the log: one empty segment at 9, LEO 9.
	tp0 := history.TP{Topic: "durable", Partition: 0}
	writeFile(t, filepath.Join(dir, "durable-0", "00000000000000000009.log"), nil)
	rs, _, err = readReplica(dir, 2, tp0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Records) != 0 || rs.LEO != 9 || rs.LogStart != 9 || rs.HW != 9 {
		t.Fatalf("empty log read %+v, want LEO 9, log start 9 (the first segment's base is above the checkpoint), HW clamped to 9", rs)
	}

	if _, _, err := readReplica(dir, 2, history.TP{Topic: "missing", Partition: 0}); err == nil {
		t.Error("a replica without a directory must be an error")
	}
	writeFile(t, filepath.Join(dir, "replication-offset-checkpoint"), []byte("0\n1\ndurable one 4\n"))
	if _, _, err := readReplica(dir, 2, tp); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("a corrupt checkpoint should name its line: %v", err)
	}
}

func TestParseOffsets(t *testing.T) {
	text := `# HELP tidemark_broker_high_watermark High watermark of each hosted replica.
# TYPE tidemark_broker_high_watermark gauge
tidemark_broker_high_watermark{partition="0",topic="durable"} 120
tidemark_broker_high_watermark{partition="1",topic="durable"} 7
tidemark_broker_log_end_offset{partition="0",topic="durable"} 123
tidemark_broker_log_end_offset{partition="1",topic="durable"} 7
tidemark_broker_leader_partitions 2
`
	got, err := parseOffsets(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got[history.TP{Topic: "durable", Partition: 0}] != (offsets{hw: 120, leo: 123}) ||
		got[history.TP{Topic: "durable", Partition: 1}] != (offsets{hw: 7, leo: 7}) || len(got) != 2 {
		t.Fatalf("parsed %v", got)
	}
	if _, err := parseOffsets(strings.NewReader(`tidemark_broker_high_watermark{topic="x"} 1` + "\n")); err == nil {
		t.Error("a gauge without a partition label should be an error")
	}
}

// A log dir left on a broker outside the assignment is a stray; one being
// deleted (renamed with the deletion suffix) and the assigned ones are not.
func TestStrayLogs(t *testing.T) {
	dir := t.TempDir()
	tp := history.TP{Topic: "moving", Partition: 1}
	for _, d := range []string{"broker-1/moving-1", "broker-2/moving-1", "broker-3/moving-1.1700000000-delete", "broker-3/moving-0"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := strayLogs(dir, tp, []int32{1, 2}); len(got) != 0 {
		t.Errorf("assigned replicas reported as strays: %q", got)
	}
	got := strayLogs(dir, tp, []int32{2, 3})
	if len(got) != 1 || !strings.Contains(got[0], "broker 1 still holds") {
		t.Errorf("strays %q, want broker 1's moving-1", got)
	}
}
