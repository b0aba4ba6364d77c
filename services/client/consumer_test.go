package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// appendValues writes values from..to-1 to t-0 as one batch.
func appendValues(fc *fakebroker.Cluster, from, to int) {
	var recs []recordbatch.Record
	for i := from; i < to; i++ {
		recs = append(recs, recordbatch.Record{
			Key: fmt.Appendf(nil, "k%d", i), Value: value(i), Timestamp: int64(1000 + i),
			Headers: []recordbatch.Header{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}},
		})
	}
	fc.Append("t", 0, recs...)
}

func newConsumer(t *testing.T, c *client.Client, o client.ConsumerOptions) *client.Consumer {
	t.Helper()
	if o.Topic == "" {
		o.Topic = "t"
	}
	if o.MaxWait == 0 {
		o.MaxWait = 50 * time.Millisecond
	}
	cs, err := client.NewConsumer(c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// checkRecords asserts that recs are the appended records from..to-1.
func checkRecords(t *testing.T, recs []client.Record, from, to int) {
	t.Helper()
	if len(recs) != to-from {
		t.Fatalf("got %d records, want offsets %d..%d", len(recs), from, to-1)
	}
	for j, r := range recs {
		i := from + j
		if r.Offset != int64(i) || string(r.Value) != string(value(i)) || string(r.Key) != fmt.Sprintf("k%d", i) ||
			r.Timestamp.UnixMilli() != int64(1000+i) || len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(i) ||
			r.Topic != "t" || r.Partition != 0 {
			t.Fatalf("record %d = %+v", i, r)
		}
	}
}

func TestConsumerFollowsHighWatermark(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	ctx := testCtx(t, 10*time.Second)

	appendValues(fc, 0, 5)
	fc.FreezeHW("t", 0, true)
	appendValues(fc, 5, 10) // written but not committed
	// Starting in the middle of the first batch skips its earlier records.
	cs := newConsumer(t, c, client.ConsumerOptions{StartOffset: 2})
	recs, err := cs.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 2, 5)
	if cs.Position() != 5 || cs.HighWatermark() != 5 {
		t.Fatalf("position %d, high watermark %d", cs.Position(), cs.HighWatermark())
	}
	// Nothing readable: an empty poll after MaxWait.
	if recs, err := cs.Poll(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("poll at the high watermark: %d records, %v", len(recs), err)
	}
	// The high watermark moves while the consumer waits.
	go func() {
		time.Sleep(20 * time.Millisecond)
		fc.FreezeHW("t", 0, false)
	}()
	cs2 := newConsumer(t, c, client.ConsumerOptions{StartOffset: 5, MaxWait: 2 * time.Second})
	recs, err = cs2.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 5, 10)
	appendValues(fc, 10, 12)
	recs, err = cs2.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 10, 12)
}

func TestConsumerStartsAtEarliestOrLatest(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	ctx := testCtx(t, 5*time.Second)
	appendValues(fc, 0, 4)
	fc.DeleteBefore("t", 0, 4)
	appendValues(fc, 4, 6)

	early := newConsumer(t, c, client.ConsumerOptions{StartOffset: client.OffsetEarliest})
	recs, err := early.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 4, 6)

	late := newConsumer(t, c, client.ConsumerOptions{StartOffset: client.OffsetLatest})
	if recs, err := late.Poll(ctx); err != nil || len(recs) != 0 || late.Position() != 6 {
		t.Fatalf("latest: %d records at %d, %v", len(recs), late.Position(), err)
	}
	appendValues(fc, 6, 7)
	recs, err = late.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 6, 7)
}

func TestConsumerOffsetOutOfRange(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	ctx := testCtx(t, 5*time.Second)
	appendValues(fc, 0, 3)
	appendValues(fc, 3, 6)
	fc.DeleteBefore("t", 0, 3)

	strict := newConsumer(t, c, client.ConsumerOptions{})
	_, err := strict.Poll(ctx)
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Code != kerr.OffsetOutOfRange {
		t.Fatalf("poll below the log start: %v", err)
	}
	reset := newConsumer(t, c, client.ConsumerOptions{Reset: client.ResetEarliest})
	recs, err := reset.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 3, 6)
	latest := newConsumer(t, c, client.ConsumerOptions{StartOffset: 100, Reset: client.ResetLatest})
	if recs, err := latest.Poll(ctx); err != nil || len(recs) != 0 || latest.Position() != 6 {
		t.Fatalf("reset to latest: %d records at %d, %v", len(recs), latest.Position(), err)
	}
}

