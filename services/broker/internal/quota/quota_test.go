package quota

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tidemark.io/services/metastore"
	"tidemark.io/services/topicconfig"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func cfg(def int64, overrides string) Config {
	return Config{Default: def, Overrides: overrides, Samples: 11, Window: time.Second}
}

func TestOverQuotaPrincipalIsThrottledOthersAreNot(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := New(prometheus.NewRegistry(), clk.now)
	c := cfg(Unlimited, "alice:1000")
	// alice: 20,000 bytes judged over the minimum window of 10 s is
	// 2,000 B/s, twice her 1,000 B/s: held back (2000-1000)/1000 × 10 s.
	if d := m.Record(Produce, c, Client{Principal: "alice"}, 20_000); d != 10*time.Second {
		t.Fatalf("alice throttle = %v, want 10s", d)
	}
	// bob has no override and the default is unlimited.
	if d := m.Record(Produce, c, Client{Principal: "bob"}, 1<<30); d != 0 {
		t.Fatalf("bob throttle = %v, want 0", d)
	}
	// Fetch bytes are a separate quota.
	if d := m.Record(Fetch, c, Client{Principal: "alice"}, 1); d != 0 {
		t.Fatalf("alice fetch throttle = %v, want 0 (fetch has no quota here)", d)
	}
	if n := testutil.ToFloat64(m.throttled.WithLabelValues("produce")); n != 1 {
		t.Fatalf("throttled_total{produce} = %v, want 1", n)
	}
	if s := testutil.ToFloat64(m.delay.WithLabelValues("produce")); s != 10 {
		t.Fatalf("throttle_seconds_total{produce} = %v, want 10", s)
	}
}

func TestWithinQuotaIsNotThrottledAndOldSamplesExpire(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := New(nil, clk.now)
	c := cfg(1000, "")
	for range 10 { // 1,000 B/s exactly, one sample a second
		if d := m.Record(Fetch, c, Client{Principal: "ANONYMOUS"}, 1000); d != 0 {
			t.Fatalf("at the rate: throttle %v", d)
		}
		clk.t = clk.t.Add(time.Second)
	}
	// A burst over the rate is throttled...
	if d := m.Record(Fetch, c, Client{Principal: "ANONYMOUS"}, 50_000); d == 0 {
		t.Fatal("burst not throttled")
	}
	// ...and forgotten once it has left the window.
	clk.t = clk.t.Add(12 * time.Second)
	if d := m.Record(Fetch, c, Client{Principal: "ANONYMOUS"}, 10); d != 0 {
		t.Fatalf("after the window: throttle %v", d)
	}
}

func TestThrottleIsCappedAtTheWindow(t *testing.T) {
	m := New(nil, (&clock{t: time.Unix(1, 0)}).now)
	c := Config{Default: 1, Samples: 2, Window: time.Second}
	if d := m.Record(Produce, c, Client{Principal: "x"}, 1<<40); d != 2*time.Second {
		t.Fatalf("throttle = %v, want the cap 2s (quota.window.num × quota.window.size.seconds)", d)
	}
}

// Windows over about 24 days: the throttle stays within what
// throttle_time_ms (an int32) can carry, and the wait is as long as the
// answer says. Before, 11 windows of 3 days asked for 33 days, which the
// answer reported as a negative throttle_time_ms; and 5 windows of the
// largest quota.window.size.seconds overflowed the cap, which then
// throttled nothing.
func TestThrottleFitsThrottleTimeMs(t *testing.T) {
	m := New(nil, (&clock{t: time.Unix(1, 0)}).now)
	for _, c := range []Config{
		{Default: 1, Samples: 11, Window: 72 * time.Hour},
		{Default: 1, Samples: 5, Window: math.MaxInt32 * time.Second},
	} {
		d := m.Record(Produce, c, Client{Principal: "x"}, 1<<40)
		if d <= 0 || d > MaxThrottle {
			t.Errorf("%d windows of %v: throttle %v, want in (0, %v]", c.Samples, c.Window, d, MaxThrottle)
		}
		if ms := Millis(d); ms != math.MaxInt32 {
			t.Errorf("%d windows of %v: throttle_time_ms %d, want %d", c.Samples, c.Window, ms, int32(math.MaxInt32))
		}
	}
	for d, want := range map[time.Duration]int32{0: 0, -time.Second: 0, time.Microsecond: 1, 1500 * time.Millisecond: 1500,
		MaxThrottle: math.MaxInt32, 30 * 24 * time.Hour: math.MaxInt32, math.MaxInt64: math.MaxInt32} {
		if got := Millis(d); got != want {
			t.Errorf("Millis(%v) = %d, want %d", d, got, want)
		}
	}
}

