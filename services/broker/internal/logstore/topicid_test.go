package logstore

import (
	"strings"
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// The topic id is recorded once, durably, in Kafka's partition.metadata
// format, survives a reopen, and cannot be changed.
func TestTopicIDIsRecordedOnce(t *testing.T) {
	fsys := newMem(t)
	m := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	l, err := m.GetOrCreate(tpA, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l.TopicID() != "" {
		t.Fatalf("a new log has topic id %q", l.TopicID())
	}
	if err := l.SetTopicID("a\nb"); err == nil {
		t.Fatal("an id with a newline was accepted")
	}
	if err := l.SetTopicID("q9Xw2mPZRvSwy0_Ml3xK1A"); err != nil {
		t.Fatal(err)
	}
	if err := l.SetTopicID("q9Xw2mPZRvSwy0_Ml3xK1A"); err != nil {
		t.Fatalf("setting the same id again: %v", err)
	}
	if err := l.SetTopicID("another"); err == nil || !strings.Contains(err.Error(), "belongs to topic id q9Xw2mPZRvSwy0_Ml3xK1A") {
		t.Fatalf("changing the id: %v", err)
	}
	data, err := vfs.ReadFile(fsys, "/data/"+tpA.String()+"/"+partitionMetadataFile)
	if err != nil || string(data) != "version: 0\ntopic_id: q9Xw2mPZRvSwy0_Ml3xK1A\n" {
		t.Fatalf("partition.metadata = %q, %v", data, err)
	}
	m.Close()

	m = openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	defer m.Close()
	l, _ = m.Log(tpA)
	if l == nil || l.TopicID() != "q9Xw2mPZRvSwy0_Ml3xK1A" {
		t.Fatalf("after a reopen: %v", l)
	}
}

// A damaged partition.metadata takes the partition offline, naming the
// file, rather than letting the log pass for any topic.
func TestDamagedPartitionMetadataTakesThePartitionOffline(t *testing.T) {
	fsys := newMem(t)
	m := openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	if _, err := m.GetOrCreate(tpA, smallConfig()); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := vfs.WriteFileAtomic(fsys, "/data/"+tpA.String(), partitionMetadataFile, []byte("version: 7\n")); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, fsys, &hwTable{m: map[TopicPartition]int64{}})
	defer m.Close()
	if err := m.Offline()[tpA]; err == nil || !strings.Contains(err.Error(), partitionMetadataFile) {
		t.Fatalf("offline error %v, want one naming %s", err, partitionMetadataFile)
	}
}
