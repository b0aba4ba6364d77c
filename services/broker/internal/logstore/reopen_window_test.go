package logstore

import (
	"testing"

	"tidemark.io/services/broker/internal/logstore/vfs"
)

// A log closed cleanly reopens without a rebuilt index, whatever the sizes
// of its batches. The sanity check of the active segment read each batch's
// header from the reader's window, then the whole batch, and took the next
// offset from the header: when the whole batch did not fit the window, the
// window was read again into the same buffer, under the header, and the
// next offset came out as garbage, so a segment with a batch across the
// window's first 512 bytes and less than 512 bytes after it "failed its
// sanity check" and was recovered in full on every clean restart (seen on
// a small __consumer_offsets partition of the dev cluster).
func TestCleanReopenTrustsTheActiveSegmentWhateverItsBatchSizes(t *testing.T) {
	cfg := DefaultConfig() // one index entry per 4 KiB: the walk starts at 0
	for first := 200; first <= 400; first += 8 {
		for rest := 60; rest <= 140; rest += 20 {
			mem := vfs.NewMem()
			l := openLogOpts(t, Options{FS: mem, Dir: testDir, Config: cfg})
			appendLeader(t, l, plain(1, first, 1000), 0)
			leo := fill(t, l, 3, 1, rest)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			r := openLogOpts(t, Options{FS: mem, Dir: testDir, Config: cfg, CleanShutdown: true, RecoveryPoint: leo})
			if got := r.Stats().RebuiltIndexes; got != 0 || r.LogEndOffset() != leo {
				t.Fatalf("clean reopen of a %d-byte value then three of %d bytes: %d indexes rebuilt, LEO %d (want 0 and %d)",
					first, rest, got, r.LogEndOffset(), leo)
			}
		}
	}
}
