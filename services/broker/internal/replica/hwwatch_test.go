package replica

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A leader's HW that stays below its LEO with the ISR full (an ISR shrink
// that cannot commit, a stuck HW rule) is a partition whose acks=all
// writes all time out: it is counted in tidemark_broker_hw_stalled_partitions
// and warned about once, after twice replica.lag.time.max.ms unmoved, and
// said to be over when the HW moves.
func TestAStalledHighWatermarkIsCountedAndLogged(t *testing.T) {
	e := newEnv(t)
	logs := &lockedBuffer{}
	e.logger = slog.New(slog.NewTextHandler(logs, nil))
	e.m, e.meta = e.newManager(1)
	e.updateMetadata()
	e.state(1, 1, 1, []int32{1, 2, 3}, nil)
	if _, err := e.m.Produce(t.Context(), tp0, 1, batch("a"), produceTimeout); err != nil {
		t.Fatal(err)
	}
	r := e.replica()
	const lag = 10 * time.Second
	start := e.clock.Now()
	stalls := func() int { return strings.Count(logs.String(), "High watermark stalled") }

	for _, after := range []time.Duration{0, lag, 2*lag - time.Millisecond} {
		e.m.checkHW(r, start.Add(after), lag)
		if n := e.gauge("tidemark_broker_hw_stalled_partitions"); n != 0 || stalls() != 0 {
			t.Fatalf("HW unmoved for %v: %v stalled, %d warnings; want none before %v", after, n, stalls(), 2*lag)
		}
	}
	for _, after := range []time.Duration{2 * lag, 3 * lag} {
		e.m.checkHW(r, start.Add(after), lag)
		if n := e.gauge("tidemark_broker_hw_stalled_partitions"); n != 1 || stalls() != 1 {
			t.Fatalf("HW unmoved for %v: %v stalled, %d warnings; want 1 and 1:\n%s", after, n, stalls(), logs)
		}
	}
	if !strings.Contains(logs.String(), "topic=t partition=0 leader_epoch=1 high_watermark=0 log_end_offset=1 isr=1,2,3") {
		t.Fatalf("the warning does not name the partition, its offsets and ISR:\n%s", logs)
	}

	e.followerFetch(2, 1, 1)
	e.followerFetch(3, 1, 1)
	e.m.checkHW(r, start.Add(4*lag), lag)
	if n := e.gauge("tidemark_broker_hw_stalled_partitions"); n != 0 || !strings.Contains(logs.String(), "High watermark stall over") {
		t.Fatalf("HW at the LEO again: %v stalled, want 0 and the stall said to be over:\n%s", n, logs)
	}
}