// TestOwedRecordsNothing: Owed reports what a principal over quota owes
// now, shrinking as time passes, without adding to its rate or to the
// throttle metrics; a principal never seen owes nothing and is not kept.
func TestOwedRecordsNothing(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := New(prometheus.NewRegistry(), clk.now)
	c := cfg(Unlimited, "alice:1000")
	if d := m.Owed(Fetch, c, Client{Principal: "alice"}); d != 0 {
		t.Fatalf("owed before any fetch = %v, want 0", d)
	}
	if len(m.rates) != 0 {
		t.Fatalf("Owed kept a rate for a principal never recorded: %v", m.rates)
	}
	if d := m.Record(Fetch, c, Client{Principal: "alice"}, 20_000); d != 10*time.Second {
		t.Fatalf("record = %v, want 10s", d)
	}
	for range 3 {
		if d := m.Owed(Fetch, c, Client{Principal: "alice"}); d != 10*time.Second {
			t.Fatalf("owed = %v, want 10s (asking must not add bytes)", d)
		}
	}
	clk.t = clk.t.Add(5 * time.Second) // what is left of the 10 s throttle
	if d := m.Owed(Fetch, c, Client{Principal: "alice"}); d != 5*time.Second {
		t.Fatalf("owed after 5 s = %v, want 5s", d)
	}
	clk.t = clk.t.Add(15 * time.Second) // the samples have expired
	if d := m.Owed(Fetch, c, Client{Principal: "alice"}); d != 0 {
		t.Fatalf("owed after the window = %v, want 0", d)
	}
	if n := testutil.ToFloat64(m.throttled.WithLabelValues("fetch")); n != 1 {
		t.Fatalf("throttled_total{fetch} = %v, want 1 (Owed counts nothing)", n)
	}
}

// A rate keeps at most topicconfig.MaxQuotaWindowNum samples, whatever its
// Config asks: each principal allocates them when first measured. Before,
// a count of 2^20 allocated 32 MiB per principal and kind (and 10^9, which
// quota.window.num took, 32 GB).
func TestSamplesAreBounded(t *testing.T) {
	const asked = 1 << 20
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := New(nil, clk.now)
	c := Config{Default: 1000, Samples: asked, Window: time.Second}
	if n := allocated(func() { m.Record(Produce, c, Client{Principal: "alice"}, 10) }); n > 64<<10 {
		t.Errorf("measuring a principal allocated %d bytes for %d samples asked", n, asked)
	}
	if got := len(m.rates[key{Produce, "alice", ""}].starts); got != topicconfig.MaxQuotaWindowNum {
		t.Errorf("a principal keeps %d samples, want %d", got, topicconfig.MaxQuotaWindowNum)
	}
	q := NewReplication(clk.now)
	if n := allocated(func() { q.Set(1000, asked, time.Second); q.Record(10) }); n > 64<<10 {
		t.Errorf("the replication throttle allocated %d bytes for %d samples asked", n, asked)
	}
}

