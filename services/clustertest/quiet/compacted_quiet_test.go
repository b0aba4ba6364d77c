package quiet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// Compacted topics (cleanup.policy=compact) in quiet moments: every
// replica runs its own cleaner, on its own schedule, while nothing is
// written; segment.ms rolls a segment only on the next append, and
// tombstones leave a cleaned segment delete.retention.ms after its first
// cleaning, idle or not.

// compactedSettings make each broker's cleaner look again every 100 ms and
// a silent follower leave the ISR within a second.
var compactedSettings = map[string]string{"log.cleaner.backoff.ms": "100", "replica.lag.time.max.ms": "1000"}

// compactedTopic is a compacted topic whose sealed segments are cleaned as
// soon as they are below the HW.
func compactedTopic(extra map[string]string) map[string]string {
	cfg := map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0", "min.insync.replicas": "2"}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

// keyed is one record of a compacted log: a tombstone has a nil value.
type keyed struct {
	off  int64
	key  string
	val  string
	tomb bool
}

func (r keyed) String() string {
	if r.tomb {
		return fmt.Sprintf("%d:%s=<tombstone>", r.off, r.key)
	}
	return fmt.Sprintf("%d:%s=%s", r.off, r.key, r.val)
}

// keyedLog writes keyed records to one partition and remembers what each
// offset was given, to judge what a replica holds after compaction.
type keyedLog struct {
	c       *clustertest.Cluster
	topic   string
	written map[int64]keyed
	latest  map[string]keyed
	// retainedFrom is where time retention (cleanup.policy=compact,delete)
	// left the log: a key last written below it may be gone.
	retainedFrom int64
}

func newKeyedLog(c *clustertest.Cluster, topic string) *keyedLog {
	return &keyedLog{c: c, topic: topic, written: map[int64]keyed{}, latest: map[string]keyed{}}
}

// put writes key=val with acks=all, one record per batch, through the
// partition's leader; an empty val writes a tombstone.
func (w *keyedLog) put(key, val string) {
	w.c.T.Helper()
	var value []byte
	if val != "" {
		value = []byte(val)
	}
	var b recordbatch.Builder
	b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(key), Value: value})
	leader := w.c.Partition(w.topic, 0).GetLeader()
	if leader < 0 {
		w.c.T.Fatalf("put %s: %s has no leader", key, w.topic)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := w.c.BrokerClient(leader).Produce(ctx, &brokerv1.ProduceRequest{Topic: w.topic, Partition: 0, Acks: -1, TimeoutMs: 5000,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)}})
	if err != nil {
		w.c.T.Fatalf("put %s=%q to broker %d: %v", key, val, leader, kerr.FromStatus(err))
	}
	r := keyed{off: resp.GetBaseOffset(), key: key, val: val, tomb: val == ""}
	if _, dup := w.written[r.off]; dup {
		w.c.T.Fatalf("put %v: offset %d given twice", r, r.off)
	}
	w.written[r.off] = r
	if prev, ok := w.latest[key]; !ok || prev.off < r.off {
		w.latest[key] = r
	}
}

// records reads every record of broker id's replica, tombstones included,
// from its log start to its LEO (ok=false when it is down or does not host
// the partition).
func (w *keyedLog) records(id int32) ([]keyed, bool) {
	w.c.T.Helper()
	b := w.c.Broker(id)
	if b == nil {
		return nil, false
	}
	for _, r := range b.Replicas().Replicas() {
		if tp := r.TP(); tp.Topic != w.topic || tp.Partition != 0 {
			continue
		}
		lg := r.Log()
		end := lg.LogEndOffset()
		var out []keyed
		for off := lg.LogStartOffset(); off < end; {
			rr, err := lg.Read(off, 1<<20, end)
			if err != nil {
				w.c.T.Fatalf("read broker %d's replica of %s at %d: %v", id, w.topic, off, err)
			}
			if rr.NextOffset <= off {
				break
			}
			for batch, err := range recordbatch.All(rr.Records) {
				if err != nil {
					w.c.T.Fatalf("broker %d's replica of %s: %v", id, w.topic, err)
				}
				for rec, err := range batch.Records() {
					if err != nil {
						w.c.T.Fatalf("broker %d's replica of %s: %v", id, w.topic, err)
					}
					if rec.Offset >= off {
						out = append(out, keyed{off: rec.Offset, key: string(rec.Key), val: string(rec.Value), tomb: rec.Value == nil})
					}
				}
			}
			off = rr.NextOffset
		}
		return out, true
	}
	return nil, false
}

