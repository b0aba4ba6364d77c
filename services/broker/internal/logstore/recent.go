package logstore

import (
	"math"
	"sync/atomic"
)

// recentStartCount is how many of a segment's last batch starts it keeps.
const recentStartCount = 16

// recentStarts remembers where a segment's last batches begin. Followers
// and consumers at the log's end ask for offsets appended moments ago, and
// the sparse index (an entry per index.interval.bytes) made every such read
// scan up to that many bytes from the entry before them: three reads of the
// file per fetch where two do. Each entry is one word, (offset - base) << 32
// | position, written by the appender (under the log's mu) and read with no
// lock; every entry is the start of a batch of the segment's current bytes
// or zero (the segment's first position, always a start). A truncation of
// the segment clears them holding fileMu for writing, so no reader sees an
// entry whose batch was cut.
type recentStarts struct {
	starts [recentStartCount]atomic.Uint64
	next   int // appender only
}

// add records that the batch of offset rel (from the segment's base) begins
// at pos.
func (r *recentStarts) add(rel, pos int64) {
	if rel < 0 || rel > math.MaxUint32 || pos < 0 || pos > math.MaxUint32 {
		return // not packable: the index answers for it
	}
	r.starts[r.next].Store(uint64(rel)<<32 | uint64(uint32(pos)))
	r.next = (r.next + 1) % recentStartCount
}

// before returns the latest recorded start of a batch whose base is at most
// rel, below limit (the segment's size the reader works with: an entry at
// or past it is of a batch appended since); ok is false when none is.
func (r *recentStarts) before(rel, limit int64) (pos int64, ok bool) {
	pos = -1
	for i := range r.starts {
		v := r.starts[i].Load()
		if e, p := int64(v>>32), int64(uint32(v)); e <= rel && p < limit && p > pos {
			pos = p
		}
	}
	return pos, pos >= 0
}

// clear forgets every start: a truncation (fileMu held for writing) or a
// recovery walk, which rebuilds them (before the log is published).
func (r *recentStarts) clear() {
	for i := range r.starts {
		r.starts[i].Store(0)
	}
	r.next = 0
}
