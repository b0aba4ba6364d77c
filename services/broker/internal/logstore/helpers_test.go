package logstore

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// smallConfig makes segments and index intervals small enough that a few
// KiB of data exercise rolls and sparse lookups.
func smallConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 2048
	c.IndexIntervalBytes = 200
	return c
}

const testDir = "/data/t-0"

func openLog(t testing.TB, fsys vfs.FS, cfg Config, clk *clock) *Log {
	t.Helper()
	return openLogOpts(t, Options{FS: fsys, Dir: testDir, Config: cfg, Now: clk.Now})
}

func openLogOpts(t testing.TB, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// batchSpec describes a batch to build.
type batchSpec struct {
	records   int
	valueSize int
	ts        int64 // first record's timestamp; records go up by 1 ms
	pid       int64
	epoch     int16
	seq       int32
}

func plain(records, valueSize int, ts int64) batchSpec {
	return batchSpec{records: records, valueSize: valueSize, ts: ts, pid: -1, epoch: -1, seq: -1}
}

func (s batchSpec) build() []byte {
	var b recordbatch.Builder
	for i := range s.records {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, s.valueSize)
		b.Append(recordbatch.Record{Timestamp: s.ts + int64(i), Key: []byte(fmt.Sprint(i)), Value: v})
	}
	return bytes.Clone(b.Build(s.pid, s.epoch, s.seq))
}

func appendLeader(t testing.TB, l *Log, spec batchSpec, epoch int32) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(spec.build(), epoch)
	if err != nil {
		t.Fatalf("AppendAsLeader: %v", err)
	}
	return info
}

// fill appends n batches of the given shape as leader of epoch 0 and
// returns the LEO.
func fill(t testing.TB, l *Log, n, records, valueSize int) int64 {
	t.Helper()
	for i := range n {
		appendLeader(t, l, plain(records, valueSize, int64(1000+i*10)), 0)
	}
	return l.LogEndOffset()
}

// readAll reads [from, to) batch by batch and checks every batch validates
// and offsets are contiguous.
func readAll(t testing.TB, l *Log, from, to int64, maxBytes int) []recordbatch.Batch {
	t.Helper()
	var out []recordbatch.Batch
	next := from
	for next < to {
		res, err := l.Read(next, maxBytes, to)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("Read(%d) returned nothing below %d", next, to)
		}
		for b, err := range recordbatch.All(res.Records) {
			if err != nil {
				t.Fatalf("Read(%d) returned torn data: %v", next, err)
			}
			if err := b.Validate(); err != nil {
				t.Fatalf("Read(%d) returned an invalid batch: %v", next, err)
			}
			if len(out) == 0 && (b.BaseOffset() > from || b.LastOffset() < from) {
				t.Fatalf("first batch [%d, %d] does not contain %d", b.BaseOffset(), b.LastOffset(), from)
			}
			if len(out) > 0 && b.BaseOffset() != out[len(out)-1].NextOffset() {
				t.Fatalf("batch at %d does not follow %d", b.BaseOffset(), out[len(out)-1].NextOffset())
			}
			out = append(out, b)
		}
		next = res.NextOffset
	}
	return out
}

func wantCode(t testing.TB, err error, code kerr.Code) {
	t.Helper()
	if got := kerr.CodeOf(err); got != code {
		t.Fatalf("error %v has code %v, want %v", err, got, code)
	}
}

func newMem(t testing.TB) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	if err := vfs.MkdirAllDurable(m, "/data"); err != nil { // a data dir that was there
		t.Fatal(err)
	}
	return m
}

// checkReadAt reads one batch at off and checks it holds off and validates.
func checkReadAt(t testing.TB, l *Log, off int64) {
	t.Helper()
	res, err := l.Read(off, 1, l.LogEndOffset())
	if err != nil {
		t.Fatalf("Read(%d): %v", off, err)
	}
	b := recordbatch.Batch(res.Records)
	if err := b.Validate(); err != nil || b.BaseOffset() > off || b.LastOffset() < off {
		t.Fatalf("Read(%d) returned [%d, %d]: %v", off, b.BaseOffset(), b.LastOffset(), err)
	}
}
