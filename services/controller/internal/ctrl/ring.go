package ctrl

import (
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// ring keeps the most recent ClusterEvents, numbered from 1, for
// WatchCluster. Loop-owned.
type ring struct {
	buf  []*controlv1.ClusterEvent
	next uint64 // sequence number the next event gets
}

func newRing(n int) *ring { return &ring{buf: make([]*controlv1.ClusterEvent, n), next: 1} }

func (r *ring) add(ev *controlv1.ClusterEvent) {
	r.buf[r.next%uint64(len(r.buf))] = ev
	r.next++
}

// since returns the retained events numbered above seq, oldest first, and
// the number of the newest one.
func (r *ring) since(seq uint64) ([]*controlv1.ClusterEvent, uint64) {
	last := r.next - 1
	from := seq + 1
	if n := uint64(len(r.buf)); last >= n && from <= last-n {
		from = last - n + 1
	}
	out := make([]*controlv1.ClusterEvent, 0, last+1-min(from, last+1))
	for s := from; s <= last; s++ {
		out = append(out, r.buf[s%uint64(len(r.buf))])
	}
	return out, last
}