// judge checks a compacted log against what was written, by Kafka's rules:
// offsets increase, every record is the one written at its offset (gaps
// are compaction's), and every key ends with its latest write; a key whose
// latest write is a tombstone may instead have no record left at all,
// never an older value.
func (w *keyedLog) judge(recs []keyed) error {
	prev := int64(-1)
	last := map[string]keyed{}
	for _, r := range recs {
		if r.off <= prev {
			return fmt.Errorf("offset %d after %d", r.off, prev)
		}
		prev = r.off
		if want, ok := w.written[r.off]; !ok || want != r {
			return fmt.Errorf("offset %d holds %v, but %v was written there", r.off, r, want)
		}
		last[r.key] = r
	}
	for k, want := range w.latest {
		got, ok := last[k]
		switch {
		case ok && got != want:
			return fmt.Errorf("key %s ends with %v, want its latest write %v", k, got, want)
		case !ok && !want.tomb && want.off >= w.retainedFrom:
			return fmt.Errorf("key %s lost its latest value %v", k, want)
		}
	}
	return nil
}

// stale counts the records a finished cleaning leaves no more of: values
// superseded by a later record of their key, and tombstones.
func (w *keyedLog) stale(recs []keyed) (superseded, tombstones int) {
	for _, r := range recs {
		if w.latest[r.key] != r {
			superseded++
		} else if r.tomb {
			tombstones++
		}
	}
	return superseded, tombstones
}

// judgeAll checks every replica's log.
func (w *keyedLog) judgeAll(ids ...int32) {
	w.c.T.Helper()
	for _, id := range ids {
		recs, ok := w.records(id)
		if !ok {
			w.c.T.Fatalf("broker %d does not host %s-0", id, w.topic)
		}
		if err := w.judge(recs); err != nil {
			w.c.T.Fatalf("broker %d's replica of %s: %v; it holds %v", id, w.topic, err, recs)
		}
	}
}

// waitCleaned waits until each given replica's own cleaner has left it
// with at most superseded superseded records and tombstones tombstones
// (the active segment is never cleaned), judging every read.
func (w *keyedLog) waitCleaned(timeout time.Duration, superseded, tombstones int, ids ...int32) {
	w.c.T.Helper()
	var seen string
	defer func() {
		if w.c.T.Failed() {
			w.c.T.Logf("replicas last seen: %s", seen)
		}
	}()
	w.c.WaitFor(timeout, fmt.Sprintf("the cleaners of %v to compact %s to %d superseded records and %d tombstones", ids, w.topic, superseded, tombstones), func() bool {
		seen = ""
		done := true
		for _, id := range ids {
			recs, ok := w.records(id)
			if !ok {
				return false
			}
			if err := w.judge(recs); err != nil {
				w.c.T.Fatalf("broker %d's replica of %s: %v; it holds %v", id, w.topic, err, recs)
			}
			s, t := w.stale(recs)
			seen += fmt.Sprintf("broker %d: %v; ", id, recs)
			if s != superseded || t != tombstones {
				done = false
			}
		}
		return done
	})
}

// consume reads the partition from the leader's log start to its HW as a
// consumer does, past offsets compaction removed; a tombstone comes back
// with an empty value.
func (w *keyedLog) consume() []keyed {
	w.c.T.Helper()
	leader := w.c.Partition(w.topic, 0).GetLeader()
	v, ok := w.c.View(leader, w.topic, 0)
	if !ok {
		w.c.T.Fatalf("broker %d does not host %s-0", leader, w.topic)
	}
	var out []keyed
	for off := v.LogStart; ; {
		resp, err := w.c.BrokerClient(leader).Fetch(context.Background(), &brokerv1.FetchRequest{
			Topic: w.topic, Partition: 0, Offset: off, CurrentLeaderEpoch: -1})
		if err != nil {
			w.c.T.Fatalf("consumer fetch from broker %d at %d: %v", leader, off, err)
		}
		for _, r := range resp.GetRecords() {
			if r.GetOffset() >= off {
				out = append(out, keyed{off: r.GetOffset(), key: string(r.GetKey()), val: string(r.GetValue()), tomb: len(r.GetValue()) == 0})
			}
		}
		if resp.GetNextOffset() <= off || resp.GetNextOffset() >= resp.GetHighWatermark() {
			return out
		}
		off = resp.GetNextOffset()
	}
}

