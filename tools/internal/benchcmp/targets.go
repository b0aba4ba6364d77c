package benchcmp

import (
	"fmt"
	"strings"
	"time"
)

// tidemark's performance targets on this machine, set against the peer in
// the same run. The report checks every run against them, so the README
// says what was reached by the table it prints and never by older prose.
const (
	syncTarget          = 2.0 // synchronous acks=all: times JetStream's writes/s
	batch128Target      = 3.0 // batching producer, 128 B: times JetStream's
	batch1kTarget       = 2.0 // batching producer, 1 KiB: times JetStream's
	pacedP99Target      = 20 * time.Millisecond
	acksRatioTarget     = 0.6 // acks=all / acks=1 throughput (Kafka publishes about 0.54)
	brokerPeakRSSTarget = 150e6
)

// targetRow is one target with what the run made of it.
type targetRow struct {
	target, reached string
	// state is "met", "not met", or "–" when the run has no figure for it.
	state string
}

func metState(known, met bool) string {
	switch {
	case !known:
		return "–"
	case met:
		return "met"
	}
	return "not met"
}

// targets checks the run against every target it has figures for.
func (r *Result) targets() []targetRow {
	var out []targetRow
	for _, row := range r.Rows {
		t, j := row.Tidemark, row.JetStream
		known := t.Err == "" && j.Err == "" && t.MsgsPerSec > 0 && j.MsgsPerSec > 0
		switch {
		case row.Shape.Mode == Sync:
			tr := targetRow{target: fmt.Sprintf("%s: ≥ %.0f× JetStream's writes/s, p99 ≤ JetStream's", row.Shape.Label(), syncTarget)}
			if known && t.P99 > 0 && j.P99 > 0 {
				x, p := t.MsgsPerSec/j.MsgsPerSec, float64(t.P99)/float64(j.P99)
				tr.reached = fmt.Sprintf("%.2f×, p99 %.2f×", x, p)
				tr.state = metState(true, x >= syncTarget && p <= 1)
			} else {
				tr.reached, tr.state = "–", metState(false, false)
			}
			out = append(out, tr)
		case row.Shape.Mode == Batch && !row.Shape.LeaderAcks:
			want := batch1kTarget
			if row.Shape.Size < 1024 {
				want = batch128Target
			}
			tr := targetRow{target: fmt.Sprintf("%s: ≥ %.0f× JetStream's records/s", row.Shape.Label(), want), reached: "–", state: "–"}
			if known {
				x := t.MsgsPerSec / j.MsgsPerSec
				tr.reached, tr.state = fmt.Sprintf("%.2f×", x), metState(true, x >= want)
			}
			out = append(out, tr)
		case row.Shape.Mode == Paced:
			tr := targetRow{target: fmt.Sprintf("%s: p99 ≤ %s", row.Shape.Label(), ms(pacedP99Target)), reached: "–", state: "–"}
			if t.Err == "" && t.P99 > 0 {
				tr.reached, tr.state = ms(t.P99), metState(true, t.P99 <= pacedP99Target)
			}
			out = append(out, tr)
		}
	}
	if all, one := r.figure("batch-1k"), r.figure("batch-1k-acks1"); all.MsgsPerSec > 0 && one.MsgsPerSec > 0 {
		x := all.MsgsPerSec / one.MsgsPerSec
		out = append(out, targetRow{fmt.Sprintf("acks=all / acks=1 throughput, batching 1 KiB: ≥ %.1f", acksRatioTarget), fmt.Sprintf("%.2f", x), metState(true, x >= acksRatioTarget)})
	}
	if rss := r.PeakRSS.Tidemark; rss > 0 {
		out = append(out, targetRow{fmt.Sprintf("largest broker's peak resident memory: < %s", megabytes(brokerPeakRSSTarget)), megabytes(rss), metState(true, rss < brokerPeakRSSTarget)})
	}
	return out
}

// targetsTable prints the targets as a table with a one-line tally.
func (r *Result) targetsTable() string {
	rows := r.targets()
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	met, unmet := 0, 0
	b.WriteString("\n| tidemark's target on this machine | this run | |\n|---|---:|---|\n")
	for _, tr := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", tr.target, tr.reached, tr.state)
		switch tr.state {
		case "met":
			met++
		case "not met":
			unmet++
		}
	}
	fmt.Fprintf(&b, "\n- %d of %d targets met in this run", met, met+unmet)
	if n := len(rows) - met - unmet; n > 0 {
		fmt.Fprintf(&b, " (%d without a figure: a shape not run or failed)", n)
	}
	b.WriteString("; ratios are tidemark / JetStream from this run only.\n")
	return b.String()
}