// A principal whose throttle has run out owes nothing, even while its rate
// is still judged over the minimum window of window.num - 1 samples, as
// Kafka mutes a throttled client's connection for the throttle time and
// no longer: after a burst and an idle gap longer than its throttle, the
// next request is served at once and its own bytes decide its throttle.
// Before, the rate alone decided what was owed: the burst's excess was
// owed again after the gap (all 5 s of it after an idle 8 s), on top of the
// throttle the next request was then given.
func TestIdleGapLongerThanTheThrottleOwesNothing(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := New(nil, clk.now)
	c := cfg(Unlimited, "alice:1000")
	alice := Client{Principal: "alice"}
	// 15,000 bytes over the minimum 10 s window: 1,500 B/s, held 5 s.
	if d := m.Record(Produce, c, alice, 15_000); d != 5*time.Second {
		t.Fatalf("burst throttle = %v, want 5s", d)
	}
	clk.t = clk.t.Add(2 * time.Second) // a request pipelined behind the burst
	if d := m.Owed(Produce, c, alice); d != 3*time.Second {
		t.Fatalf("owed 2 s into a 5 s throttle = %v, want the 3s left", d)
	}
	clk.t = clk.t.Add(6 * time.Second) // idle past the throttle
	if d := m.Owed(Produce, c, alice); d != 0 {
		t.Fatalf("owed after an idle gap longer than the throttle = %v, want 0", d)
	}
	// The next request's own throttle counts the burst still in the
	// window, as Kafka's does: 16,000 bytes over 10 s.
	if d := m.Record(Produce, c, alice, 1000); d != 6*time.Second {
		t.Fatalf("throttle after the gap = %v, want 6s", d)
	}
}

// A quota raised while a principal is throttled shortens what it owes at
// once, and one removed leaves nothing owed: the rate, not only the throttle
// time given out before, bounds the wait.
func TestRaisedQuotaShortensWhatIsOwed(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := New(nil, clk.now)
	m.SetEntities(map[metastore.QuotaEntity]metastore.ClientQuotaValues{{User: "alice"}: {ProducerByteRate: 1000}})
	c := cfg(Unlimited, "")
	alice := Client{Principal: "alice"}
	if d := m.Record(Produce, c, alice, 20_000); d != 10*time.Second {
		t.Fatalf("burst throttle = %v, want 10s", d)
	}
	m.SetEntities(map[metastore.QuotaEntity]metastore.ClientQuotaValues{{User: "alice"}: {ProducerByteRate: 1600}})
	if d := m.Owed(Produce, c, alice); d != 2500*time.Millisecond {
		t.Fatalf("owed under the raised quota = %v, want 2.5s", d)
	}
	m.SetEntities(nil)
	if d := m.Owed(Produce, c, alice); d != 0 {
		t.Fatalf("owed with the quota removed = %v, want 0", d)
	}
}

// While a rate has fewer than window.num - 1 full windows (its first
// seconds, as after every idle gap longer than the samples), it is measured,
// as Kafka's Rate.windowSize does, over the time since its oldest sample
// plus the full windows it lacks: a client at its quota half a window into
// a fresh rate is at its quota. Before, the window was the larger of the
// two, so the time spent in the current window was left out and a client
// exactly at its quota after an idle gap was throttled.
func TestAFreshRateCountsTheTimeIntoItsCurrentWindow(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := New(nil, clk.now)
	c := cfg(1000, "")
	who := Client{Principal: "ANONYMOUS"}
	if d := m.Record(Produce, c, who, 10_000); d != 0 { // 10,000 B over 10 s
		t.Fatalf("at the rate: throttle %v", d)
	}
	clk.t = clk.t.Add(500 * time.Millisecond)
	if d := m.Record(Produce, c, who, 500); d != 0 { // 10,500 B over 10.5 s
		t.Fatalf("at the rate half a window on: throttle %v", d)
	}
	clk.t = clk.t.Add(2 * time.Second)
	// 2.5 s since the oldest sample, two full windows of the ten needed:
	// 21,000 B over 10.5 s is 2,000 B/s, held (2000-1000)/1000 × 10.5 s.
	if d := m.Record(Produce, c, who, 10_500); d != 10500*time.Millisecond {
		t.Fatalf("twice the rate: throttle %v, want 10.5s", d)
	}
}
