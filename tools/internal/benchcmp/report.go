package benchcmp

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Markdown is the side-by-side table with the ratio tidemark/JetStream.
func (r *Result) Markdown() string {
	var b strings.Builder
	procs := ""
	if r.Procs > 0 {
		procs = fmt.Sprintf(", every server process of both systems with GOMAXPROCS=%d (the cores shared among 3 nodes, as `tidemark dev` does)", r.Procs)
	}
	fmt.Fprintf(&b, "Measured %s on %s; every process on this one machine%s.\n\n", r.Started.Format("2006-01-02 15:04 UTC"), r.Machine, procs)
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
- tidemark: ` + "`tidemark dev`" + ` cluster (etcd in the launcher, 2 controllers, 3 brokers, gateway; separate processes, ` + r.security("mutual TLS on every link") + `), ` +
		"`tidemark perf produce|consume`" + ` (idempotent producer, acks=all, topic of 1 partition, RF 3, min.insync.replicas 2` + r.topicConfigNote() + `). 8 producers: one process, 8 idempotent producers on one client (` + "`--producers 8`" + `). Batching: default linger.ms and batch.size, buffer.memory ` + r.window() + ` (` + "`--buffer-memory`" + `; the 32 MiB default queues over a second of records at the same throughput).
- JetStream: 3 nats-server nodes on loopback (` + r.security("mutual TLS on client connections and routes, certificates from a CA like tidemark's") + `), R3 file-store stream, ` + "`nats bench js pub sync|async`" + ` (8 producers: ` + "`--clients 8`" + `, one process, 8 connections; async publishes a batch of the same bytes as tidemark's window, ` + "`--batch`" + ` ` + r.window() + ` / record size, and waits for all its acks; its latency is per batch, tidemark's per record), consumer: ` + "`nats bench js ordered`" + `.
- Paced rows: each system sends at half the rate it reached in its own batching row of that size (so the rates differ), with a consumer reading at the same time, after a warm-up of ` + r.warmup() + ` at the same rate that is not measured (a new client's first records pay for its connections and producer id); "ack latency" is from a message's send (when it was due at the pace: a send that waited counts for those behind it) to acknowledgement, "produce → consumer" until the consumer has it (tidemark: ` + "`tidemark perf e2e`" + `, the consumer fetching below the high watermark; JetStream: nats.go in the harness, PublishAsync and an ordered consumer, per message).
- Ratio is tidemark / JetStream (above 1: tidemark has more throughput, or a longer p99). Only ratios from one run mean anything: the machine's speed drifts.
` + r.order() + `
`)
	if r.DropsPageCache {
		b.WriteString("- Then it drops the clean page cache (`/proc/sys/vm/drop_caches`) before every " + r.unit() + " but those between a consumer and the shape it reads (which it reads from the cache, as users' consumers read what was just written): writing into page-cache pages here costs several times more CPU once gigabytes are cached, so each " + r.unit() + " would otherwise pay for what the ones before it had written.\n")
	}
	b.WriteString(r.medians())
	b.WriteString(r.pauses())
	b.WriteString(r.targetsTable())
	b.WriteString(r.linkFloorNote())
	b.WriteString(r.haltPollNote())
	b.WriteString(r.oneCPUNote())
	b.WriteString(r.cpuTable())
	b.WriteString(r.cpuUseTables())
	b.WriteString(r.splitTable())
	b.WriteString(r.tailTable())
	b.WriteString(r.memoryNote())
	if all, one := r.figure("batch-1k"), r.figure("batch-1k-acks1"); all.MsgsPerSec > 0 && one.MsgsPerSec > 0 {
		fmt.Fprintf(&b, "\ntidemark's acks=all / acks=1 throughput, batching 1 KiB: %.2f (Kafka publishes about 0.54).\n", all.MsgsPerSec/one.MsgsPerSec)
	}
	if r.PeakRSS.Tidemark > 0 || r.PeakRSS.JetStream > 0 {
		fmt.Fprintf(&b, "\nPeak resident memory of one server process over the shapes (VmHWM; the largest broker, the largest nats-server): tidemark %s, JetStream %s.\n",
			megabytes(r.PeakRSS.Tidemark), megabytes(r.PeakRSS.JetStream))
	}
	if r.Failover != nil {
		b.WriteString("\n")
		r.Failover.markdown(&b)
	}
	return b.String()
}

// topicConfigNote names the topic configs beyond the defaults and
// min.insync.replicas: preallocate and any --topic-config, then any
// --broker-config.
func (r *Result) topicConfigNote() string {
	var note string
	if r.Preallocate {
		note = ", preallocate=true: each segment's blocks reserved before it is written, see \"The file system under the logs\""
	}
	for _, kv := range r.TopicConfigs {
		note += ", " + kv
	}
	for _, kv := range r.BrokerConfigs {
		note += ", broker " + kv
	}
	return note
}

// window is the batching shapes' in-flight bytes, the same on both systems.
func (r *Result) window() string {
	for _, row := range r.Rows {
		if w := row.Shape.InFlight; w > 0 {
			if w%1024 == 0 {
				return fmt.Sprintf("%d KiB", w/1024)
			}
			return fmt.Sprintf("%d B", w)
		}
	}
	return "the tools' defaults"
}

// warmup is the paced shapes' warm-up as the notes say it.
func (r *Result) warmup() string {
	for _, row := range r.Rows {
		if w := row.Shape.Warmup; w > 0 {
			return fmt.Sprintf("%g s", w)
		}
	}
	return "0 s"
}

// security says how a system's links ran: both systems ran the same.
func (r *Result) security(tls string) string {
	if r.Plaintext {
		return "no TLS (--plaintext)"
	}
	return tls
}

// markdown is the failover table: recovery times with their ratio, then
// the counts that must be zero.
func (fo *Failover) markdown(b *strings.Builder) {
	t, j := fo.Tidemark, fo.JetStream
	fmt.Fprintf(b, "| failover: kill -9 of the leader under a synchronous idempotent writer | tidemark | JetStream | ratio |\n")
	b.WriteString("|---|---:|---:|---:|\n")
	fmt.Fprintf(b, "| leaders killed | %d | %d | |\n", t.Kills, j.Kills)
	for _, row := range []struct {
		name string
		t, j time.Duration
	}{{"writes succeed again after, min", t.Min, j.Min}, {"writes succeed again after, median", t.Median, j.Median},
		{"writes succeed again after, max", t.Max, j.Max}} {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", row.name, recovery(t, row.t), recovery(j, row.j), durRatio(row.t, row.j))
	}
	fmt.Fprintf(b, "| writes acknowledged | %d | %d | |\n", t.Acked, j.Acked)
	fmt.Fprintf(b, "| writes failed (error after retries) | %d | %d | |\n", t.Failed, j.Failed)
	fmt.Fprintf(b, "| acknowledged writes lost | %d | %d | |\n", t.Lost, j.Lost)
	fmt.Fprintf(b, "| writes duplicated | %d | %d | |\n", t.Duplicated, j.Duplicated)
	for _, e := range []struct{ who, err string }{{"tidemark", t.Err}, {"JetStream", j.Err}} {
		if e.err != "" {
			fmt.Fprintf(b, "| %s stopped early | %s | | |\n", e.who, strings.ReplaceAll(e.err, "|", "/"))
		}
	}
	b.WriteString(`
- Each system: a topic of 1 partition, RF 3, min.insync.replicas 2 (idempotent acks=all producer of tidemark's Go client) / an R3 file-store stream (nats.go, synchronous publish with a Nats-Msg-Id header); one writer in the harness sends numbered 128 B values one after the other, each attempt bounded by 2 s, retried for up to 30 s. Each time: every replica in sync, writes flowing, the leader's process killed with SIGKILL, then restarted once writes resume.
- Recovery is the time from the SIGKILL until the first write begun after the process died is acknowledged (ratio tidemark / JetStream: below 1, tidemark's writes resume sooner). Lost: acknowledged values missing from the log read back at the end; duplicated: values the log holds more than once.
`)
}

func recovery(f FailoverFigure, d time.Duration) string {
	if len(f.Recoveries) == 0 {
		return "–"
	}
	return ms(d)
}

func durRatio(a, b time.Duration) string {
	if a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
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

func megabytes(n int64) string {
	if n <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MB", float64(n)/1e6)
}

// figure is tidemark's figure of the shape named, zero when it did not run.
func (r *Result) figure(name string) Figure {
	for _, row := range r.Rows {
		if row.Shape.Name == name && row.Tidemark.Err == "" {
			return row.Tidemark
		}
	}
	return Figure{}
}

// medians says which rows are the median of several runs, with each
// system's slowest and fastest run.
func (r *Result) medians() string {
	var rows []string
	runs := 0
	for _, row := range r.Rows {
		t, j := row.Tidemark, row.JetStream
		if t.Runs <= 1 && j.Runs <= 1 {
			continue
		}
		runs = max(runs, t.Runs, j.Runs)
		if row.Shape.paced() {
			continue // their throughput is the pace
		}
		spread := func(name string, f Figure) string {
			if f.Runs <= 1 || f.MaxMsgsPerSec <= 0 {
				return "" // one run, or a shape this system has no figure for
			}
			return fmt.Sprintf(" %s %.0f–%.0f", name, f.MinMsgsPerSec, f.MaxMsgsPerSec)
		}
		rows = append(rows, row.Shape.Label()+":"+spread("tidemark", t)+spread("JetStream", j))
	}
	if len(rows) == 0 {
		return ""
	}
	how := "one after the other"
	if r.Interleaved {
		how = "alternating with the other system's"
	}
	return fmt.Sprintf("- Every row but the consumer's is the median of %d runs of each system, %s: by throughput, or for the paced rows by p99 (the other figures are that run's); the synchronous and batching runs' msgs/s ranged: %s.\n", runs, how, strings.Join(rows, "; "))
}

// order says how the two systems' runs were ordered, and what the harness
// does before each.
func (r *Result) order() string {
	if !r.EachRun {
		return "- Before each shape of either system the harness writes the page cache back (`sync`): all replicas share one disk here, and the writeback of a shape's hundreds of megabytes otherwise landed in the next shape's figures (a paced run after a batching one: p95 32–134 ms without, 17–61 ms with, alternated)."
	}
	alternate := ""
	if r.Interleaved {
		alternate = "- Both systems' clusters are up side by side, and the runs of each shape alternate between them (tidemark, JetStream, then JetStream, tidemark, and so on), one system running at a time while the other sits idle: this machine's speed moves by half within minutes, and with every shape of one system run before the other's, a row's two figures were minutes apart and its ratio carried that drift."
		if t, ok := r.IdleCPU["tidemark"]; ok {
			alternate += fmt.Sprintf(" Idle, tidemark's 3 brokers used %.1f%% of one core while JetStream ran", 100*t)
			if j, ok := r.IdleCPU["jetstream"]; ok {
				alternate += fmt.Sprintf(", and JetStream's 3 nats-servers %.1f%% while tidemark ran", 100*j)
			}
			alternate += "."
		}
		alternate += "\n"
	}
	return alternate + "- Before each run of either system the harness writes the page cache back (`sync`): all replicas share one disk here, and the writeback of a run's hundreds of megabytes otherwise landed in the next run's figures, the other system's too (a paced run after a batching one: p95 32–134 ms without, 17–61 ms with, alternated)."
}

// unit is what the harness drops the page cache before: each run, or in
// reports written before EachRun, each shape.
func (r *Result) unit() string {
	if r.EachRun {
		return "run"
	}
	return "shape"
}

// pauses says which shapes had runs done again because the machine itself
// paused during them, or that none had.
func (r *Result) pauses() string {
	var redone []string
	for _, row := range r.Rows {
		for _, sys := range []struct {
			name string
			f    Figure
		}{{"tidemark", row.Tidemark}, {"JetStream", row.JetStream}} {
			if sys.f.Redone > 0 {
				redone = append(redone, fmt.Sprintf("%s, %s: %d (paused up to %s)", sys.name, row.Shape.Label(), sys.f.Redone, ms(sys.f.MachinePause)))
			}
		}
	}
	rule := fmt.Sprintf("a run during which a sleeper in the harness, waking every %d ms, woke over %d ms late: the whole machine stood still, as no system's load on two cores delays it that long; at most %d runs of a shape", pauseTick.Milliseconds(), machinePauseLimit.Milliseconds(), pauseRedos)
	if len(redone) == 0 {
		return "- No run met a pause of the machine (" + rule + " would have been done again).\n"
	}
	return "- Runs done again because the machine paused (" + rule + "): " + strings.Join(redone, "; ") + ".\n"
}

// cpuTable is the CPU time each system spent per record, servers and
// client apart, the context switches behind it, and the cores that kept
// busy at the row's throughput: on a machine of two cores, a shape near
// two is bound by CPU, not by waiting.
func (r *Result) cpuTable() string {
	var rows []string
	for _, row := range r.Rows {
		t, j := row.Tidemark, row.JetStream
		if t.ServerCPU == 0 && j.ServerCPU == 0 {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s / %s |", row.Shape.Label(),
			micros(t, t.ServerCPU), micros(t, t.ClientCPU), micros(j, j.ServerCPU), micros(j, j.ClientCPU),
			durRatio(t.ServerCPU, j.ServerCPU), cores(t), cores(j), switches(t), switches(j), stealCell(t), stealCell(j)))
	}
	if len(rows) == 0 {
		return ""
	}
	return "\n| CPU time per record, µs | tidemark brokers | tidemark client | JetStream servers | JetStream client | servers ratio | cores busy, tidemark / JetStream | context switches per record, tidemark brokers / client | JetStream servers / client | host steal, % of CPU time, tidemark / JetStream |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" + strings.Join(rows, "\n") + "\n" + `
- Servers: the CPU time (user + system, from ` + "`/proc/<pid>/stat`" + `) of the 3 brokers / the 3 nats-servers over the row's run, divided by the records it sent or read (a paced row's warm-up included); tidemark's controllers, etcd and gateway are left out (they do no work per record). Client: the tool process's CPU time (its rusage), likewise; – where the client ran inside the harness (JetStream's paced rows). Cores busy: servers and client per record times the row's msgs/s, of the cores named above.
- Host steal: the share of the machine's CPU time (all CPUs, from ` + "`/proc/stat`" + `) over the row's run that the hypervisor took while a vCPU had work, running something else on the host; "max" is the highest of the row's runs when another run met more. A run that met a high steal had less of the machine than the others of its row.
- Context switches: how often the threads of the servers (summed over ` + "`/proc/<pid>/task/*/status`" + `) and of the client process (its rusage) gave up the CPU, to wait for the next message or preempted, per record.` + r.sleepWakeNote() + r.pageWriteNote() + `
`
}

// sleepWakeNote prices a context switch on the machine of the run.
func (r *Result) sleepWakeNote() string {
	sw := r.SleepWake
	if sw.CPU <= 0 {
		return ""
	}
	return fmt.Sprintf(" A thread's sleep and wake-up cost %.1f µs of CPU on this machine and took %.0f µs from call to return for 1 µs asked (measured before the shapes), so switches × %.1f µs is the part of a row's CPU time spent changing threads rather than working; a synchronous write crosses four processes, and each hop sleeps one thread and wakes another.",
		float64(sw.CPU)/float64(time.Microsecond), float64(sw.Wall)/float64(time.Microsecond), float64(sw.CPU)/float64(time.Microsecond))
}

// pageWriteNote prices a replica's append on the machine of the run: the
// kernel's copy into new page-cache pages, which every replica of either
// system pays per byte it stores.
func (r *Result) pageWriteNote() string {
	pw := r.PageWrite
	if pw.Fresh <= 0 {
		return ""
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	of := ""
	if f := r.figure("paced-1k"); f.Err == "" && f.ServerCPU > 0 {
		of = fmt.Sprintf(" (the brokers' whole share in the paced 1 KiB row: %.0f µs)", us(f.ServerCPU))
	}
	return fmt.Sprintf("\n- Appends: writing a file cost %.2f µs of CPU per KiB into pages the page cache did not hold and %.2f µs into pages it held (%d MiB in writes of %d KiB, measured before the shapes). Every append of every replica, of either system, takes new pages, so the three replicas' appends of a 1 KiB record cost about %.1f µs of servers' CPU%s.",
		us(pw.Fresh), us(pw.Cached), pageWriteBytes>>20, pageWriteChunk>>10, 3*us(pw.Fresh), of)
}

// switches is a row's context switches per record, servers / client, –
// when not measured.
func switches(f Figure) string {
	if f.Err != "" || f.ServerSwitches <= 0 {
		return "–"
	}
	client := "–"
	if f.ClientSwitches > 0 {
		client = fmt.Sprintf("%.1f", f.ClientSwitches)
	}
	return fmt.Sprintf("%.1f / %s", f.ServerSwitches, client)
}

// micros is a per-record CPU time in µs, – when not measured.
func micros(f Figure, d time.Duration) string {
	if f.Err != "" || d <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond))
}

// cores is how many cores a row's run kept busy, servers and client.
func cores(f Figure) string {
	if f.Err != "" || f.ServerCPU <= 0 || f.ClientCPU <= 0 || f.MsgsPerSec <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", (f.ServerCPU+f.ClientCPU).Seconds()*f.MsgsPerSec)
}

// tailTable is, for tidemark's paced rows, where the latency went by the
// brokers' own histograms, beside the client's p99: a leader whose produce
// time reaches that p99 had the tail itself (its disk, or waiting for the
// followers); one well under it did not (the client, the hops).
func (r *Result) tailTable() string {
	var rows []string
	for _, row := range r.Rows {
		t := row.Tidemark
		tl := t.Tail
		if t.Err != "" || tl == nil {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %d: %s / %s | %s / %s | %s / %s; %s | %d: %d, %s | %d: %s |", row.Shape.Label(),
			ms(t.P99), handover(t), slotWaits(t.Batches), tl.Produces, bound(tl.ProduceP99), bound(tl.ProduceMax), bound(tl.AppendToHWP99), bound(tl.AppendToHWMax),
			bound(tl.FollowerApplyP99), bound(tl.FollowerApplyMax), bound(tl.FollowerGapMax),
			tl.Appends, tl.SlowAppends, bound(tl.AppendMax), tl.Checkpoints, bound(tl.CheckpointMax)))
	}
	if len(rows) == 0 {
		return ""
	}
	return "\n| tidemark's paced rows: where the latency went | client p99 | records handed to the producer late, p99 | producer's batches: waited for a request slot; queue time max | leader's acks=all produces: p99 / max | append → HW p99 / max | followers applying a fetch answer: p99 / max; longest gap to their next fetch | segment writes, all brokers: over 10 ms, slowest | offset checkpoints written: slowest |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|\n" + strings.Join(rows, "\n") + "\n" + `
- Handed late: how far behind its schedule a record reached the producer (` + "`perf e2e`" + `'s own line: the client process paused, or waited for buffer room); that part of the client's p99 is neither the brokers' nor the network's. Waited for a request slot: the producer's batches that were ready while the partition's max.in.flight (5) requests were all outstanding, so the pipeline to the leader (5 batches per round trip) was full and they queued in the client; their queue time is from a batch's creation to its first send (Kafka's record-queue-time). From each broker's /metrics scraped before and after the row's median run (its warm-up included): ` + "`tidemark_broker_produce_latency_seconds{acks=\"-1\"}`" + ` (the leader's time from a produce's arrival to its response), ` + "`tidemark_broker_append_to_hw_seconds`" + ` (the leader's append to the HW covering it: the followers' part), ` + "`tidemark_broker_replica_fetch_seconds`" + ` (phases apply and between: a follower appending a fetch answer, and its own loop from one round to the next request; an append → HW far above both is the way between the processes), ` + "`tidemark_log_append_write_seconds`" + ` and ` + "`tidemark_log_checkpoint_write_seconds`" + ` (the disk's part); a time is the upper bound of its histogram bucket. A leader produce p99 well under the client's, with records handed over on time, means the tail was between them: batches queued for a request slot (a leader slower for a while than the pipeline allows), or the hops between processes on shared cores; one as long, with segment writes over 10 ms, the disk (see "The file system under the logs").
`
}

// bound is a histogram bucket's upper bound as a time.
func bound(s float64) string {
	switch {
	case math.IsInf(s, 1):
		return "beyond the last bucket"
	case s == 0:
		return "–"
	case s >= 1:
		return fmt.Sprintf("≤ %g s", s)
	}
	return fmt.Sprintf("≤ %g ms", math.Round(s*1e6)/1e3)
}

// handover is a paced row's handed-late p99, – when not measured.
func handover(f Figure) string {
	if f.HandoverP99 <= 0 {
		return "–"
	}
	return ms(f.HandoverP99)
}

// slotWaits is a paced row's share of batches that waited for a request
// slot, and their longest queue time; – when not reported.
func slotWaits(b *Batches) string {
	if b == nil || b.Sent <= 0 {
		return "–"
	}
	return fmt.Sprintf("%d of %d; %s", b.SlotWaits, b.Sent, ms(b.QueueMax))
}
