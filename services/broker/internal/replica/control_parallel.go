package replica

import (
	"sync"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
)

// controlParallelism is how many partitions of one LeaderAndIsr are applied
// at once. Creating a log, recording its topic id and recording a new
// leader epoch each wait for fsyncs (file and directory); one after
// another, a controller's push of a thousand new leaderships or a topic of
// two thousand partitions took seconds to tens of seconds on a shared
// disk, and the UpdateMetadata queued behind it kept clients on the old
// leaders all that time. Overlapped, the disk commits them together (the
// file system's journal takes the fsyncs pending at once in one commit),
// so more at once cost little more than one: a dead broker leaves each
// survivor about a thousand new leader epochs to record.
const controlParallelism = 64

// eachPartitionState calls apply(i) for every state of one control
// request, on up to workers goroutines, and returns when all are done.
// The states of one partition (a request should carry one, but nothing
// forbids more) stay on one goroutine in request order.
func eachPartitionState(states []*commonv1.PartitionState, workers int, apply func(i int)) {
	type key struct {
		topic     string
		partition int32
	}
	var groups [][]int
	at := map[key]int{}
	for i, ps := range states {
		k := key{ps.GetTopic(), ps.GetPartition()}
		g, ok := at[k]
		if !ok {
			g = len(groups)
			at[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	workers = min(workers, len(groups))
	if workers <= 1 {
		for i := range states {
			apply(i)
		}
		return
	}
	next := make(chan []int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range next {
				for _, i := range g {
					apply(i)
				}
			}
		}()
	}
	for _, g := range groups {
		next <- g
	}
	close(next)
	wg.Wait()
}
