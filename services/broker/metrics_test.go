package broker_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/broker"
	"tidemark.io/services/broker/internal/aiofsync"
	"tidemark.io/services/broker/internal/parkedfs"
)

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("series %s not found in /metrics", series)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// The operator's view: /metrics shows under-replicated and at-min-ISR
// partitions, ISR shrinks, produce latency by acks and follower lag as the
// cluster changes.
func TestMetricsFollowTheISR(t *testing.T) {
	_, plainBefore := aiofsync.Counts() // process-wide: earlier tests' fsyncs count too
	_, plainOpsBefore := parkedfs.Counts()
	c := newClusterFn(t, 3, map[string]string{"replica.lag.time.max.ms": "1000"}, func(cfg *broker.Config) {
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	})
	c.ctrl.createTopic("m", 1, 3, map[string]string{"min.insync.replicas": "2"})
	if _, err := c.produce("m", 0, -1, "a"); err != nil {
		t.Fatal(err)
	}
	addr := c.brokers[1].MetricsAddr()
	body := scrape(t, addr)
	if v := metricValue(t, body, "tidemark_broker_under_replicated_partitions"); v != 0 {
		t.Fatalf("under-replicated %v with a full ISR", v)
	}
	if v := metricValue(t, body, `tidemark_broker_produce_latency_seconds_count{acks="-1"}`); v < 1 {
		t.Fatalf("acks=-1 produce latency count %v", v)
	}
	// The acks=-1 write was appended on every replica: each broker timed
	// its segment write.
	for _, b := range c.brokers {
		if v := metricValue(t, scrape(t, b.MetricsAddr()), "tidemark_log_append_write_seconds_count"); v < 1 {
			t.Fatalf("broker %s timed %v append writes", b.MetricsAddr(), v)
		}
	}
	// Creating the partition's log made its directory durable, and the
	// high-watermark checkpoint follows within 5 s: those fsyncs parked
	// (Linux AIO), none held a P.
	waitFor(t, 10*time.Second, "a parked fsync", func() bool {
		return metricValue(t, scrape(t, addr), `tidemark_log_fsyncs_total{mode="parked"}`) >= 1
	})
	if v := metricValue(t, scrape(t, addr), `tidemark_log_fsyncs_total{mode="plain"}`); v != float64(plainBefore) {
		t.Fatalf("%v fsyncs fell back to a blocking system call during the test (the kernel refused an asynchronous fsync)", v-float64(plainBefore))
	}
	// The checkpoint replaced its file by a rename: on io_uring, no P held.
	waitFor(t, 10*time.Second, "a parked file operation", func() bool {
		return metricValue(t, scrape(t, addr), `tidemark_log_file_ops_total{mode="parked"}`) >= 1
	})
	if v := metricValue(t, scrape(t, addr), `tidemark_log_file_ops_total{mode="plain"}`); v != float64(plainOpsBefore) {
		t.Fatalf("%v file removals, renames or truncations were blocking system calls during the test (the kernel refused io_uring)", v-float64(plainOpsBefore))
	}
	c.net.Partition(name(1), name(3))
	// F7: a cut-off follower that is still caught up stays in the ISR; new
	// data makes it fall behind.
	if _, err := c.produce("m", 0, 1, "b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "shrink to 1,2", func() bool { return len(c.ctrl.state("m", 0).isr) == 2 })
	time.Sleep(100 * time.Millisecond)
	body = scrape(t, addr)
	if v := metricValue(t, body, "tidemark_broker_under_replicated_partitions"); v != 1 {
		t.Fatalf("under-replicated %v after the shrink", v)
	}
	if v := metricValue(t, body, "tidemark_broker_at_min_isr_partitions"); v != 1 {
		t.Fatalf("at-min-ISR %v with ISR 2 and min 2", v)
	}
	if v := metricValue(t, body, "tidemark_broker_isr_shrinks_total"); v < 1 {
		t.Fatalf("isr shrinks %v", v)
	}
	if v := metricValue(t, body, `tidemark_broker_follower_last_caught_up_seconds{follower="3",partition="0",topic="m"}`); v < 1 {
		t.Fatalf("cut-off follower last caught up %vs ago", v)
	}
}

// A follower times its own fetch rounds by phase and by the leader fetched
// from, so an operator can place a stall of acks=all writes: the leader's
// answer, the way back, the follower's appends or its loop, and which
// leader's. The leader has no fetch rounds of its own.
func TestFollowersTimeTheirFetchRoundsByPhase(t *testing.T) {
	c := newClusterFn(t, 3, nil, func(cfg *broker.Config) {
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	})
	c.ctrl.createTopic("phases", 1, 3, map[string]string{"min.insync.replicas": "3"})
	for i := range 3 {
		if _, err := c.produce("phases", 0, -1, "v"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.ctrl.state("phases", 0).leader
	count := func(id int32, phase string) float64 {
		return metricValue(t, scrape(t, c.brokers[id].MetricsAddr()),
			`tidemark_broker_replica_fetch_seconds_count{leader="`+strconv.Itoa(int(leader))+`",phase="`+phase+`"}`)
	}
	for id := range c.brokers {
		if id == leader {
			continue
		}
		// Three acks=all writes with min.insync.replicas 3: each follower
		// fetched and applied each of them, and fetched again after.
		waitFor(t, 5*time.Second, "a follower's fetch phases", func() bool {
			return count(id, "round_trip") >= 3 && count(id, "apply") >= 3 && count(id, "between") >= 2
		})
	}
	if body := scrape(t, c.brokers[leader].MetricsAddr()); strings.Contains(body, "tidemark_broker_replica_fetch_seconds_count{") {
		t.Fatalf("the leader timed fetch rounds of its own:\n%s", body)
	}
}
