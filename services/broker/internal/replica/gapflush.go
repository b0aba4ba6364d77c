package replica

import (
	"sync"
	"sync/atomic"

	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
)

// maxGapFlushes bounds the gap flushes of one fetch round run at once: each
// is a segment fsync and a checkpoint write, and a fetcher copying many
// cleaned partitions (a reassignment of compacted topics) must not start
// an fsync per partition on one disk.
const maxGapFlushes = 8

// gapFlush is a partition whose data after a compaction gap must be
// durable before its fetch p goes to the leader (logstore.Log.FlushGaps).
type gapFlush struct {
	tp  TP
	log Log
	p   *replicationv1.ReplicaFetchPartition
	err error
}

// flushGaps flushes the round's f.flushes and appends the fetch of each
// partition whose flush succeeded to parts; one whose flush failed is left
// out and backed off. The flushes run side by side, so the round waits
// for the slowest of them, not their sum: the caught-up partitions of the
// same request (acks=all writes wait on them) were held up by every
// partition copying cleaned data. No goroutine for one flush or none.
func (f *fetcher) flushGaps(parts []*replicationv1.ReplicaFetchPartition) []*replicationv1.ReplicaFetchPartition {
	if len(f.flushes) == 0 {
		return parts
	}
	runGapFlushes(f.flushes, maxGapFlushes)
	for i := range f.flushes {
		g := &f.flushes[i]
		if g.err != nil {
			f.m.log.Error("follower flush failed", "topic", g.tp.Topic, "partition", g.tp.Partition, "err", g.err)
			f.delay(g.tp, fetchBackoff)
			continue
		}
		parts = append(parts, g.p)
	}
	clear(f.flushes) // drop the logs and requests until the next round
	f.flushes = f.flushes[:0]
	return parts
}

// runGapFlushes runs the flushes of fl, at most limit at once, and sets
// each one's err; it returns when all are done.
func runGapFlushes(fl []gapFlush, limit int) {
	if len(fl) == 1 {
		fl[0].err = fl[0].log.FlushGaps()
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(fl), limit) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(fl)); i = next.Add(1) - 1 {
				fl[i].err = fl[i].log.FlushGaps()
			}
		})
	}
	wg.Wait()
}