// A consumer started at an offset with the leader epoch read up to it
// (StartLeaderEpoch, as a group's commit gives) finds, on its first fetch,
// a log an unclean election truncated under it since; without the epoch
// it cannot tell, and reads on in the new log.
func TestConsumerStartLeaderEpochFindsATruncation(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	ctx := testCtx(t, 5*time.Second)
	for i := range 6 {
		appendValues(fc, i, i+1)
	}
	fc.UncleanElection("t", 0, 1)
	appendValues(fc, 1, 8)
	epoch := int32(0)
	strict := newConsumer(t, c, client.ConsumerOptions{StartOffset: 6, StartLeaderEpoch: &epoch})
	_, err := strict.Poll(ctx)
	var lt *client.LogTruncation
	if !errors.As(err, &lt) || lt.DivergentOffset != 1 || lt.Position != 6 || lt.Epoch != 0 {
		t.Fatalf("first poll at 6, epoch 0: %v; want a LogTruncation from offset 1", err)
	}
	blind := newConsumer(t, c, client.ConsumerOptions{StartOffset: 6})
	if recs, err := blind.Poll(ctx); err != nil || len(recs) == 0 || recs[0].Offset != 6 {
		t.Fatalf("without the epoch: %d records, %v; want them from 6", len(recs), err)
	}
	if _, err := client.NewConsumer(c, client.ConsumerOptions{Topic: "t", StartOffset: client.OffsetEarliest, StartLeaderEpoch: &epoch}); kerr.CodeOf(err) != kerr.InvalidConfig {
		t.Fatalf("an epoch with OffsetEarliest: %v, want INVALID_CONFIG", err)
	}
}

func TestConsumerFollowsLeaderMove(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2})
	fc.CreateTopic("t", 1, 1, 2)
	fc.SetLeaderHints(false)
	c := newClient(t, fc)
	ctx := testCtx(t, 5*time.Second)
	appendValues(fc, 0, 3)
	cs := newConsumer(t, c, client.ConsumerOptions{})
	recs, err := cs.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 0, 3)
	// The consumer's leader epoch is now stale: FENCED_LEADER_EPOCH, then a
	// metadata refresh finds broker 2.
	fc.MoveLeader("t", 0, 2)
	appendValues(fc, 3, 5)
	recs, err = cs.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 3, 5)
	if fc.NodeCalls(2, "Fetch") == 0 || cs.ReadReplica() != 2 {
		t.Fatalf("fetches after the move went to broker %d", cs.ReadReplica())
	}
}

func TestConsumerFetchesFromRackReplicaAndFallsBack(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2, Racks: []string{"a", "b"}})
	fc.CreateTopic("t", 1, 1, 2)
	c := newClient(t, fc)
	ctx := testCtx(t, 5*time.Second)
	appendValues(fc, 0, 2)

	cs := newConsumer(t, c, client.ConsumerOptions{Rack: "b"})
	recs, err := cs.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 0, 2)
	if cs.ReadReplica() != 1 {
		t.Fatalf("first fetch went to %d, want the leader", cs.ReadReplica())
	}
	appendValues(fc, 2, 4)
	recs, err = cs.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 2, 4)
	if cs.ReadReplica() != 2 || fc.NodeCalls(2, "Fetch") != 1 {
		t.Fatalf("second fetch went to %d (%d fetches on broker 2), want the rack-b replica", cs.ReadReplica(), fc.NodeCalls(2, "Fetch"))
	}

	// The replica fails: the consumer goes back to the leader at once.
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Fetch" && call.Node == 2 {
			return &fakebroker.Fault{Code: kerr.ReplicaNotAvailable}
		}
		return nil
	})
	appendValues(fc, 4, 6)
	recs, err = cs.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 4, 6)
	if cs.ReadReplica() != 1 {
		t.Fatalf("after the replica failed, the fetch went to %d, want the leader", cs.ReadReplica())
	}

	// Without a rack the leader never redirects.
	plain := newConsumer(t, c, client.ConsumerOptions{})
	for range 2 {
		if _, err := plain.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		if plain.ReadReplica() != 1 {
			t.Fatalf("consumer without a rack read from %d", plain.ReadReplica())
		}
	}
}

