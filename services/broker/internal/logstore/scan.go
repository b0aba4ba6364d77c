package logstore

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"tidemark.io/services/broker/internal/logstore/vfs"
	"tidemark.io/services/recordbatch"
)

// errTorn marks a batch that is not wholly in the file, or whose length
// field cannot be right: the end of the valid log.
var errTorn = errors.New("torn or impossible batch")

// batchReader reads batches from a segment file through a window, so that
// walking headers costs one read per window rather than one per batch.
type batchReader struct {
	f      vfs.File
	path   string
	end    int64 // bytes that may be read
	buf    []byte
	bufPos int64
	// window is how much the next refill reads; it grows to maxWindow.
	window, maxWindow int
}

func newBatchReader(f vfs.File, path string, end int64, window int) *batchReader {
	return &batchReader{f: f, path: path, end: end, maxWindow: window, bufPos: -1}
}

// bytes returns the n bytes at pos, reading through the window.
func (r *batchReader) bytes(pos, n int64) ([]byte, error) {
	if pos+n > r.end {
		return nil, errTorn
	}
	if r.bufPos >= 0 && pos >= r.bufPos && pos+n <= r.bufPos+int64(len(r.buf)) {
		off := pos - r.bufPos
		return r.buf[off : off+n], nil
	}
	// Start small (an exact index hit needs one header) and grow while walking.
	if r.window < r.maxWindow {
		r.window = min(max(r.window*4, 512), r.maxWindow)
	}
	want := min(max(int64(r.window), n), r.end-pos)
	if int64(cap(r.buf)) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	got, err := r.f.ReadAt(r.buf, pos)
	if err != nil && !(errors.Is(err, io.EOF) && int64(got) >= n) {
		r.bufPos = -1
		if errors.Is(err, io.EOF) {
			return nil, errTorn
		}
		return nil, storageErr(err, "reading %s at %d", r.path, pos)
	}
	r.buf, r.bufPos = r.buf[:got], pos
	return r.buf[:n], nil
}

// header returns the fixed header of the batch at pos and the batch's size,
// checking only that the length is possible and the batch fits before end.
// The header lies in the reader's window: the next header or whole may read
// the window again into the same buffer, under it, so read its fields
// before, or from whole's batch (which starts with the same header) after.
func (r *batchReader) header(pos int64) (recordbatch.Batch, int64, error) {
	if r.end-pos < recordbatch.HeaderSize {
		return nil, 0, fmt.Errorf("%w: %d bytes left at position %d", errTorn, r.end-pos, pos)
	}
	h, err := r.bytes(pos, recordbatch.HeaderSize)
	if err != nil {
		return nil, 0, err
	}
	size, _ := recordbatch.PeekSize(h)
	if size < recordbatch.HeaderSize || pos+size > r.end {
		return nil, 0, fmt.Errorf("%w: length %d at position %d with %d bytes left", errTorn, size, pos, r.end-pos)
	}
	return recordbatch.Batch(h), size, nil
}

// whole returns the complete batch at pos.
func (r *batchReader) whole(pos, size int64) (recordbatch.Batch, error) {
	b, err := r.bytes(pos, size)
	return recordbatch.Batch(b), err
}

// headerWindow suits header walks; recoveryWindow suits full validation.
const (
	headerWindow   = 16 << 10
	recoveryWindow = 1 << 20
)

// headerBufs recycles the windows of header walks: every fetch walks from
// an index entry to its batch, and a fresh window per fetch was the largest
// allocation on the replication path.
var headerBufs = sync.Pool{New: func() any { b := make([]byte, 0, headerWindow); return &b }}

// walkHeaders calls fn for each batch header in [from, to) of s, stopping at
// the first error (errTorn for a damaged tail) or when fn returns false. The
// header passed to fn is only valid during the call.
func walkHeaders(s *segment, from, to int64, fn func(h recordbatch.Batch, pos, size int64) bool) error {
	r := newBatchReader(s.log, s.logPath, to, headerWindow)
	bp := headerBufs.Get().(*[]byte)
	r.buf = (*bp)[:0]
	defer func() {
		if cap(r.buf) <= headerWindow {
			*bp = r.buf[:0]
			headerBufs.Put(bp)
		}
	}()
	for pos := from; pos < to; {
		h, size, err := r.header(pos)
		if err != nil {
			return err
		}
		if !fn(h, pos, size) {
			return nil
		}
		pos += size
	}
	return nil
}

// findBatch returns the position of the batch in s that contains off (the
// first batch whose last offset is at least off), searching below limit.
// found is false when no such batch is below limit.
func findBatch(s *segment, off, limit int64) (pos int64, h recordbatch.Batch, found bool, err error) {
	start, err := s.lookup(off)
	if err != nil {
		return 0, nil, false, err
	}
	if p, ok := s.recent.before(off-s.base, limit); ok && p > start {
		start = p // a batch appended lately: nearer than the index entry
	}
	pos = limit
	err = walkHeaders(s, start, limit, func(b recordbatch.Batch, p, _ int64) bool {
		if b.LastOffset() >= off {
			pos, h, found = p, append(recordbatch.Batch(nil), b...), true
			return false
		}
		return true
	})
	return pos, h, found, tornAsStorage(err, s.logPath)
}

// tornAsStorage turns a torn batch met where the log must be intact (below
// the LEO, after loading) into a storage error naming the file.
func tornAsStorage(err error, path string) error {
	if errors.Is(err, errTorn) {
		return storageErr(err, "reading %s", path)
	}
	return err
}