// judgeConsumer checks what a consumer reads from the current leader.
func (w *keyedLog) judgeConsumer() {
	w.c.T.Helper()
	got := w.consume()
	if err := w.judge(got); err != nil {
		w.c.T.Fatalf("a consumer reading %s from the log start on broker %d: %v; it read %v", w.topic, w.c.Partition(w.topic, 0).GetLeader(), err, got)
	}
}

// electPreferredAndWait moves a partition's leadership back to its
// preferred replica.
func electPreferredAndWait(c *clustertest.Cluster, topic string) int32 {
	c.T.Helper()
	preferred := c.Partition(topic, 0).GetReplicas()[0]
	resp, err := c.Admin().ElectLeaders(context.Background(), &adminv1.ElectLeadersRequest{
		ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions:   []*commonv1.TopicPartition{{Topic: topic, Partition: 0}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		c.T.Fatalf("preferred election of %s-0: %v %v", topic, resp, err)
	}
	c.WaitFor(10*time.Second, fmt.Sprintf("broker %d to lead %s-0", preferred, topic), func() bool {
		return c.Partition(topic, 0).GetLeader() == preferred && c.Leads(preferred, topic, 0)
	})
	return preferred
}

// eachLeader calls fn once with every replica of topic-0 leading it, with
// nothing written: it stops the leader (a controlled shutdown) after each
// call and keeps it down, so that the next one is another replica, then
// starts them all again and waits until the partition has settled.
func eachLeader(c *clustertest.Cluster, topic string, fn func(leader int32)) {
	c.T.Helper()
	reps := c.Partition(topic, 0).GetReplicas()
	var stopped []int32
	for i := range reps {
		leader := c.Partition(topic, 0).GetLeader()
		fn(leader)
		if i == len(reps)-1 {
			break
		}
		if err := c.StopBroker(leader); err != nil {
			c.T.Fatalf("stop broker %d: %v", leader, err)
		}
		stopped = append(stopped, leader)
		c.WaitFor(15*time.Second, fmt.Sprintf("a leader of %s-0 other than %v", topic, stopped), func() bool {
			n := c.Partition(topic, 0).GetLeader()
			return n >= 0 && !slices.Contains(stopped, n) && c.Leads(n, topic, 0)
		})
	}
	for _, id := range stopped {
		c.StartBroker(id)
	}
	c.WaitSettled(20*time.Second, topic, 0, reps)
}

// A compacted topic written, then left idle: its active segment holds
// every record and is not cleaned. segment.ms passes with no traffic; a
// single write rolls the segment on every replica, and each replica's
// cleaner compacts it on its own. Every replica then holds the latest
// value of each key (the tombstone too: delete.retention.ms has not
// passed), stays in the ISR, and has HW = LEO.
func TestCompactedTopicIdlePastSegmentMsThenOneWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for segment.ms and the cleaners of an idle compacted topic")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: compactedSettings})
	c.CreateTopic("idlecompact", 1, 3, compactedTopic(map[string]string{"segment.ms": "1000"}))
	reps := c.Partition("idlecompact", 0).GetReplicas()
	w := newKeyedLog(c, "idlecompact")
	for _, kv := range [][2]string{{"k0", "a"}, {"k1", "a"}, {"k2", "a"}, {"k3", "a"}, {"k0", "b"}, {"k1", "b"}, {"k3", ""}, {"k2", "b"}} {
		w.put(kv[0], kv[1])
	}
	c.WaitSettled(15*time.Second, "idlecompact", 0, reps)
	// Idle past segment.ms: nothing rolls, so nothing is cleanable.
	time.Sleep(1500 * time.Millisecond)
	for _, id := range reps {
		recs, _ := w.records(id)
		if s, _ := w.stale(recs); s != 4 {
			t.Fatalf("broker %d cleaned its active segment while idle: %v", id, recs)
		}
	}

	w.put("k4", "a") // rolls the segment segment.ms made due
	w.waitCleaned(20*time.Second, 0, 1, reps...)
	c.WaitSettled(15*time.Second, "idlecompact", 0, reps)
	w.judgeAll(reps...)
	w.judgeConsumer()
	for _, id := range reps {
		v, _ := c.View(id, "idlecompact", 0)
		if v.LogStart != 0 || v.LEO != 9 {
			t.Fatalf("broker %d: log start %d LEO %d, want 0 and 9 (compaction moves neither)", id, v.LogStart, v.LEO)
		}
	}
	// Writes go on: acks=all with the whole ISR.
	w.put("k0", "c")
	c.WaitSettled(15*time.Second, "idlecompact", 0, reps)
	w.judgeAll(reps...)
}

// Tombstones on an idle compacted topic: once delete.retention.ms has
// passed since its first cleaning, each replica's cleaner removes the
// tombstone on its own, nothing written. Then leadership moves while idle
// (a controlled shutdown of the leader, its restart and a preferred
// election back to it) and writes resume, the deleted key among them. No
// replica diverges, none is stuck out of the ISR, HW = LEO everywhere,
// and a consumer reading from the log start on each replica as it leads
// reads each key's latest value, the deleted key's tombstone or nothing of
// it.
func TestCompactedTombstonesLeaveAnIdleTopicThenLeadershipMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for delete.retention.ms on an idle compacted topic")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: compactedSettings})
	c.CreateTopic("tombs", 1, 3, compactedTopic(map[string]string{"segment.ms": "500", "delete.retention.ms": "1000"}))
	reps := c.Partition("tombs", 0).GetReplicas()
	leader := c.Leader("tombs", 0)
	w := newKeyedLog(c, "tombs")
	for _, kv := range [][2]string{{"a", "1"}, {"b", "1"}, {"c", "1"}, {"a", "2"}, {"b", ""}, {"c", "2"}, {"d", "1"}} {
		w.put(kv[0], kv[1])
	}
	c.WaitSettled(15*time.Second, "tombs", 0, reps)
	time.Sleep(700 * time.Millisecond) // past segment.ms, idle
	w.put("e", "1")
	// First the superseded values go (the tombstone stays for
	// delete.retention.ms), then, with nothing written, the tombstone.
	w.waitCleaned(20*time.Second, 0, 0, reps...)
	c.WaitSettled(15*time.Second, "tombs", 0, reps)
	w.judgeConsumer()

	// Leadership moves while idle.
	if err := c.StopBroker(leader); err != nil {
		t.Fatalf("stop broker %d: %v", leader, err)
	}
	c.WaitFor(15*time.Second, "a new leader", func() bool {
		l := c.Partition("tombs", 0).GetLeader()
		return l >= 0 && l != leader && c.Leads(l, "tombs", 0)
	})
	w.judgeConsumer()
	c.StartBroker(leader)
	c.WaitSettled(20*time.Second, "tombs", 0, reps)
	if c.Partition("tombs", 0).GetLeader() != reps[0] {
		electPreferredAndWait(c, "tombs")
	}
	c.WaitSettled(20*time.Second, "tombs", 0, reps)
	w.judgeAll(reps...)
	w.judgeConsumer()

	// Writes resume; the deleted key comes back.
	for _, kv := range [][2]string{{"b", "2"}, {"a", "3"}, {"f", "1"}} {
		w.put(kv[0], kv[1])
	}
	c.WaitSettled(15*time.Second, "tombs", 0, reps)
	w.judgeAll(reps...)
	// Every replica leads in turn: each serves the same content.
	eachLeader(c, "tombs", func(leader int32) {
		w.judgeAll(leader)
		w.judgeConsumer()
	})
	w.judgeAll(reps...)
}

