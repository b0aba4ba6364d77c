package broker_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/broker"
	"tidemark.io/services/broker/internal/logstore"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/tlsconf"
)

// bumpLeaderEpoch re-elects the same leader at a leader epoch by higher, as
// a controller does when it re-sends a leadership (no broker moves).
func (s *standin) bumpLeaderEpoch(topic string, part int32, by int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[tp{topic, part}]
	p.leaderEpoch += by
	p.partitionEpoch++
	s.pushLocked(tp{topic, part})
}

// setTopicConfig replaces a topic's overrides and pushes them.
func (s *standin) setTopicConfig(topic string, configs map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configs[topic] = maps.Clone(configs)
	s.pushLocked(s.keysLocked()...)
}

func (c *cluster) replicaOf(id int32, topic string, part int32) *replica.Replica {
	c.t.Helper()
	r, ok := c.brokers[id].Replicas().Replica(tpOf(topic, part))
	if !ok {
		c.t.Fatalf("broker %d does not host %s-%d", id, topic, part)
	}
	return r
}

// Retention on the leader moves its log start; the replica's state machine
// must follow, or the leader judges fetches against a log start that no
// longer exists. Only the leader runs retention here (a short
// log.retention.check.interval.ms on broker 1, the 5-minute default on the
// others), so the followers' log start can only come from the leader's
// fetch answers (F4).
//
// The leader's epoch cache is set up so that a stale log start gives a
// different answer than the true one: epoch 0 from offset 0, epoch 2 from
// offset n (epoch 1 had no writes). A follower fetching below the new log
// start with last fetched epoch 1 must get OFFSET_OUT_OF_RANGE from the log
// start check (F13, so it truncates fully and starts at the leader's log
// start, F14); against the old log start 0 the leader would instead answer
// DivergingEpoch{0, n}, sending it to truncate inside a range retention has
// deleted.
func TestRetentionOnLeaderMovesReplicaLogStart(t *testing.T) {
	c := newClusterFn(t, 3, map[string]string{"replica.lag.time.max.ms": "30000"}, func(cfg *broker.Config) {
		if cfg.ID == 1 {
			cfg.Settings["log.retention.check.interval.ms"] = "100"
		}
	})
	cfgs := map[string]string{"segment.bytes": "1024", "min.insync.replicas": "3"}
	c.ctrl.createTopic("ret", 1, 3, cfgs)
	if l := c.ctrl.state("ret", 0).leader; l != 1 {
		t.Fatalf("setup: leader is %d, want 1", l)
	}
	const epoch0Records = 40
	for i := 0; i < epoch0Records; i++ {
		if _, err := c.produce("ret", 0, -1, "a"+strconv.Itoa(i)); err != nil {
			t.Fatalf("produce a%d: %v", i, err)
		}
	}
	c.ctrl.bumpLeaderEpoch("ret", 0, 2)
	leader := c.replicaOf(1, "ret", 0)
	waitFor(t, 10*time.Second, "broker 1 to lead at leader epoch 2", func() bool {
		return leader.IsLeader() && leader.Snapshot(time.Now()).LeaderEpoch == 2
	})
	for i := 0; i < 3; i++ {
		var err error
		// The followers may still be taking up epoch 2.
		for try := 0; try < 50; try++ {
			if _, err = c.produce("ret", 0, -1, "b"+strconv.Itoa(i)); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("produce b%d: %v", i, err)
		}
	}
	leo := leader.Log().LogEndOffset()
	if s := leader.Snapshot(time.Now()); s.HighWatermark != leo || s.LogStartOffset != 0 {
		t.Fatalf("setup: leader hw=%d log start=%d, want hw %d and log start 0", s.HighWatermark, s.LogStartOffset, leo)
	}

	// Keep about the newest 1.5 KiB: retention deletes the oldest segments,
	// which hold only epoch-0 records.
	cfgs["retention.bytes"] = "1500"
	c.ctrl.setTopicConfig("ret", cfgs)
	var start int64
	var entries []logstore.EpochEntry
	// The log start moves first and the epoch cache's start follows (as in
	// Kafka's maybeIncrementLogStartOffset): wait for both.
	waitFor(t, 10*time.Second, "the leader's retention to delete segments and trim its epoch cache", func() bool {
		start = leader.Log().LogStartOffset()
		entries = leader.Log().EpochEntries()
		return start > 0 && len(entries) > 0 && entries[0].StartOffset == start
	})
	if len(entries) != 2 || entries[0].Epoch != 0 || entries[0].StartOffset != start ||
		entries[1].Epoch != 2 || entries[1].StartOffset != epoch0Records {
		t.Fatalf("setup: leader's epoch cache %v after retention to %d, want epoch 0 from %d and epoch 2 from %d",
			entries, start, start, epoch0Records)
	}

	// (a) The leader's state machine, and so its snapshot and the progress
	// it reports to the controller, shows the new log start.
	waitFor(t, 5*time.Second, "the leader's snapshot to show log start "+strconv.FormatInt(start, 10), func() bool {
		return leader.Snapshot(time.Now()).LogStartOffset == start
	})

	// (b) A follower fetch below the new log start is refused by the log
	// start check.
	ans := c.brokers[1].Replicas().ReplicaFetch(context.Background(), replica.FollowerFetch{
		ReplicaID: 2, BrokerEpoch: -1,
		Partitions: []replica.FollowerFetchPartition{{TP: tpOf("ret", 0), FetchOffset: start - 1,
			CurrentLeaderEpoch: 2, LastFetchedEpoch: 1, LogStartOffset: 0}},
	})
	if len(ans) != 1 {
		t.Fatalf("%d answers, want 1", len(ans))
	}
	if ans[0].Diverging != nil {
		t.Fatalf("fetch at %d below log start %d answered DivergingEpoch %v, want OFFSET_OUT_OF_RANGE", start-1, start, *ans[0].Diverging)
	}
	if e := kerr.As(ans[0].Err); e == nil || e.Code != kerr.OffsetOutOfRange || !strings.Contains(e.Message, "below the log start offset "+strconv.FormatInt(start, 10)) {
		t.Fatalf("fetch at %d below log start %d answered %v, want OFFSET_OUT_OF_RANGE below the log start", start-1, start, ans[0].Err)
	}
	if ans[0].LogStartOffset != start {
		t.Fatalf("answer carries log start %d, want %d", ans[0].LogStartOffset, start)
	}

	// (c) The followers' logs and state machines follow the leader's log
	// start (they run no retention of their own here), and the leader
	// learns their new log start from their next fetches (what KIP-392's
	// preferred read replica checks).
	for _, id := range []int32{2, 3} {
		f := c.replicaOf(id, "ret", 0)
		waitFor(t, 10*time.Second, "follower "+strconv.Itoa(int(id))+" to follow the leader's log start", func() bool {
			return f.Log().LogStartOffset() == start && f.Snapshot(time.Now()).LogStartOffset == start
		})
	}
	waitFor(t, 10*time.Second, "the leader to see its followers' log start", func() bool {
		s := leader.Snapshot(time.Now())
		n := 0
		for _, fv := range s.Followers {
			if fv.LogStartOffset == start {
				n++
			}
		}
		return n == 2
	})
	// Every replica still serves the same records from the new start.
	if got := c.sameLogs("ret", 0, 1, 2, 3); len(got) != int(leo-start) {
		t.Fatalf("replicas hold %d records from %d, want %d", len(got), start, leo-start)
	}
}

