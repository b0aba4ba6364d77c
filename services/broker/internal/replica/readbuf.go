package replica

import (
	"sync"

	"tidemark.io/services/broker/internal/logstore"
)

// maxPooledRead bounds the read buffers kept for reuse: a rare large read
// (a catching-up follower's megabytes) is left to the collector rather than
// pinned in the pool.
const maxPooledRead = 4 << 20

// readBuffers holds the buffers follower fetches read the log into. A
// leader otherwise allocated a fresh buffer per follower per fetch: at
// replication rates that was two thirds of its allocation, and the garbage
// collections it caused (a dozen a second on one core) showed in the
// produce latency tail. A buffer comes back once the answer holding it has
// been sent (Manager.RecycleFetch).
var readBuffers = sync.Pool{New: func() any { return new([]byte) }}

func getReadBuffer() *[]byte { return readBuffers.Get().(*[]byte) }

func putReadBuffer(b *[]byte) {
	if b == nil || cap(*b) == 0 || cap(*b) > maxPooledRead {
		return
	}
	*b = (*b)[:0]
	readBuffers.Put(b)
}

// readPooled reads log into a pooled buffer. buf, nil when nothing was
// read, is the buffer to give back (putReadBuffer) once rr.Records is no
// longer used.
func readPooled(log Log, offset int64, maxBytes int, upperBound int64) (rr logstore.ReadResult, buf *[]byte, err error) {
	buf = getReadBuffer()
	rr, err = log.ReadInto(*buf, offset, maxBytes, upperBound)
	switch {
	case len(rr.Records) == 0:
		putReadBuffer(buf)
		return rr, nil, err
	case cap(*buf) < len(rr.Records):
		// buf was too small: ReadInto allocated, and that one is kept.
		*buf = rr.Records[:0]
	}
	return rr, buf, err
}

// Release gives back the read buffer res.Records aliases and forgets the
// records. Call it once they are no longer used (the reply holding them
// sent); not calling it is safe.
func (res *ConsumerFetchResult) Release() {
	if res.buf != nil {
		putReadBuffer(res.buf)
		res.buf, res.Records = nil, nil
	}
}

// RecycleFetch returns the read buffers of answers to the pool. Call it
// only once the answers' Records are no longer used (after the response
// holding them has been marshalled and sent); not calling it is safe.
func (m *Manager) RecycleFetch(answers []FollowerFetchAnswer) {
	for i := range answers {
		answers[i].recycle()
	}
}

// recycle gives back a's read buffer and forgets its records.
func (a *FollowerFetchAnswer) recycle() {
	if a.buf != nil {
		putReadBuffer(a.buf)
		a.buf, a.Records = nil, nil
	}
}
