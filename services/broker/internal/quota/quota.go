// Package quota is the broker's byte-rate quotas, after Kafka's model: the
// client quota entities kept in etcd (user, client id, both, and their
// <default>s; see entities.go) decide a client's rate, the static
// quota.*.default and quota.*.overrides settings when none matches. The
// produce and fetch bytes of all the clients one quota covers are measured
// together over a sliding window of samples, and a client over its rate has
// its answers held back by the time that brings it back to the rate.
// Requests are never refused for being over quota, only delayed.
package quota

import (
	"math"
	"time"

	"tidemark.io/services/metastore"

	"github.com/prometheus/client_golang/prometheus"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/topicconfig"
)

// Kind is what a quota limits.
type Kind string

const (
	Produce Kind = "produce" // producer_byte_rate: bytes appended
	Fetch   Kind = "fetch"   // consumer_byte_rate: bytes answered
)

// Unlimited is the rate of a client without a quota.
const Unlimited = math.MaxInt64

// MaxThrottle is the longest an answer is held back: the most
// throttle_time_ms (an int32) can tell the client. Windows of many days
// would otherwise ask for a wait the answer cannot report.
const MaxThrottle = math.MaxInt32 * time.Millisecond

// Millis is d as an answer's throttle_time_ms: at least 1 ms when there is
// a throttle at all, at most math.MaxInt32.
func Millis(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(min(max(d.Milliseconds(), 1), math.MaxInt32))
}

// Config is the quota settings in force for one kind.
type Config struct {
	// Default is the rate (bytes/s) of a principal without an override.
	Default int64
	// Overrides is the "principal:rate,..." text of quota.*.overrides.
	Overrides string
	// Samples and Window are quota.window.num and quota.window.size.seconds.
	Samples int
	Window  time.Duration
}

// samples is the number of samples c's rates keep: quota.window.num is
// bounded where it is set, and a Config made another way must not make
// each principal allocate more.
func (c Config) samples() int { return min(c.Samples, topicconfig.MaxQuotaWindowNum) }

// FromBroker reads the settings of kind from the broker configuration.
func FromBroker(kind Kind, bc topicconfig.BrokerConfig) Config {
	c := Config{Samples: int(bc.QuotaWindowNum), Window: time.Duration(bc.QuotaWindowSizeSeconds) * time.Second}
	if kind == Produce {
		c.Default, c.Overrides = bc.QuotaProducerDefault, bc.QuotaProducerOverrides
	} else {
		c.Default, c.Overrides = bc.QuotaConsumerDefault, bc.QuotaConsumerOverrides
	}
	return c
}

// Manager tracks every principal's rates.
type Manager struct {
	now func() time.Time

	mu        lockorder.Mutex[lockorder.Leaf]
	entities  map[metastore.QuotaEntity]metastore.ClientQuotaValues
	rates     map[key]*rate
	parsed    map[string]map[string]int64 // overrides text -> parsed
	sinceScan int

	throttled *prometheus.CounterVec
	delay     *prometheus.CounterVec
}

// key is the rate one quota is measured on: Kafka's (user, client-id)
// metric tags, one part empty when the quota that matched names none.
type key struct {
	kind         Kind
	user, client string
}

// New makes a manager; reg, when set, gets its metrics; now nil is time.Now.
func New(reg prometheus.Registerer, now func() time.Time) *Manager {
	if now == nil {
		now = time.Now
	}
	m := &Manager{now: now, rates: map[key]*rate{}, parsed: map[string]map[string]int64{},
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_broker_quota_throttled_total",
			Help: "Answers held back because their principal was over its byte-rate quota, by kind (produce, fetch)."}, []string{"kind"}),
		delay: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_broker_quota_throttle_seconds_total",
			Help: "Time answers were held back for byte-rate quotas, by kind (produce, fetch)."}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.throttled, m.delay)
	}
	return m
}

// staticLimitLocked is principal's rate (bytes/s) under the static
// settings c.
func (m *Manager) staticLimitLocked(c Config, principal string) int64 {
	if c.Overrides != "" {
		ov, ok := m.parsed[c.Overrides]
		if !ok {
			ov, _ = topicconfig.ParseRateOverrides(c.Overrides) // validated when set
			if len(m.parsed) > 16 {
				clear(m.parsed)
			}
			m.parsed[c.Overrides] = ov
		}
		if r, ok := ov[principal]; ok {
			return r
		}
	}
	return c.Default
}

// Record adds n bytes to the client's kind and returns how long its answer
// should be held back: zero within the quota, else Kafka's
// (rate - quota) / quota × measured window, at most one full window of
// samples and at most MaxThrottle. An answer over quota is counted in the
// throttle metrics.
func (m *Manager) Record(kind Kind, c Config, who Client, n int) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.recordLocked(kind, c, who, n)
	if d > 0 {
		m.throttled.WithLabelValues(string(kind)).Inc()
		m.delay.WithLabelValues(string(kind)).Add(d.Seconds())
	}
	return d
}