// A follower down for longer than delete.retention.ms while the leader
// compacts away records it never saw, a tombstone among them, comes back
// with nothing else written. Its log ends where the leader's now has a
// gap: it fetches past it, rejoins the ISR and reaches HW = LEO, again
// after it is killed at once, and once it leads (a preferred election) it
// serves each key's latest value.
func TestCompactedFollowerBackAfterTombstonesWentCatchesUpIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for delete.retention.ms while a follower is down")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: compactedSettings})
	c.CreateTopic("away", 1, 3, compactedTopic(map[string]string{"segment.ms": "500", "delete.retention.ms": "1000"}))
	reps := c.Partition("away", 0).GetReplicas()
	w := newKeyedLog(c, "away")
	w.put("a", "1")
	w.put("b", "1")
	c.WaitSettled(15*time.Second, "away", 0, reps)
	// The preferred replica goes down; another leads.
	away := reps[0]
	c.CrashBroker(away)
	c.WaitFor(15*time.Second, "a new leader and the crashed broker out of the ISR", func() bool {
		p := c.Partition("away", 0)
		return p.GetLeader() >= 0 && p.GetLeader() != away && c.Leads(p.GetLeader(), "away", 0) && len(p.GetIsr()) == 2
	})
	up := reps[1:]
	for _, kv := range [][2]string{{"x", "1"}, {"x", ""}, {"a", "2"}, {"y", "1"}} {
		w.put(kv[0], kv[1])
	}
	time.Sleep(700 * time.Millisecond) // past segment.ms, idle
	w.put("z", "1")
	w.waitCleaned(20*time.Second, 0, 0, up...)

	// Back, nothing written: it fetches from offset 2, which compaction
	// removed (as it did 3) from the others' logs.
	c.StartBroker(away)
	c.WaitSettled(20*time.Second, "away", 0, reps)
	w.judgeAll(reps...)
	// Killed again before anything flushed the copy it fetched: recovery
	// takes a gap above the recovery point for a lost tail and ends the
	// log there; it fetches the rest again, gaps and all.
	c.CrashBroker(away)
	c.StartBroker(away)
	c.WaitSettled(20*time.Second, "away", 0, reps)
	w.judgeAll(reps...)
	electPreferredAndWait(c, "away")
	c.WaitSettled(20*time.Second, "away", 0, reps)
	w.judgeConsumer()
	w.put("a", "3")
	w.put("w", "1")
	c.WaitSettled(15*time.Second, "away", 0, reps)
	w.judgeAll(reps...)
	w.judgeConsumer()
}

