package perfstat

import (
	"regexp"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 501 * time.Millisecond}, {0.99, 991 * time.Millisecond}, {0.999, 1000 * time.Millisecond}, {1, 1000 * time.Millisecond}, {0, time.Millisecond}} {
		if got := Percentile(s, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

func TestRecorder(t *testing.T) {
	t0 := time.Unix(0, 0)
	r := New(4, t0)
	for _, ms := range []int{1, 2, 3, 10} {
		r.Record(time.Duration(ms)*time.Millisecond, 1<<19)
	}
	r.Fail("NOT_ENOUGH_REPLICAS")
	if r.Done() != 5 {
		t.Fatalf("done = %d", r.Done())
	}
	w := r.Window(t0.Add(2 * time.Second))
	if w.Records != 4 || w.RecordsPerSec() != 2 || w.MBPerSec() != 1 || w.Avg != 4*time.Millisecond || w.Max != 10*time.Millisecond {
		t.Fatalf("window %+v", w)
	}
	if w2 := r.Window(t0.Add(3 * time.Second)); w2.Records != 0 || w2.Elapsed != time.Second {
		t.Fatalf("second window %+v", w2)
	}
	s := r.Summary(t0.Add(4 * time.Second))
	if s.Records != 4 || s.P50 != 3*time.Millisecond || s.P999 != 10*time.Millisecond || s.FailedCount() != 1 {
		t.Fatalf("summary %+v", s)
	}
	want := `^4 records sent, 1\.0 records/s \(0\.50 MB/s\), 4\.00 ms avg latency, 10\.00 ms max, 3\.00 ms p50, 10\.00 ms p95, 10\.00 ms p99, 10\.00 ms p99\.9; 1 failed: NOT_ENOUGH_REPLICAS x1$`
	if line := s.Line("sent", "latency"); !regexp.MustCompile(want).MatchString(line) {
		t.Fatalf("line %q", line)
	}
	if line := w.Line("sent", "latency"); line != "4 records sent, 2.0 records/s (1.00 MB/s), 4.00 ms avg latency, 10.00 ms max" {
		t.Fatalf("progress line %q", line)
	}
}

func TestRecorderSamplesLongRuns(t *testing.T) {
	r := New(maxSamples*3, time.Now())
	for i := range maxSamples * 3 {
		r.Record(time.Duration(i), 1)
	}
	if len(r.samples) != maxSamples {
		t.Fatalf("kept %d samples, want %d", len(r.samples), maxSamples)
	}
	if p := r.Summary(time.Now()).P50; p < maxSamples*3/2-10 || p > maxSamples*3/2+10 {
		t.Fatalf("p50 of a sampled uniform run = %v", p)
	}
}

func TestThrottle(t *testing.T) {
	t0 := time.Unix(0, 0)
	th := NewThrottle(100, t0)
	if d := th.Wait(50, t0.Add(100*time.Millisecond)); d != 400*time.Millisecond {
		t.Errorf("ahead of the rate: wait %v, want 400ms", d)
	}
	if d := th.Wait(10, t0.Add(time.Second)); d != 0 {
		t.Errorf("behind the rate: wait %v, want 0", d)
	}
	if d := NewThrottle(-1, t0).Wait(1e9, t0); d != 0 {
		t.Errorf("unlimited: wait %v", d)
	}
}

// A send that is late keeps its scheduled time: the 300 ms the sender was
// stalled count in the latency of every operation that waited behind it.
func TestSendTimeIsTheSchedule(t *testing.T) {
	t0 := time.Unix(0, 0)
	th := NewThrottle(100, t0) // one every 10 ms
	late := t0.Add(400 * time.Millisecond)
	if got := th.SendTime(10, late); !got.Equal(t0.Add(100 * time.Millisecond)) {
		t.Errorf("behind schedule: send time %v, want the due 100ms", got.Sub(t0))
	}
	if got := th.SendTime(10, t0.Add(100*time.Millisecond)); !got.Equal(t0.Add(100 * time.Millisecond)) {
		t.Errorf("on schedule: send time %v", got.Sub(t0))
	}
	// Never in the future (a sender that did not wait), never the schedule
	// without a rate.
	if got := th.SendTime(50, t0.Add(100*time.Millisecond)); !got.Equal(t0.Add(100 * time.Millisecond)) {
		t.Errorf("ahead of schedule: send time %v, want now", got.Sub(t0))
	}
	if got := NewThrottle(-1, t0).SendTime(10, late); !got.Equal(late) {
		t.Errorf("unthrottled: send time %v, want now", got.Sub(t0))
	}
}

// What a warm-up sent is forgotten; what it lost is not.
func TestRecorderRestartForgetsTheWarmUp(t *testing.T) {
	t0 := time.Unix(0, 0)
	r := New(4, t0)
	r.Record(time.Second, 100)
	r.Fail("REQUEST_TIMED_OUT")
	r.Restart(t0.Add(time.Second))
	r.Record(time.Millisecond, 10)
	r.Record(3*time.Millisecond, 10)
	s := r.Summary(t0.Add(2 * time.Second))
	if s.Records != 2 || s.Bytes != 20 || s.Max != 3*time.Millisecond || s.P99 != 3*time.Millisecond || s.Elapsed != time.Second || s.FailedCount() != 1 {
		t.Fatalf("summary after restart %+v", s)
	}
	if w := r.Window(t0.Add(2 * time.Second)); w.Records != 2 || w.Elapsed != time.Second {
		t.Fatalf("window after restart %+v", w)
	}
}

// The samples' room is taken up front: recording a whole run never grows
// (reallocates and copies) the megabytes-large slice in the measured process.
func TestRecordNeverGrowsTheSamples(t *testing.T) {
	for _, n := range []int64{1, 1000, 300_000, maxSamples * 3} {
		r := New(n, time.Now())
		room := cap(r.samples)
		before := &r.samples[:1][0]
		for range n {
			r.Record(time.Millisecond, 100)
		}
		if cap(r.samples) != room || &r.samples[0] != before {
			t.Fatalf("%d records: the samples grew from room for %d to %d", n, room, cap(r.samples))
		}
		if want := min(int64(maxSamples), (n+r.every-1)/r.every); int64(len(r.samples)) != want {
			t.Fatalf("%d records: %d samples, want %d", n, len(r.samples), want)
		}
	}
}
