package benchcmp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// SyncSplit is where a tidemark synchronous run's time went, as means of
// the brokers' own histograms over the run (read just before and just
// after it, outside its CPU accounting). Means, not percentiles: they add
// up, so a write's time splits into the leader's part, the followers' and
// the hops between processes. Times are in seconds.
type SyncSplit struct {
	// Produces counts the leader's acks=all produce requests in the run,
	// Produce their mean time on the leader from arrival to answer, and
	// AppendToHW the mean from their append to the HW covering them: the
	// wait for the followers.
	Produces   int64   `json:"produces"`
	Produce    float64 `json:"produce_mean_s"`
	AppendToHW float64 `json:"append_to_hw_mean_s"`
	// Followers is how many brokers fetched from the leader; Fetches
	// counts the fetches the leader answered them in the run.
	Followers int   `json:"followers"`
	Fetches   int64 `json:"fetches"`
	// Hops is a fetch's mean time outside the leader's handling of it:
	// the followers' round trips less the leader's time on them, the same
	// fetches counted at both ends (so a fetch that sat parked through the
	// idle moment before the run counts its wait at neither).
	Hops float64 `json:"hops_mean_s"`
	// Apply and Between are the followers' mean time appending the
	// leader's answer, and from one round's end to their next request.
	Apply   float64 `json:"follower_apply_mean_s"`
	Between float64 `json:"follower_between_mean_s"`
}

// splitReading is one broker's histograms a SyncSplit is read from.
type splitReading struct {
	// As a leader: its acks=all produces, append → HW and its time on its
	// followers' fetches.
	produce, toHW, atLeader histogram
	// As a follower: its fetch rounds, by the id of the leader fetched from.
	rounds map[string]fetchRounds
}

// fetchRounds are a follower's fetch rounds against one leader, by phase.
type fetchRounds struct{ roundTrip, apply, between histogram }

func (r fetchRounds) minus(before fetchRounds) fetchRounds {
	return fetchRounds{r.roundTrip.minus(before.roundTrip), r.apply.minus(before.apply), r.between.minus(before.between)}
}

func (r fetchRounds) plus(o fetchRounds) fetchRounds {
	return fetchRounds{r.roundTrip.plus(o.roundTrip), r.apply.plus(o.apply), r.between.plus(o.between)}
}

// splitOf is the split of a run from the brokers' readings before and
// after it (in the order of ids, the brokers' ids), nil unless exactly one
// broker answered acks=all produces in between: the one that led the
// run's partition (a run whose leader moved has no split).
func splitOf(before, after []splitReading, ids []string) *SyncSplit {
	if len(before) != len(after) || len(after) != len(ids) || len(after) < 2 {
		return nil
	}
	leader := -1
	for i := range after {
		if after[i].produce.minus(before[i].produce).count() == 0 {
			continue
		}
		if leader >= 0 {
			return nil
		}
		leader = i
	}
	if leader < 0 {
		return nil
	}
	id := ids[leader]
	var rounds fetchRounds
	followers := 0
	for i := range after {
		if i == leader {
			continue
		}
		d := after[i].rounds[id].minus(before[i].rounds[id])
		if d.roundTrip.count() > 0 {
			followers++
		}
		rounds = rounds.plus(d)
	}
	atLeader := after[leader].atLeader.minus(before[leader].atLeader)
	fetches := atLeader.count()
	if followers == 0 || fetches == 0 {
		return nil
	}
	produce := after[leader].produce.minus(before[leader].produce)
	return &SyncSplit{
		Produces: produce.count(), Produce: produce.mean(), AppendToHW: after[leader].toHW.minus(before[leader].toHW).mean(),
		Followers: followers, Fetches: fetches, Hops: max(rounds.roundTrip.sum-atLeader.sum, 0) / float64(fetches),
		Apply: rounds.apply.mean(), Between: rounds.between.mean(),
	}
}

// round is a follower's mean time from one fetch request to its next over
// a run of the given length: each follower's rounds follow one another.
func (s *SyncSplit) round(run time.Duration) float64 {
	if s.Fetches <= 0 || s.Followers <= 0 {
		return 0
	}
	return run.Seconds() / (float64(s.Fetches) / float64(s.Followers))
}

// splitAround reads every broker's histograms now and returns a func that
// reads them again and gives the split of what happened in between; nil
// (the reason in log) when this first reading failed. ids are the brokers'
// ids, in the order of addrs.
func splitAround(ctx context.Context, addrs, ids []string, log io.Writer) func() *SyncSplit {
	before, err := readSplit(ctx, addrs, ids)
	if err != nil {
		fmt.Fprintf(log, "benchcmp: the brokers' histograms before a synchronous run: %v\n", err)
		return nil
	}
	return func() *SyncSplit {
		after, err := readSplit(ctx, addrs, ids)
		if err != nil {
			fmt.Fprintf(log, "benchcmp: the brokers' histograms after a synchronous run: %v\n", err)
			return nil
		}
		return splitOf(before, after, ids)
	}
}

