package clustertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest/history"
	"tidemark.io/services/platform/kerr"
)

// What the in-process cluster hands to the history checker: replica states
// read from the brokers themselves, and produce/consume workloads that
// record every attempt and every record read.

// replicaState reads broker id's replica of tp: its log, LEO, HW and log
// start. A broker that is down, or does not host the partition, gives an
// unreadable state.
func (c *Cluster) replicaState(id int32, tp history.TP) history.ReplicaState {
	rs := history.ReplicaState{Broker: id}
	b := c.Broker(id)
	if b == nil {
		return rs
	}
	for _, r := range b.Replicas().Replicas() {
		if r.TP().Topic != tp.Topic || r.TP().Partition != tp.Partition {
			continue
		}
		lg := r.Log()
		// Retention or a fetch may move the log while it is read: retry
		// until one read saw a still log.
		for range 50 {
			start := lg.LogStartOffset()
			snap := r.Snapshot(time.Now())
			vals, err := b.ReadLog(tp.Topic, tp.Partition)
			if err != nil || lg.LogStartOffset() != start || lg.LogEndOffset() != snap.LogEndOffset ||
				int64(len(vals)) != snap.LogEndOffset-start {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			rs.Readable, rs.LogStart, rs.LEO, rs.HW = true, start, snap.LogEndOffset, snap.HighWatermark
			for i, v := range vals {
				rs.Records = append(rs.Records, history.Record{Offset: start + int64(i), Value: v})
			}
			return rs
		}
		snap := r.Snapshot(time.Now())
		vals, err := b.ReadLog(tp.Topic, tp.Partition)
		c.T.Logf("broker %d's replica of %s never held still long enough to read: start %d/%d leo %d/%d, %d values, %v", id, tp,
			lg.LogStartOffset(), snap.LogStartOffset, lg.LogEndOffset(), snap.LogEndOffset, len(vals), err)
		return rs
	}
	return rs
}

// partitionState is the partition as the controller describes it, with
// every assigned replica read from its broker.
func (c *Cluster) partitionState(tp history.TP) history.PartitionState {
	pd := c.Partition(tp.Topic, tp.Partition)
	ps := history.PartitionState{TP: tp, Leader: pd.GetLeader(), ISR: slices.Clone(pd.GetIsr()), MinInsyncReplicas: pd.GetMinInsyncReplicas(),
		Adding: slices.Clone(pd.GetAddingReplicas()), Removing: slices.Clone(pd.GetRemovingReplicas())}
	for _, id := range pd.GetReplicas() {
		ps.Replicas = append(ps.Replicas, c.replicaState(id, tp))
	}
	return ps
}

// awaitLive observes the partitions after the faults stopped until every
// one has been whole (history.PartitionState.Live) or the bound has passed,
// and returns when each was first seen whole.
func (c *Cluster) awaitLive(tps []history.TP, bound time.Duration) map[history.TP]time.Time {
	liveAt := map[history.TP]time.Time{}
	deadline := time.Now().Add(bound)
	for len(liveAt) < len(tps) && time.Now().Before(deadline) {
		for _, tp := range tps {
			if _, ok := liveAt[tp]; ok {
				continue
			}
			now := time.Now()
			if ok, _ := c.partitionState(tp).Live(); ok {
				liveAt[tp] = now
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return liveAt
}

// probeServing writes one record to each partition through a new
// idempotent acks=all producer and waits for the recording consumers to
// read it: a partition can look whole (leader, full ISR, HW = LEO) while
// its named leader does not serve clients, so whole is not yet live. It
// returns one line per partition that did not serve within bound; the
// writes are in the history like any other.
func (c *Cluster) probeServing(rec *history.Recorder, tps []history.TP, bound time.Duration) []string {
	c.T.Helper()
	p, err := client.NewProducer(c.Client(), client.ProducerOptions{Acks: client.AcksAll, DeliveryTimeout: bound, RequestTimeout: bound / 3, MaxBlock: bound})
	if err != nil {
		c.T.Fatal(err)
	}
	var (
		mu       sync.Mutex
		problems []string
		wg       sync.WaitGroup
	)
	want := map[string]history.TP{}
	for _, tp := range tps {
		v := "probe-" + tp.String()
		id := rec.Start("probe", true, tp, history.AcksAll, v)
		wg.Add(1)
		p.ProduceAsync(client.Record{Topic: tp.Topic, Partition: tp.Partition, ManualPartition: true, Value: []byte(v)},
			func(res client.Result, err error) {
				defer wg.Done()
				outcome(rec, id, res.Offset, err)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: acks=all write not acknowledged: %v", tp, err))
					return
				}
				want[v] = tp
			})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = p.Close(ctx)
	cancel()
	acked := time.Now()
	for len(want) > 0 && time.Since(acked) < bound {
		for _, cr := range rec.History().Consumes {
			delete(want, cr.Value)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for v, tp := range want {
		problems = append(problems, fmt.Sprintf("%s: the acknowledged write %q never reached its consumer", tp, v))
	}
	return problems
}

// stopKeepsHWs stops every broker of final gracefully, one after another
// as a rolling stop does, and checks that each replica's HW checkpoint
// holds the HW final saw it at: a restart starts from the checkpoint, so a
// graceful stop must not take back a HW the cluster showed.
func (c *Cluster) stopKeepsHWs(final history.Final) {
	c.T.Helper()
	ids := map[int32]bool{}
	for _, ps := range final.Partitions {
		for _, rs := range ps.Replicas {
			ids[rs.Broker] = true
		}
	}
	disk := map[int32]map[string]map[int32]int64{}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if c.Broker(id) == nil {
			continue
		}
		dir := c.BrokerConfig(id).DataDir
		if err := c.StopBroker(id); err != nil {
			c.T.Logf("graceful stop of broker %d: %v", id, err)
		}
		hws, err := broker.CheckpointedHighWatermarks(dir)
		if err != nil {
			c.T.Errorf("broker %d's HW checkpoint: %v", id, err)
			continue
		}
		disk[id] = hws
	}
	for _, ps := range final.Partitions {
		for _, rs := range ps.Replicas {
			hws, stopped := disk[rs.Broker]
			if !rs.Readable || !stopped {
				continue
			}
			if got, ok := hws[ps.TP.Topic][ps.TP.Partition]; !ok || got != rs.HW {
				c.T.Errorf("%s replica %d: HW %d once quiet, but the checkpoint its graceful stop left holds %d (present %v)",
					ps.TP, rs.Broker, rs.HW, got, ok)
			}
		}
	}
}

// final reads every partition once everything is quiet.
func (c *Cluster) final(tps []history.TP, stopped time.Time, liveAt map[history.TP]time.Time) history.Final {
	f := history.Final{FaultsStopped: stopped}
	for _, tp := range tps {
		ps := c.partitionState(tp)
		ps.LiveAt = liveAt[tp]
		f.Partitions = append(f.Partitions, ps)
	}
	return f
}

// outcome records how a produce attempt ended: acknowledged, an error code
// the cluster answered with, or no answer.
func outcome(rec *history.Recorder, id int64, offset int64, err error) {
	switch {
	case err == nil:
		rec.Acked(id, offset)
	case errors.Is(err, context.DeadlineExceeded) || kerr.CodeOf(err) == kerr.RequestTimedOut:
		rec.Unknown(id, err.Error())
	default:
		code := kerr.CodeOf(err)
		if code == kerr.UnknownServerError {
			rec.Unknown(id, err.Error())
			return
		}
		rec.Failed(id, code.String())
	}
}

// produceOnce sends one record once to the partition's leader and records
// the attempt.
func (c *Cluster) produceOnce(rec *history.Recorder, tp history.TP, acks int32, value string) (int64, error) {
	id := rec.Start("direct", false, tp, acks, value)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	off, err := c.Produce(ctx, tp.Topic, tp.Partition, acks, value)
	outcome(rec, id, off, err)
	return off, err
}

// recordingProducer is a client.Producer whose every record is recorded,
// with a bounded number in flight.
type recordingProducer struct {
	name   string
	p      *client.Producer
	acks   int32
	idem   bool
	rec    *history.Recorder
	window chan struct{}
	seq    atomic.Int64
}

func newRecordingProducer(t testing.TB, c *Cluster, rec *history.Recorder, name string, acks client.Acks) *recordingProducer {
	opts := client.ProducerOptions{Acks: acks, DeliveryTimeout: 20 * time.Second, RequestTimeout: 5 * time.Second, Linger: time.Millisecond}
	if acks != client.AcksAll {
		opts.Idempotence = client.IdempotenceOff
	}
	p, err := client.NewProducer(c.Client(), opts)
	if err != nil {
		t.Fatal(err)
	}
	wire := history.AcksAll
	if acks == client.AcksLeader {
		wire = history.AcksLeader
	}
	return &recordingProducer{name: name, p: p, acks: wire, idem: p.Idempotent(), rec: rec, window: make(chan struct{}, 64)}
}

// send produces one new record to tp, waiting for room in the window (or
// giving up when stop closes).
func (rp *recordingProducer) send(tp history.TP, stop <-chan struct{}) bool {
	select {
	case rp.window <- struct{}{}:
	case <-stop:
		return false
	}
	v := fmt.Sprintf("%s-%s-%d", rp.name, tp, rp.seq.Add(1))
	id := rp.rec.Start(rp.name, rp.idem, tp, rp.acks, v)
	rp.p.ProduceAsync(client.Record{Topic: tp.Topic, Partition: tp.Partition, ManualPartition: true, Value: []byte(v)},
		func(res client.Result, err error) {
			<-rp.window
			outcome(rp.rec, id, res.Offset, err)
		})
	return true
}

// close waits for every record in flight to end.
func (rp *recordingProducer) close(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := rp.p.Close(ctx); err != nil {
		t.Logf("closing producer %s: %v", rp.name, err)
	}
}

// recordingConsumers read partitions from offset 0 up to the HW (what a
// consumer may see) and record every record. A consumer whose position
// falls out of the log's range starts a new read session from the log
// start; within a session offsets must rise.
type recordingConsumers struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

func startConsumers(t testing.TB, c *Cluster, rec *history.Recorder, tps []history.TP) *recordingConsumers {
	rc := &recordingConsumers{stop: make(chan struct{})}
	cl := c.Client()
	for _, tp := range tps {
		cs, err := client.NewConsumer(cl, client.ConsumerOptions{Topic: tp.Topic, Partition: tp.Partition,
			MaxWait: 200 * time.Millisecond, Reset: client.ResetNone})
		if err != nil {
			t.Fatal(err)
		}
		name := "consumer-" + tp.String()
		rc.wg.Add(1)
		go func() {
			defer rc.wg.Done()
			defer cs.Close()
			session := int64(1)
			for {
				select {
				case <-rc.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				recs, err := cs.Poll(ctx)
				cancel()
				for _, r := range recs {
					rec.Consumed(name, session, tp, r.Offset, string(r.Value))
				}
				if kerr.CodeOf(err) == kerr.OffsetOutOfRange {
					rec.Event(history.Note, "%s: offset %d out of range; new session from the log start", name, cs.Position())
					session++
					cs.SetPosition(client.OffsetEarliest)
				} else if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	return rc
}

func (rc *recordingConsumers) close() {
	close(rc.stop)
	rc.wg.Wait()
}

// partitionsOf lists topic-0 .. topic-(n-1).
func partitionsOf(topic string, n int32) []history.TP {
	var tps []history.TP
	for p := int32(0); p < n; p++ {
		tps = append(tps, history.TP{Topic: topic, Partition: p})
	}
	return tps
}

// The probe names each partition that did not serve: one whose write was
// not acknowledged (a topic that does not exist stands for a leader that
// refuses) and one whose acknowledged write no consumer read; a partition
// that served is not named.
func TestProbeServingNamesWhatWasNotServed(t *testing.T) {
	c := Start(t, Options{})
	c.CreateTopic("read", 1, 3, nil)
	c.CreateTopic("unread", 1, 3, nil)
	rec := history.NewRecorder()
	served, unread, missing := history.TP{Topic: "read"}, history.TP{Topic: "unread"}, history.TP{Topic: "missing"}
	consumers := startConsumers(t, c, rec, []history.TP{served})
	defer consumers.close()
	problems := c.probeServing(rec, []history.TP{served, unread, missing}, 3*time.Second)
	named := func(tp history.TP) bool {
		return slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, tp.String()+":") })
	}
	if named(served) || !named(unread) || !named(missing) || len(problems) != 2 {
		t.Fatalf("probe problems %q: want %s (not read) and %s (not acknowledged) named, %s not", problems, unread, missing, served)
	}
	t.Logf("probe named: %q", problems)
}
