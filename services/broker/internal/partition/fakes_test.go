package partition

import (
	"fmt"
	"strconv"
	"strings"
)

// fakeEpochs is an in-memory leader-epoch cache with Kafka's endOffsetFor
// semantics (LeaderEpochFileCache), standing in for the log store's.
type fakeEpochs struct {
	entries []epochEntry
	leo     func() int64
}

type epochEntry struct {
	epoch int32
	start int64
}

func newFakeEpochs(leo int64, spec string) *fakeEpochs {
	c := &fakeEpochs{leo: func() int64 { return leo }}
	if err := c.set(spec); err != nil {
		panic(err)
	}
	return c
}

func (c *fakeEpochs) LatestEpoch() int32 {
	if len(c.entries) == 0 {
		return UndefinedEpoch
	}
	return c.entries[len(c.entries)-1].epoch
}

func (c *fakeEpochs) EndOffsetFor(epoch int32) (int32, int64) {
	if epoch == UndefinedEpoch || len(c.entries) == 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	if epoch == c.LatestEpoch() {
		return epoch, c.leo()
	}
	var floor, higher *epochEntry
	for i := range c.entries {
		e := &c.entries[i]
		if e.epoch <= epoch {
			floor = e
		} else if higher == nil {
			higher = e
		}
	}
	switch {
	case higher == nil:
		return UndefinedEpoch, UndefinedOffset
	case floor == nil:
		return epoch, higher.start
	}
	return floor.epoch, higher.start
}

// assign records the start of a new epoch, dropping entries it supersedes.
func (c *fakeEpochs) assign(epoch int32, start int64) {
	kept := c.entries[:0]
	for _, e := range c.entries {
		if e.epoch < epoch && e.start < start {
			kept = append(kept, e)
		}
	}
	c.entries = append(kept, epochEntry{epoch, start})
}

// truncateFromEnd drops the epochs that start at or after offset.
func (c *fakeEpochs) truncateFromEnd(offset int64) {
	kept := c.entries[:0]
	for _, e := range c.entries {
		if e.start < offset {
			kept = append(kept, e)
		}
	}
	c.entries = kept
}

// set parses "0@0,2@10" (epoch@startOffset); "" empties the cache.
func (c *fakeEpochs) set(spec string) error {
	c.entries = nil
	if spec == "" || spec == "none" {
		return nil
	}
	for _, part := range strings.Split(spec, ",") {
		e, s, ok := strings.Cut(part, "@")
		epoch, err1 := strconv.ParseInt(e, 10, 32)
		start, err2 := strconv.ParseInt(s, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("bad epoch entry %q (want epoch@offset)", part)
		}
		c.entries = append(c.entries, epochEntry{int32(epoch), start})
	}
	return nil
}

func (c *fakeEpochs) String() string {
	if len(c.entries) == 0 {
		return "empty"
	}
	parts := make([]string, len(c.entries))
	for i, e := range c.entries {
		parts[i] = fmt.Sprintf("%d@%d", e.epoch, e.start)
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