// log.retention.check.interval.ms is a real setting: a broker started with
// a short one deletes an expired segment by itself, without a call.
func TestRetentionCheckIntervalSetting(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"log.retention.check.interval.ms": "100"})
	c.ctrl.createTopic("exp", 1, 1, map[string]string{"segment.bytes": "1024", "retention.ms": "500"})
	for i := 0; i < 30; i++ {
		if _, err := c.produce("exp", 0, -1, "v"+strconv.Itoa(i)); err != nil {
			t.Fatalf("produce v%d: %v", i, err)
		}
	}
	r := c.replicaOf(1, "exp", 0)
	waitFor(t, 10*time.Second, "the periodic retention check to delete expired segments", func() bool {
		start := r.Log().LogStartOffset()
		return start > 0 && r.Snapshot(time.Now()).LogStartOffset == start
	})
}

// replica.high.watermark.checkpoint.interval.ms is a real setting: with
// 100 ms the checkpoint file holds a new high watermark well before the
// 5 s default would have written it.
func TestHighWatermarkCheckpointIntervalSetting(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"replica.high.watermark.checkpoint.interval.ms": "100"})
	c.ctrl.createTopic("hwck", 1, 1, nil)
	for i := range 3 {
		if _, err := c.produce("hwck", 0, -1, "v"+strconv.Itoa(i)); err != nil {
			t.Fatalf("produce v%d: %v", i, err)
		}
	}
	file := filepath.Join(c.cfgs[1].DataDir, "replication-offset-checkpoint")
	waitFor(t, 3*time.Second, "the high watermark 3 in "+file, func() bool {
		data, err := os.ReadFile(file)
		return err == nil && strings.Contains(string(data), "\nhwck 0 3\n")
	})
}

// A retention or checkpoint interval too small or unparsable stops the
// broker at start-up with INVALID_CONFIG naming the key.
func TestCheckIntervalsInvalid(t *testing.T) {
	for _, key := range []string{"log.retention.check.interval.ms", "replica.high.watermark.checkpoint.interval.ms", "log.flush.offset.checkpoint.interval.ms"} {
		for _, v := range []string{"99", "0", "5s"} {
			cfg := broker.DefaultConfig()
			cfg.TLS = tlsconf.Plain()
			cfg.Listen = "127.0.0.1:0"
			cfg.DataDir = t.TempDir()
			cfg.Etcd.Endpoints = nil
			cfg.Settings = map[string]string{key: v}
			b, err := broker.Start(context.Background(), cfg, nil)
			if err == nil {
				_ = b.Stop(context.Background())
				t.Fatalf("%s=%s: broker started", key, v)
			}
			if msg := err.Error(); !strings.Contains(msg, "INVALID_CONFIG") || !strings.Contains(msg, key) {
				t.Fatalf("%s=%s: error %q, want INVALID_CONFIG naming the key", key, v, msg)
			}
		}
	}
}