// readSplit is each broker's splitReading, in the order of addrs.
func readSplit(ctx context.Context, addrs, ids []string) ([]splitReading, error) {
	out := make([]splitReading, 0, len(addrs))
	for _, addr := range addrs {
		body, err := metricsBody(ctx, addr)
		if err != nil {
			return nil, err
		}
		r, err := parseSplitReading(body, ids)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", addr, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// parseSplitReading reads a splitReading out of one broker's /metrics;
// its fetch rounds against each of the leaders named.
func parseSplitReading(body []byte, leaders []string) (splitReading, error) {
	parse := func(name string, match map[string]string) (histogram, error) {
		hs, err := parseHistograms(bytes.NewReader(body), map[string]map[string]string{name: match})
		return hs[name], err
	}
	var r splitReading
	var err error
	if r.produce, err = parse(produceLatency, map[string]string{"acks": "-1"}); err != nil {
		return r, err
	}
	if r.toHW, err = parse(appendToHW, nil); err != nil {
		return r, err
	}
	if r.atLeader, err = parse(fetchLatency, map[string]string{"kind": "follower"}); err != nil {
		return r, err
	}
	r.rounds = map[string]fetchRounds{}
	for _, l := range leaders {
		var fr fetchRounds
		for phase, h := range map[string]*histogram{"round_trip": &fr.roundTrip, "apply": &fr.apply, "between": &fr.between} {
			if *h, err = parse(replicaFetch, map[string]string{"phase": phase, "leader": l}); err != nil {
				return r, err
			}
		}
		r.rounds[l] = fr
	}
	return r, nil
}

// splitTable is, for tidemark's synchronous rows, where a write's time
// went: the client's mean latency split into the leader's part, of it the
// wait for the followers, and a follower's round by its parts; what no
// process accounts for is the hops between them (a message's way through
// the kernel, and the wait for its reader's vCPU to run).
func (r *Result) splitTable() string {
	var rows []string
	for _, row := range r.Rows {
		t := row.Tidemark
		sp := t.Split
		if t.Err != "" || sp == nil || t.Mean <= 0 || t.MsgsPerSec <= 0 || sp.Fetches <= 0 {
			continue
		}
		run := time.Duration(float64(t.Records) / t.MsgsPerSec * float64(time.Second))
		round := sp.round(run)
		perRound := float64(sp.Produces) / (float64(sp.Fetches) / float64(sp.Followers))
		onLeader := round - sp.Hops - sp.Apply - sp.Between
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s (%.1f rounds) | %s | %s | %s / %s | %s | %.1f |", row.Shape.Label(),
			usOf(t.Mean.Seconds()), usOf(t.Mean.Seconds()-sp.Produce), usOf(sp.Produce), usOf(sp.AppendToHW), sp.AppendToHW/round,
			usOf(round), usOf(onLeader), usOf(sp.Apply), usOf(sp.Between), usOf(sp.Hops), perRound))
	}
	if len(rows) == 0 {
		return ""
	}
	return "\n| tidemark's synchronous rows: where a write's time went, means, µs | client's latency | of it client ↔ leader | on the leader, arrival → answer | of it append → HW | a follower's round, request to next request | of it on the leader (parked, answering) | follower appending / to its next request | the two hops | writes per round |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" + strings.Join(rows, "\n") + "\n" + `
- From the row's median run: the client's mean latency (its own "avg latency"), and each broker's /metrics read just before and after the run (outside its CPU time): ` + "`tidemark_broker_produce_latency_seconds{acks=\"-1\"}`" + ` and ` + "`tidemark_broker_append_to_hw_seconds`" + ` on the leader, the followers' ` + "`tidemark_broker_replica_fetch_seconds{leader}`" + ` against it (phases round_trip, apply and between) and the leader's ` + "`tidemark_broker_fetch_latency_seconds{kind=\"follower\"}`" + `. A follower's round is the run's length over its fetches. The two hops are the followers' round trips less the leader's time on the same fetches: the answer's way to the follower and the next request's way back (gRPC, TLS, the kernel, and the wait for the reader's vCPU to run). The leader's part of a round is what is left of it (parked until there was data to send, then answering). Client ↔ leader is the client's latency less the leader's part: the request's and the answer's hops, the client's own work and the request's wait on the leader before its produce began.
- A write appended while the followers' fetches are on their way waits for them to come back and fetch again, so append → HW is about one and a half rounds once every round carries data; the HW needs both followers (acks=all waits for the whole ISR, as Kafka's does; JetStream's R3 stream needs one follower of two).
`
}

// usOf is a time in seconds as whole µs.
func usOf(s float64) string { return fmt.Sprintf("%.0f", s*1e6) }
