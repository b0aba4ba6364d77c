package partition

import (
	"fmt"
	"strconv"
	"strings"

	"tidemark.io/services/broker/internal/logstore"
)

// testEpochs is the log store's real leader-epoch cache, in memory (no
// checkpoint file), with the LEO it answers EndOffsetFor against: the
// scripts and table tests see exactly what a broker's log would answer.
type testEpochs struct {
	cache *logstore.LeaderEpochCache
	leo   func() int64
}

func newTestEpochs(leo int64, spec string) *testEpochs {
	c := &testEpochs{leo: func() int64 { return leo }}
	if err := c.set(spec); err != nil {
		panic(err)
	}
	return c
}

func (c *testEpochs) LatestEpoch() int32 { return c.cache.LatestEpoch() }

func (c *testEpochs) EndOffsetFor(epoch int32) (int32, int64) {
	return c.cache.EndOffsetFor(epoch, c.leo())
}

// assign records the start of a new epoch (a new leader's
// AssignEpochStartOffset).
func (c *testEpochs) assign(epoch int32, start int64) {
	if _, err := c.cache.Assign(epoch, start); err != nil {
		panic(err)
	}
}

// truncateFromEnd drops the epochs that start at or after offset.
func (c *testEpochs) truncateFromEnd(offset int64) {
	if err := c.cache.TruncateFromEnd(offset); err != nil {
		panic(err)
	}
}

// set parses "0@0,2@10" (epoch@startOffset); "" empties the cache.
func (c *testEpochs) set(spec string) error {
	var entries []logstore.EpochEntry
	if spec != "" && spec != "none" {
		for _, part := range strings.Split(spec, ",") {
			e, s, ok := strings.Cut(part, "@")
			epoch, err1 := strconv.ParseInt(e, 10, 32)
			start, err2 := strconv.ParseInt(s, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				return fmt.Errorf("bad epoch entry %q (want epoch@offset)", part)
			}
			if n := len(entries); n > 0 && (int32(epoch) <= entries[n-1].Epoch || start < entries[n-1].StartOffset) {
				return fmt.Errorf("epoch entry %q does not follow %d@%d", part, entries[n-1].Epoch, entries[n-1].StartOffset)
			}
			entries = append(entries, logstore.EpochEntry{Epoch: int32(epoch), StartOffset: start})
		}
	}
	c.cache = logstore.NewLeaderEpochCache(entries, nil, nil)
	return nil
}

func (c *testEpochs) String() string {
	entries := c.cache.Entries()
	if len(entries) == 0 {
		return "empty"
	}
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset)
	}
	return strings.Join(parts, " ")
}

// fakeBrokers is a membership view: every broker is eligible unless marked
// otherwise, and epochs are tracked only for brokers given one.
type fakeBrokers struct {
	ineligible map[int32]bool
	epochs     map[int32]int64
}

func newFakeBrokers() *fakeBrokers {
	return &fakeBrokers{ineligible: map[int32]bool{}, epochs: map[int32]int64{}}
}

func (b *fakeBrokers) IsrEligible(id int32) bool { return !b.ineligible[id] }

func (b *fakeBrokers) BrokerEpoch(id int32) (int64, bool) {
	e, ok := b.epochs[id]
	return e, ok
}