// Quick crashes of a follower in succession, then of the leader, on a
// compacted log of many small segments: each restart is unclean, so its
// cleaner starts on the reloaded log at once (flushing what recovery left
// above the checkpointed recovery point, then swapping groups in and
// rewriting its checkpoint) and the next crash may come mid-pass. Once it
// settles, nothing Kafka keeps is lost, every replica agrees with what was
// written, and both are back in the ISR with HW = LEO.
func TestCompactedQuickCrashesWhileCleaning(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes brokers while their cleaners run")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: compactedSettings})
	c.CreateTopic("churn", 1, 3, compactedTopic(map[string]string{"segment.bytes": "4096", "delete.retention.ms": "500"}))
	reps := c.Partition("churn", 0).GetReplicas()
	w := newKeyedLog(c, "churn")
	pad := strings.Repeat("v", 200)
	for i := range 240 {
		val := fmt.Sprintf("%d-%s", i, pad)
		if i%7 == 3 {
			val = "" // a tombstone
		}
		w.put(fmt.Sprintf("k%d", i%12), val)
	}
	c.WaitSettled(15*time.Second, "churn", 0, reps)
	leader := c.Leader("churn", 0)
	follower := reps[0]
	if follower == leader {
		follower = reps[1]
	}
	for i := range 4 {
		c.CrashBroker(follower)
		c.StartBroker(follower)
		// Let its cleaner get going on the reloaded log before the next crash.
		time.Sleep(time.Duration(100+i*150) * time.Millisecond)
	}
	c.WaitSettled(30*time.Second, "churn", 0, reps)
	w.judgeAll(reps...)
	c.CrashBroker(leader)
	c.StartBroker(leader)
	time.Sleep(200 * time.Millisecond)
	c.CrashBroker(leader)
	c.StartBroker(leader)
	c.WaitSettled(30*time.Second, "churn", 0, reps)
	w.judgeAll(reps...)
	w.judgeConsumer()
	w.put("k0", "last")
	c.WaitSettled(15*time.Second, "churn", 0, reps)
	w.judgeAll(reps...)
	w.judgeConsumer()
}

