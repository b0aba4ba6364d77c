package replica

import "sync"

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
