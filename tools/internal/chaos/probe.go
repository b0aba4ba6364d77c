package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/clustertest/history"
)

// probeProducer names the probe's writes in the history.
const probeProducer = "probe-acks-all"

// probeBound bounds each probe: its write's acknowledgement, then a
// reader's consuming it.
const probeBound = 15 * time.Second

// probeServing writes one record to every partition through a new
// idempotent acks=all producer once the cluster looks whole, and waits for
// each partition's reader to consume it. An observation shows a leader,
// a full ISR and HW = LEO even where the named leader does not serve
// clients (fenced, waiting for its roles, still acting as a follower), so
// whole is not yet live: the probe is what a client would do next. It
// returns one line per partition that did not serve; the writes are in the
// history like any other.
func (r *runner) probeServing(ctx context.Context, obs observation) []string {
	p, err := client.NewProducer(r.client, client.ProducerOptions{Acks: client.AcksAll, Idempotence: client.IdempotenceOn,
		DeliveryTimeout: probeBound, RequestTimeout: 5 * time.Second, MaxBlock: 5 * time.Second})
	if err != nil {
		return []string{fmt.Sprintf("the probe producer: %v", err)}
	}
	start := time.Now()
	var (
		mu       sync.Mutex
		problems []string
		acked    = map[history.TP]string{}
		wg       sync.WaitGroup
	)
	for _, ps := range obs.partitions {
		if ps.LiveAt.IsZero() {
			continue // liveness has already failed it
		}
		tp := ps.TP
		value := fmt.Sprintf("%s/%s/0", tp, probeProducer)
		wg.Add(1)
		r.w.produceSaying(p, probeProducer, true, history.AcksAll, tp, value, func(ok bool) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: an acks=all write was not acknowledged within %s of the cluster looking whole (leader %d)",
					tp, probeBound, ps.Leader))
				return
			}
			acked[tp] = value
		})
	}
	wg.Wait()
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = p.Close(closeCtx)
	cancel()
	// Every acknowledged probe must reach its partition's reader.
	answered := time.Now()
	for tp, value := range acked {
		for !r.w.probeRead(value) {
			if time.Since(answered) > probeBound || ctx.Err() != nil {
				problems = append(problems, fmt.Sprintf("%s: the acknowledged write %q never reached a consumer", tp, value))
				break
			}
			if sleep(ctx, 50*time.Millisecond) != nil {
				break
			}
		}
	}
	if len(problems) == 0 {
		r.note("every partition took an acks=all write and handed it to its reader %s after looking whole", time.Since(start).Round(time.Millisecond))
	}
	return problems
}

// isProbe reports whether a consumed value is a probe's write.
func isProbe(value string) bool { return strings.Contains(value, "/"+probeProducer+"/") }

// repollLive waits, after the probe, for every partition to be whole again
// (its write must reach every replica's HW before the logs are read). The
// first LiveAt of each partition stands.
func (r *runner) repollLive(ctx context.Context, before observation) observation {
	liveAt := map[history.TP]time.Time{}
	for _, ps := range before.partitions {
		liveAt[ps.TP] = ps.LiveAt
	}
	last := before
	deadline := time.Now().Add(probeBound)
	for {
		obs, err := r.observe(ctx)
		if err == nil {
			all := true
			for i := range obs.partitions {
				ps := &obs.partitions[i]
				ps.LiveAt = liveAt[ps.TP]
				if ok, _ := ps.Live(); !ok {
					all = false
				}
			}
			last = obs
			if all {
				return last
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			for _, ps := range last.partitions {
				if ok, why := ps.Live(); !ok {
					r.note("not whole again after the probe (%s): %s", why, stateLine(ps))
				}
			}
			return last
		}
		if sleep(ctx, 250*time.Millisecond) != nil {
			return last
		}
	}
}