func TestListOffsets(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	ctx := testCtx(t, 5*time.Second)
	appendValues(fc, 0, 10) // timestamps 1000..1009
	fc.DeleteBefore("t", 0, 0)
	for _, tc := range []struct {
		spec client.OffsetSpec
		want int64
	}{
		{client.Earliest(), 0},
		{client.Latest(), 10},
		{client.AtTime(time.UnixMilli(1004)), 4},
		{client.AtTime(time.UnixMilli(5000)), -1},
	} {
		got, err := c.ListOffsets(ctx, "t", 0, tc.spec)
		if err != nil || got.Offset != tc.want {
			t.Errorf("%+v: %+v %v, want %d", tc.spec, got, err, tc.want)
		}
	}
	// Retriable: retried until the context ends, then reported with the last code.
	_, err := c.ListOffsets(testCtx(t, 300*time.Millisecond), "nope", 0, client.Latest())
	if codeOf(err) != kerr.UnknownTopicOrPartition {
		t.Fatalf("unknown topic: %v", err)
	}
}

// A topic deleted and created again under its name starts over at offset
// 0 with a new topic id. A consumer positioned in the old topic resets as
// its policy says once the metadata names the new id, rather than reading
// the new topic on from its old position and skipping the records below it.
func TestConsumerResetsWhenTheTopicIsCreatedAgain(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	ctx := testCtx(t, 10*time.Second)
	appendValues(fc, 0, 6)
	earliest := newConsumer(t, c, client.ConsumerOptions{Reset: client.ResetEarliest})
	latest := newConsumer(t, c, client.ConsumerOptions{Reset: client.ResetLatest})
	strict := newConsumer(t, c, client.ConsumerOptions{})
	for _, cs := range []*client.Consumer{earliest, latest, strict} {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, recs, 0, 6)
	}
	oldID := fc.TopicID("t")

	fc.DeleteTopic("t")
	if recs, err := earliest.Poll(testCtx(t, 300*time.Millisecond)); err == nil || len(recs) != 0 {
		t.Fatalf("poll of a deleted topic: %d records, %v", len(recs), err)
	}
	fc.CreateTopic("t", 1)
	appendValues(fc, 0, 8) // past the old position

	recs, err := earliest.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 0, 8)
	if recs, err := latest.Poll(ctx); err != nil || len(recs) != 0 || latest.Position() != 8 {
		t.Fatalf("reset to latest: %d records at %d, %v", len(recs), latest.Position(), err)
	}
	appendValues(fc, 8, 9)
	recs, err = latest.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 8, 9)

	// With ResetNone the error says so, again, until the position is set.
	for range 2 {
		_, err = strict.Poll(ctx)
		var rc *client.TopicRecreated
		if !errors.As(err, &rc) || codeOf(err) != kerr.OffsetOutOfRange || rc.OldID != oldID || rc.NewID != fc.TopicID("t") ||
			strict.Position() != 6 {
			t.Fatalf("poll of a topic created again without a reset policy: %v at %d", err, strict.Position())
		}
	}
	strict.SetPosition(client.OffsetEarliest)
	recs, err = strict.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 0, 9)
}

// Once the client has seen a topic created again (its id replaced), a
// refresh answered by a broker whose metadata lags, naming the old id and
// its leaders, is ignored for that topic: consumers in the new topic keep
// their position and read on. Before, the cache took the old id back, and
// a consumer took it for the topic created once more: ResetNone returned
// TopicRecreated, ResetEarliest read the new topic again from its start.
func TestConsumerIgnoresALaggingBrokersOldTopicID(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2})
	fc.CreateTopic("t", 1, 2)
	var (
		mu     sync.Mutex
		oldT   *brokerv1.TopicMetadata // t as the first topic's answers gave it
		lagged bool                    // the next answer is a lagging broker's
		served int                     // lagging answers served
	)
	o := testOptions()
	o.DialOptions = []grpc.DialOption{rewriteMetadata(&mu, func(target string, r *brokerv1.MetadataResponse) {
		for i, tm := range r.Topics {
			switch {
			case tm.GetName() != "t":
			case oldT == nil:
				oldT = tm
			case lagged:
				r.Topics[i] = oldT
				lagged = false
				served++
			}
		}
	})}
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t, 10*time.Second)
	appendValues(fc, 0, 6)
	strict := newConsumer(t, c, client.ConsumerOptions{})
	earliest := newConsumer(t, c, client.ConsumerOptions{Reset: client.ResetEarliest})
	for _, cs := range []*client.Consumer{strict, earliest} {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, recs, 0, 6)
	}
	oldID := fc.TopicID("t")

	recreateAndReadAgain(ctx, t, fc, strict, earliest, oldID)

	// The leader says it no longer leads (no hint), so the consumer asks the
	// metadata again, and a broker that still names the old topic answers.
	mu.Lock()
	lagged = true
	mu.Unlock()
	failed := false
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		mu.Lock()
		defer mu.Unlock()
		if call.Method == "Fetch" && !failed {
			failed = true
			return &fakebroker.Fault{Code: kerr.NotLeaderOrFollower, NoHint: true}
		}
		return nil
	})
	appendValues(fc, 3, 5)
	for _, cs := range []*client.Consumer{strict, earliest} {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after a lagging broker's answer: %v", err)
		}
		checkRecords(t, recs, 3, 5)
		if cs.Position() != 5 {
			t.Fatalf("position %d, want 5", cs.Position())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if served != 1 {
		t.Fatalf("%d lagging answers served, want 1", served)
	}
}