// A broker killed after a compacted log rolled but before its cleaner came
// round to it (here it slept log.cleaner.backoff.ms, a minute), and before
// the recovery points were next checkpointed: it recovers the log from
// the older checkpointed recovery point. The topic is idle from then on,
// so no roll flushes the log again; its cleaner must still compact the
// sealed segment, as the other replicas' did, and remove the tombstone
// once delete.retention.ms has passed.
func TestCompactedIdleLogIsCleanedAfterAnUncleanRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for segment.ms and delete.retention.ms on an idle compacted topic")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: compactedSettings})
	c.CreateTopic("crashed", 1, 3, compactedTopic(map[string]string{"segment.ms": "500", "delete.retention.ms": "1000"}))
	reps := c.Partition("crashed", 0).GetReplicas()
	leader := c.Leader("crashed", 0)
	var sleeper int32
	for _, id := range reps {
		if id != leader {
			sleeper = id
		}
	}
	// The sleeper's cleaner looks once at start, then sleeps a minute.
	c.CrashBroker(sleeper)
	slow := c.BrokerConfig(sleeper)
	fast := slow.Settings
	slow.Settings = maps.Clone(fast)
	slow.Settings["log.cleaner.backoff.ms"] = "60000"
	c.SetBrokerConfig(sleeper, slow)
	c.StartBroker(sleeper)
	c.WaitSettled(20*time.Second, "crashed", 0, reps)

	w := newKeyedLog(c, "crashed")
	for _, kv := range [][2]string{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"b", ""}, {"c", "1"}} {
		w.put(kv[0], kv[1])
	}
	time.Sleep(700 * time.Millisecond) // past segment.ms, idle
	w.put("d", "1")                    // rolls the segment on every replica
	c.WaitSettled(15*time.Second, "crashed", 0, reps)
	var others []int32
	for _, id := range reps {
		if id != sleeper {
			others = append(others, id)
		}
	}
	w.waitCleaned(20*time.Second, 0, 0, others...)
	if recs, _ := w.records(sleeper); len(recs) != 6 {
		t.Fatalf("setup: broker %d's cleaner ran before the crash: %v", sleeper, recs)
	}

	c.CrashBroker(sleeper)
	slow.Settings = fast
	c.SetBrokerConfig(sleeper, slow)
	c.StartBroker(sleeper)
	c.WaitSettled(20*time.Second, "crashed", 0, reps)
	// Nothing is written from here on.
	w.waitCleaned(20*time.Second, 0, 0, sleeper)
	c.WaitSettled(15*time.Second, "crashed", 0, reps)
	w.judgeAll(reps...)
}

