package benchcmp

import (
	"fmt"
	"strings"
)

// Markdown is the side-by-side table with the ratio tidemark/JetStream.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s; every process on this one machine.\n\n", r.Started.Format("2006-01-02 15:04 UTC"), r.Machine)
	b.WriteString("| shape (RF 3 acks=all / R3 file) | tidemark msgs/s | JetStream msgs/s | ratio | tidemark MB/s | JetStream MB/s | tidemark p50 / p99 | JetStream p50 / p99 | p99 ratio |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		t, j := row.Tidemark, row.JetStream
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Shape.Label(),
			rate(t), rate(j), ratio(t, j, t.MsgsPerSec, j.MsgsPerSec),
			mbps(t, row.Shape.Size), mbps(j, row.Shape.Size),
			lat(t), lat(j), ratio(t, j, float64(t.P99), float64(j.P99)))
	}
	b.WriteString(`
- tidemark: ` + "`tidemark dev`" + ` cluster (etcd in the launcher, 2 controllers, 3 brokers, gateway; separate processes, mutual TLS on every link), ` +
		"`tidemark perf produce|consume`" + ` (idempotent producer, acks=all, topic of 1 partition, RF 3, min.insync.replicas 2). 8 producers: one process, 8 idempotent producers on one client (` + "`--producers 8`" + `).
- JetStream: 3 nats-server nodes on loopback (no TLS), R3 file-store stream, ` + "`nats bench js pub sync|async`" + ` (8 producers: ` + "`--clients 8`" + `, one process, 8 connections; async waits for acks in batches of 500; its latency is per batch, tidemark's per record), consumer: ` + "`nats bench js ordered`" + `.
- Ratio is tidemark / JetStream (above 1: tidemark has more throughput, or a longer p99). Only ratios from one run mean anything: the machine's speed drifts.
`)
	return b.String()
}

func rate(f Figure) string {
	switch {
	case f.Err != "":
		return "error"
	case f.MsgsPerSec == 0:
		return "–"
	case f.Failed > 0:
		return fmt.Sprintf("%.0f (%d failed)", f.MsgsPerSec, f.Failed)
	}
	return fmt.Sprintf("%.0f", f.MsgsPerSec)
}

func mbps(f Figure, size int) string {
	if f.Err != "" || f.MsgsPerSec == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", f.MsgsPerSec*float64(size)/(1<<20))
}

func lat(f Figure) string {
	if f.Err != "" || f.P99 == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s", ms(f.P50), ms(f.P99))
}

func ratio(t, j Figure, a, b float64) string {
	if t.Err != "" || j.Err != "" || a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}