// One broker whose metadata lags, answering every refresh while the other
// refuses them, never sends the client back to the topic's old id: a
// replaced id is taken back only when two brokers name it. Before, three
// such answers in a row were enough, and the consumers reset a second
// time: ResetNone returned TopicRecreated, ResetEarliest read the new
// topic again from its start.
func TestConsumerIgnoresOneLaggingBrokerAnsweringAlone(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2})
	fc.CreateTopic("t", 1, 2)
	lagger := "passthrough:///" + fc.BrokerAddr(2)
	var (
		mu      sync.Mutex
		oldT    *brokerv1.TopicMetadata // t as the first topic's answers gave it
		lagging bool                    // broker 2 answers with oldT
		served  int                     // lagging answers served
	)
	o := testOptions()
	o.DialOptions = []grpc.DialOption{rewriteMetadata(&mu, func(target string, r *brokerv1.MetadataResponse) {
		for i, tm := range r.Topics {
			switch {
			case tm.GetName() != "t":
			case oldT == nil:
				oldT = tm
			case lagging && target == lagger:
				r.Topics[i] = oldT
				served++
			}
		}
	})}
	c, err := client.New(fc.BrokerAddrs(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t, 10*time.Second)
	appendValues(fc, 0, 6)
	strict := newConsumer(t, c, client.ConsumerOptions{})
	earliest := newConsumer(t, c, client.ConsumerOptions{Reset: client.ResetEarliest})
	for _, cs := range []*client.Consumer{strict, earliest} {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, recs, 0, 6)
	}

	recreateAndReadAgain(ctx, t, fc, strict, earliest, "")

	// Broker 1 refuses every Metadata call, so the lagging broker 2
	// answers each refresh, many more than three in a row.
	mu.Lock()
	lagging = true
	mu.Unlock()
	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Method == "Metadata" && call.Node == 1 {
			return &fakebroker.Fault{Code: kerr.BrokerNotAvailable}
		}
		return nil
	})
	const refreshes = 10
	for range refreshes {
		if _, err := c.Metadata(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	appendValues(fc, 3, 5)
	for _, cs := range []*client.Consumer{strict, earliest} {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after one lagging broker's answers: %v", err)
		}
		checkRecords(t, recs, 3, 5)
		if cs.Position() != 5 {
			t.Fatalf("position %d, want 5", cs.Position())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if served < refreshes {
		t.Fatalf("%d lagging answers served, want at least %d", served, refreshes)
	}
}

// A client whose first answer named the topic's new id and whose second,
// from a broker whose metadata lags, the old one took the old id (it had
// not seen it replaced). Answers of one broker naming the new id do not
// move it back; once a second broker names it too, the cache takes it and
// the consumer reads on in the new topic.
func TestConsumerTakesTheNewTopicIDTwoBrokersName(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2})
	fc.CreateTopic("t", 1, 2)
	oldT := &brokerv1.TopicMetadata{Name: "t", TopicId: fc.TopicID("t"),
		Partitions: []*brokerv1.PartitionMetadata{{Partition: 0, Leader: 2, Replicas: []int32{2}, Isr: []int32{2}}}}
	fc.DeleteTopic("t")
	fc.CreateTopic("t", 1, 1)
	newID := fc.TopicID("t")
	lagger := "passthrough:///" + fc.BrokerAddr(2)
	var (
		mu      sync.Mutex
		lagging bool // broker 2 answers with oldT
	)
	o := testOptions()
	o.DialOptions = []grpc.DialOption{rewriteMetadata(&mu, func(target string, r *brokerv1.MetadataResponse) {
		for i, tm := range r.Topics {
			if tm.GetName() == "t" && lagging && target == lagger {
				r.Topics[i] = oldT
			}
		}
	})}
	c, err := client.New(fc.BrokerAddrs()[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t, 10*time.Second)
	appendValues(fc, 0, 3)
	strict := newConsumer(t, c, client.ConsumerOptions{})
	recs, err := strict.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 0, 3)

	// answeredBy makes broker `by` answer a refresh, the other refusing it.
	answeredBy := func(by int32) {
		t.Helper()
		fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
			if call.Method == "Metadata" && call.Node != by {
				return &fakebroker.Fault{Code: kerr.BrokerNotAvailable}
			}
			return nil
		})
		if _, err := c.Metadata(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	lagging = true
	mu.Unlock()
	answeredBy(2) // an id not seen before: taken
	mu.Lock()
	lagging = false
	mu.Unlock()
	var rc *client.TopicRecreated
	if _, err := strict.Poll(ctx); !errors.As(err, &rc) || rc.OldID != newID {
		t.Fatalf("poll after the lagging broker's answer: %v", err)
	}
	for range 10 {
		answeredBy(1)
	}
	if _, err := strict.Poll(ctx); !errors.As(err, &rc) || rc.OldID != newID {
		t.Fatalf("poll after answers of one broker naming the replaced id: %v", err)
	}
	answeredBy(2)
	fc.SetControl(nil)
	appendValues(fc, 3, 5)
	recs, err = strict.Poll(ctx)
	if err != nil {
		t.Fatalf("poll after two brokers named the new id: %v", err)
	}
	checkRecords(t, recs, 3, 5)
}