// cleanup.policy=compact,delete on an idle topic: the leader compacts
// the records a crashed follower never saw, then time retention deletes
// every segment, and the follower comes back with nothing written, its
// log end below the leader's log start. It starts its log over at the
// leader's log start, rejoins the ISR with HW = LEO, and leads (a
// preferred election) with the same log start and content as the others.
func TestCompactDeleteFollowerBackBelowTheLogStartOfAnIdleTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for time retention while a follower is down")
	}
	settings := maps.Clone(compactedSettings)
	settings["log.retention.check.interval.ms"] = "200"
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: settings})
	c.CreateTopic("both", 1, 3, compactedTopic(map[string]string{"cleanup.policy": "compact,delete",
		"retention.ms": "2500", "segment.ms": "500", "delete.retention.ms": "1000"}))
	reps := c.Partition("both", 0).GetReplicas()
	w := newKeyedLog(c, "both")
	w.put("a", "1")
	w.put("b", "1")
	c.WaitSettled(15*time.Second, "both", 0, reps)
	away := reps[0]
	c.CrashBroker(away)
	c.WaitFor(15*time.Second, "a new leader and the crashed broker out of the ISR", func() bool {
		p := c.Partition("both", 0)
		return p.GetLeader() >= 0 && p.GetLeader() != away && c.Leads(p.GetLeader(), "both", 0) && len(p.GetIsr()) == 2
	})
	up := reps[1:]
	for _, kv := range [][2]string{{"a", "2"}, {"b", ""}, {"c", "1"}} {
		w.put(kv[0], kv[1])
	}
	time.Sleep(700 * time.Millisecond) // past segment.ms, idle
	w.put("d", "1")
	w.waitCleaned(20*time.Second, 0, 0, up...)
	const end = 6
	w.retainedFrom = end
	c.WaitFor(30*time.Second, "retention to empty the running replicas", func() bool {
		for _, id := range up {
			if v, ok := c.View(id, "both", 0); !ok || v.LogStart != end || v.LEO != end {
				return false
			}
		}
		return true
	})

	c.StartBroker(away)
	waitReplicasAt(c, t, "both", 0, reps, end, "every replica at log start = LEO = the leader's, with nothing produced")
	c.WaitSettled(20*time.Second, "both", 0, reps)
	w.judgeAll(reps...)
	electPreferredAndWait(c, "both")
	c.WaitSettled(20*time.Second, "both", 0, reps)
	w.put("a", "3")
	w.put("e", "1")
	c.WaitSettled(15*time.Second, "both", 0, reps)
	w.judgeAll(reps...)
	w.judgeConsumer()
	for _, id := range reps {
		if recs, _ := w.records(id); len(recs) != 2 {
			t.Fatalf("broker %d holds %v, want the two records written after retention", id, recs)
		}
	}
}

// A Kafka consumer on an idle compacted topic whose sealed segment ends
// with a tombstone: once delete.retention.ms has passed the cleaner empties
// that batch and keeps it (it ends the cleaned segment). A consumer from
// the log start, and one positioned at the emptied batch, read on past it
// to the record after, from every replica as it leads.
func TestKafkaConsumerReadsPastAnEmptiedBatchOfAnIdleCompactedTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for delete.retention.ms on an idle compacted topic")
	}
	c := clustertest.Start(t, clustertest.Options{Kafka: true, BrokerSettings: compactedSettings})
	c.CreateTopic("emptied", 1, 3, compactedTopic(map[string]string{"segment.ms": "500", "delete.retention.ms": "1000"}))
	reps := c.Partition("emptied", 0).GetReplicas()
	w := newKeyedLog(c, "emptied")
	w.put("a", "1")
	w.put("b", "1")
	w.put("b", "")                     // the last batch of the segment
	time.Sleep(700 * time.Millisecond) // past segment.ms, idle
	w.put("c", "1")
	w.waitCleaned(20*time.Second, 0, 0, reps...)
	c.WaitSettled(15*time.Second, "emptied", 0, reps)

	read := func(from kgo.Offset) []keyed {
		t.Helper()
		cl := c.KafkaClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"emptied": {0: from}}))
		ctx := clustertest.CtxFor(t, 20*time.Second)
		var got []keyed
		for ctx.Err() == nil && (len(got) == 0 || got[len(got)-1].off < 3) {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				got = append(got, keyed{off: r.Offset, key: string(r.Key), val: string(r.Value), tomb: r.Value == nil})
			})
		}
		cl.Close()
		return got
	}
	eachLeader(c, "emptied", func(leader int32) {
		if got := read(kgo.NewOffset().AtStart()); fmt.Sprint(got) != "[0:a=1 3:c=1]" {
			t.Fatalf("a Kafka consumer from the log start on broker %d read %v, want [0:a=1 3:c=1]", leader, got)
		}
		if got := read(kgo.NewOffset().At(2)); fmt.Sprint(got) != "[3:c=1]" {
			t.Fatalf("a Kafka consumer at the emptied batch (offset 2) on broker %d read %v, want [3:c=1]", leader, got)
		}
	})
	w.judgeAll(reps...)
}
