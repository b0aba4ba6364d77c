package clustertest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/testenv"
)

const exportFailures = "tidemark_telemetry_export_failures_total"

// tracedCluster starts a cluster exporting to Jaeger at otlp, with each
// broker's /metrics on, and a topic of one partition on three replicas
// whose acks=all writes need two of them.
func tracedCluster(t *testing.T, otlp string) *Cluster {
	c := Start(t, Options{Adjust: func(cfg *broker.Config) {
		cfg.Telemetry.OTLPEndpoint = otlp
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	}})
	c.CreateTopic("traced", 1, 3, map[string]string{"min.insync.replicas": "2"})
	return c
}

// produceAll writes n acks=all records and returns the offset of the first.
func produceAll(t *testing.T, c *Cluster, n int, prefix string) int64 {
	t.Helper()
	first := int64(-1)
	for i := 0; i < n; i++ {
		off, err := c.Produce(context.Background(), "traced", 0, -1, prefix+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("acks=all write %s%d: %v", prefix, i, err)
		}
		if first < 0 {
			first = off
		}
	}
	return first
}

// waitHWAdvancingFetchTraces waits until Jaeger holds a trace, with the
// follower's span and the leader's, of a follower fetch that moved the
// leader's HW past offset from (so the write at from was committed by it).
func waitHWAdvancingFetchTraces(t *testing.T, c *Cluster, api string, leader int32, from int64) {
	t.Helper()
	leaderService := "tidemark-broker-" + strconv.Itoa(int(leader))
	c.WaitFor(30*time.Second, "HW-advancing fetch traces of the latest writes in Jaeger", func() bool {
		for _, tr := range queryTraces(t, api, leaderService, "tidemark.replication.v1.ReplicationService/ReplicaFetch") {
			services, advanced := map[string]bool{}, false
			for _, sp := range tr.Spans {
				service := tr.Processes[sp.ProcessID].ServiceName
				services[service] = true
				after, ok := tagInt(sp.Tags, "tidemark.hw.after")
				if ok && after > from && service == leaderService {
					advanced = true
				}
			}
			if advanced && len(services) >= 2 {
				return true
			}
		}
		return false
	})
}

// Jaeger going away must not hold up writes: spans are handed to a bounded
// queue and exported in the background, so acks=all writes keep completing
// while every export fails, and the leader counts the failed exports where
// an operator sees them. When Jaeger
// comes back on the same address, the exporter reconnects by itself: the
// traces of writes made after it returned reach it.
func TestJaegerOutageDoesNotHoldUpWritesAndTracingResumes(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Jaeger binary next to a cluster, stops and starts it again")
	j := newJaeger(t)
	j.Start()
	c := tracedCluster(t, j.OTLP)
	leader := c.Leader("traced", 0)
	first := produceAll(t, c, 5, "before-")
	waitHWAdvancingFetchTraces(t, c, j.API, leader, first) // the exporter is connected

	j.Stop()
	// Write until the leader has counted a failed export, and at least 200
	// writes; then 300 more, as many spans as a batch holds and more, so
	// the exporter's queue is as full as traffic keeps it when Jaeger
	// returns.
	writes := 0
	c.WaitFor(35*time.Second, "the leader counting failed exports while Jaeger is down", func() bool {
		produceAll(t, c, 10, "down-")
		writes += 10
		return writes >= 200 && c.Metric(leader, exportFailures) > 0
	})
	produceAll(t, c, 300, "down-")
	t.Logf("%d acks=all writes completed while Jaeger was down; the leader counted %v failed exports",
		writes+300, c.Metric(leader, exportFailures))

	j.Start()
	time.Sleep(2 * time.Second) // a quiet moment: nothing is written
	from := produceAll(t, c, 3, "after-")
	waitHWAdvancingFetchTraces(t, c, j.API, leader, from)
}

// A broker started before its collector exists works normally (writes are
// committed while nothing receives its spans); one stopped meanwhile stops
// without waiting on the collector (its last spans are given up, not
// flushed into the exporter's timeouts) and starts again; and their traces
// appear once the collector comes up.
func TestBrokersStartAndStopWithoutJaegerAndTraceOnceItIsUp(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Jaeger binary next to a cluster, after the cluster")
	j := newJaeger(t)
	c := tracedCluster(t, j.OTLP)
	leader := c.Leader("traced", 0)
	produceAll(t, c, 200, "before-")

	follower := leader%3 + 1
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := c.StopBrokerWithin(ctx, follower); err != nil {
		t.Fatalf("stopping broker %d while Jaeger is down: %v", follower, err)
	}
	c.StartBroker(follower)
	c.WaitBrokerAlive(follower)
	produceAll(t, c, 20, "restarted-")

	j.Start()
	from := produceAll(t, c, 3, "after-")
	waitHWAdvancingFetchTraces(t, c, j.API, leader, from)
}
