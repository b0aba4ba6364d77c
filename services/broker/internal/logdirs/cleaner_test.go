package logdirs

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// The broker's tidemark_log_cleaner_*_total are Prometheus counters summed
// over the log dirs (Dirs.CleanerStats). A counter must never decrease: a
// decrease reads as a process restart, and rate()/increase() count the
// whole remaining value again. When a directory goes offline its
// cleaner's passes must stay in the sum.
func TestCleanerCountersDoNotGoBackwardsWhenADirGoesOffline(t *testing.T) {
	mem := vfs.NewMem()
	faults := vfs.NewFaultFS(mem)
	var ds *Dirs
	hw := func(tp TopicPartition) (int64, bool) {
		l, ok := ds.Log(tp)
		if !ok {
			return 0, false
		}
		return l.LogEndOffset(), true
	}
	sink := &offlineSink{}
	var err error
	ds, err = Open([]string{"/a", "/b"}, Options{
		Manager: func(path string) logstore.ManagerOptions {
			o := logstore.ManagerOptions{FS: mem, NoBackground: true, HighWatermark: hw, CleanerDedupeBytes: 1 << 20}
			if path == "/b" {
				o.FS = faults
			}
			return o
		},
		OnOffline: sink.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ds.Close() })
	cfg := logstore.DefaultConfig()
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 200
	cfg.CleanupPolicy = "compact"
	cfg.DeleteRetention = time.Hour
	var logs []*logstore.Log
	for _, tp := range []TopicPartition{tp0, tp1} {
		l, err := ds.GetOrCreate(tp, cfg)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
		for i := range 40 {
			var b recordbatch.Builder
			for _, k := range []string{"a", "b", "c"} {
				b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(k),
					Value: []byte(fmt.Sprintf("%s-%d-%s", k, i, strings.Repeat("x", 40)))})
			}
			if _, err := l.AppendAsLeader(b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range ds.dirs {
		for d.m.RunCleaner() {
		}
	}
	before := ds.CleanerStats()
	if before.Passes < 2 {
		t.Fatalf("cleaner passes %d, want one per directory", before.Passes)
	}
	lb := logs[1]
	if !strings.HasPrefix(ds.holder(tp1).path, "/b") {
		lb = logs[0]
	}
	faults.Inject(vfs.Fault{Ops: vfs.OpWrite, Path: "/b/", Err: syscall.EIO})
	var zb recordbatch.Builder
	zb.Append(recordbatch.Record{Timestamp: 1, Key: []byte("z"), Value: []byte("z")})
	if _, err := lb.AppendAsLeader(zb.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence), 0); kerr.CodeOf(err) != kerr.KafkaStorageError {
		t.Fatalf("append on the failing disk: %v", err)
	}
	sink.wait(t)
	after := ds.CleanerStats()
	if after.Passes < before.Passes || after.BytesRead < before.BytesRead || after.BytesWritten < before.BytesWritten || after.RecordsRemoved < before.RecordsRemoved {
		t.Fatalf("cleaner counters went backwards when /b went offline: passes %d -> %d, bytes read %d -> %d, written %d -> %d, records removed %d -> %d",
			before.Passes, after.Passes, before.BytesRead, after.BytesRead, before.BytesWritten, after.BytesWritten, before.RecordsRemoved, after.RecordsRemoved)
	}
}