// A leader whose fetches stop being answered (its connection stays up, so
// no transport error says anything) is looked up again once it has been
// silent for the request timeout, even when each poll's deadline is
// shorter: the consumer follows the leadership to the broker that took it
// over, rather than asking the silent one until metadata.max.age.
func TestConsumerLeavesALeaderThatStopsAnswering(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{Brokers: 2})
	fc.CreateTopic("t", 1, 1, 2)
	fc.SetLeaderHints(false)
	c := newClient(t, fc)
	appendValues(fc, 0, 3)
	cs := newConsumer(t, c, client.ConsumerOptions{})
	recs, err := cs.Poll(testCtx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 0, 3)

	fc.SetControl(func(call fakebroker.Call) *fakebroker.Fault {
		if call.Node == 1 && call.Method == "Fetch" {
			return &fakebroker.Fault{Delay: time.Hour}
		}
		return nil
	})
	fc.MoveLeader("t", 0, 2)
	appendValues(fc, 3, 5)
	var got []client.Record
	for i := 0; i < 5 && len(got) == 0; i++ {
		recs, err := cs.Poll(testCtx(t, time.Second)) // shorter than the request timeout
		t.Logf("poll %d: %d records, %v", i, len(recs), err)
		got = append(got, recs...)
	}
	checkRecords(t, got, 3, 5)
	if cs.ReadReplica() != 2 {
		t.Fatalf("read from broker %d, want 2", cs.ReadReplica())
	}
}

// rewriteMetadata is a dial option under which rewrite, holding mu, may
// change every Metadata answer the client gets from the broker at target
// (as a broker whose metadata lags would answer).
func rewriteMetadata(mu *sync.Mutex, rewrite func(target string, r *brokerv1.MetadataResponse)) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if r, ok := reply.(*brokerv1.MetadataResponse); ok && err == nil {
				mu.Lock()
				defer mu.Unlock()
				rewrite(cc.Target(), r)
			}
			return err
		})
}

// recreateAndReadAgain deletes t and creates it again with three records:
// strict (ResetNone) must report the re-creation (of the topic oldID, if
// given), and both consumers then read the new topic from its start.
func recreateAndReadAgain(ctx context.Context, t *testing.T, fc *fakebroker.Cluster, strict, earliest *client.Consumer, oldID string) {
	t.Helper()
	fc.DeleteTopic("t")
	fc.CreateTopic("t", 1, 1) // another leader, so the old one's route is wrong too
	appendValues(fc, 0, 3)
	var rc *client.TopicRecreated
	if _, err := strict.Poll(ctx); !errors.As(err, &rc) || (oldID != "" && rc.OldID != oldID) {
		t.Fatalf("poll of the topic created again: %v", err)
	}
	strict.SetPosition(client.OffsetEarliest)
	for _, cs := range []*client.Consumer{strict, earliest} {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, recs, 0, 3)
	}
}