// Owed is what is left of the client's kind's last throttle, recording
// nothing: a consumer fetch waits it out before reading, so a throttled
// fetch holds no records while it waits (the bytes were counted, and the
// throttle reported, by the fetch that went over). As Kafka's mute, it
// ends with the throttle time given out: within the first window.num - 1
// windows the rate is judged over that minimum however long the client
// waited, so the rate alone would owe the excess again after the wait (or
// an idle gap) that paid it. It is never more than the rate owes now, so
// a quota raised or removed shortens it at once.
func (m *Manager) Owed(kind Kind, c Config, who Client) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recordLocked(kind, c, who, 0)
}

func (m *Manager) recordLocked(kind Kind, c Config, who Client, n int) time.Duration {
	limit, k := m.resolveLocked(kind, c, who)
	if limit <= 0 || limit >= Unlimited || c.samples() < 2 || c.Window <= 0 {
		return 0
	}
	now := m.now()
	r := m.rates[k]
	if r == nil {
		if n == 0 {
			return 0
		}
		r = &rate{}
		m.rates[k] = r
	}
	if n > 0 {
		r.record(now, float64(n), c)
		m.forgetIdleLocked(now, c)
	}
	d := r.throttle(now, c, limit)
	if n == 0 {
		return min(d, max(r.throttledUntil.Sub(now), 0))
	}
	if until := now.Add(d); until.After(r.throttledUntil) {
		r.throttledUntil = until
	}
	return d
}

// forgetIdleLocked drops, now and then, the rates of clients silent for
// a whole window, so the map does not grow with every principal ever seen.
func (m *Manager) forgetIdleLocked(now time.Time, c Config) {
	if m.sinceScan++; m.sinceScan < 1024 {
		return
	}
	m.sinceScan = 0
	span := windows(c.samples(), c.Window)
	for k, r := range m.rates {
		if now.Sub(r.last) > span {
			delete(m.rates, k)
		}
	}
}

// rate is one quota's samples: Samples windows of Window each, the
// newest being filled; and the end of the last throttle given out.
type rate struct {
	starts         []time.Time
	sums           []float64
	cur            int
	last           time.Time
	throttledUntil time.Time
}

// throttle is Kafka's (rate - quota) / quota × measured window, at most
// one full window of samples and at most MaxThrottle; zero within limit.
func (r *rate) throttle(now time.Time, c Config, limit float64) time.Duration {
	value, window := r.measure(now, c)
	if value <= limit {
		return 0
	}
	// Capped in floating point: a huge excess would overflow a Duration.
	capped := min(windows(c.samples(), c.Window), MaxThrottle)
	if f := (value - limit) / limit * float64(window); f < float64(capped) {
		return time.Duration(f)
	}
	return capped
}

func (r *rate) record(now time.Time, v float64, c Config) {
	n := c.samples()
	if len(r.starts) != n {
		r.starts, r.sums, r.cur = make([]time.Time, n), make([]float64, n), 0
		r.starts[0] = now
	}
	if now.Sub(r.starts[r.cur]) >= c.Window {
		r.cur = (r.cur + 1) % n
		r.starts[r.cur], r.sums[r.cur] = now, 0
	}
	r.sums[r.cur] += v
	r.last = now
}

// measure is the rate over the live samples and the window it is measured
// over (Kafka's Rate.windowSize): from the oldest live sample to now, plus
// the full windows that lacks of Samples-1, so a first burst is not judged
// over a few milliseconds and the time into the current window still counts.
func (r *rate) measure(now time.Time, c Config) (float64, time.Duration) {
	span := windows(c.samples(), c.Window)
	var total float64
	oldest := now
	for i, s := range r.starts {
		if s.IsZero() || now.Sub(s) >= span {
			continue
		}
		total += r.sums[i]
		if s.Before(oldest) {
			oldest = s
		}
	}
	window := atLeastMinimum(now.Sub(oldest), c)
	return total / window.Seconds(), window
}

// atLeastMinimum is elapsed plus the full windows it lacks of Samples-1,
// saturating.
func atLeastMinimum(elapsed time.Duration, c Config) time.Duration {
	if c.Window <= 0 {
		return elapsed
	}
	lacking := c.samples() - 1 - int(min(elapsed/c.Window, math.MaxInt32))
	if lacking <= 0 {
		return elapsed
	}
	add := windows(lacking, c.Window)
	if add > math.MaxInt64-elapsed {
		return math.MaxInt64
	}
	return elapsed + add
}

// windows is n windows of w, saturating: quota.window.size.seconds may be
// up to 2^31-1 s, and a few of those overflow a Duration (a negative cap
// throttled nobody).
func windows(n int, w time.Duration) time.Duration {
	if n <= 0 || w <= 0 {
		return 0
	}
	if w > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return time.Duration(n) * w
}
