package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
)

// ordersPartition describes orders-0 through the gateway.
func ordersPartition(t testing.TB, e *env) *adminv1.PartitionDescription {
	t.Helper()
	return describe(t, e, "topics=orders").GetTopics()[0].GetPartitions()[0]
}

// testLeaderCrash kills the leader of orders-0: a REST produce right after
// still succeeds, because the gateway finds the new leader. Then the old
// leader comes back and a preferred election moves leadership to it, and
// the gateway follows again.
func testLeaderCrash(t *testing.T, e *env) {
	before := fetchValues(t, e, ordersPath)
	old := ordersPartition(t, e)
	preferred := old.GetReplicas()[0]
	if old.GetLeader() != preferred {
		t.Fatalf("orders-0 is led by %d, not its preferred replica %d", old.GetLeader(), preferred)
	}
	// A follower of the partition waits on the old leader for the next record.
	follow := followAsync(e.r, fmt.Sprintf("%s/records:follow?offset=%d", ordersPath, len(before)))
	time.Sleep(200 * time.Millisecond)
	e.tc.CrashBroker(old.GetLeader())

	var p brokerv1.ProduceResponse
	e.call(http.MethodPost, ordersPath+"/records", produceBody(-1, "after-crash"), &p)
	now := ordersPartition(t, e)
	if now.GetLeader() == old.GetLeader() || p.GetLeaderEpoch() <= old.GetLeaderEpoch() {
		t.Fatalf("produced in epoch %d; partition now %v, was %v", p.GetLeaderEpoch(), now, old)
	}
	if got := fetchValues(t, e, ordersPath); !slices.Equal(got, append(before, "after-crash")) {
		t.Fatalf("after the crash the log holds %q, want %q", got, append(before, "after-crash"))
	}
	select {
	case f := <-follow:
		if recs := f.resp.GetFetch().GetRecords(); f.err != nil || len(recs) == 0 || string(recs[0].GetValue()) != "after-crash" {
			t.Fatalf("the follow stream across the crash: %v %v", f.resp, f.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the follow stream got nothing after the leader crashed")
	}

	// Two replicas left in sync, min.insync.replicas=2: under-replicated and at min ISR.
	waitFor(t, 10*time.Second, "the dead replica out of the ISR", func() bool { return len(ordersPartition(t, e).GetIsr()) == 2 })
	expectFiltered(t, e, "orders", map[string][]string{"underReplicated": {"orders-0"}, "atMinIsr": {"orders-0"}})
	var c adminv1.DescribeClusterResponse
	e.call(http.MethodGet, "/v1/cluster", nil, &c)
	for _, b := range c.GetBrokers() {
		if b.GetNode().GetId() == old.GetLeader() && b.GetAlive() {
			t.Fatalf("cluster still shows broker %d alive: %v", old.GetLeader(), &c)
		}
	}

	// The preferred leader is down: nothing to elect.
	expectError(t, electPreferred(e), "preferred election without the preferred replica",
		http.StatusServiceUnavailable, "PREFERRED_LEADER_NOT_AVAILABLE")

	e.tc.StartBroker(preferred)
	waitFor(t, 20*time.Second, fmt.Sprintf("broker %d back in the ISR", preferred), func() bool {
		return len(ordersPartition(t, e).GetIsr()) == 3
	})
	var el adminv1.ElectLeadersResponse
	a := electPreferred(e)
	if a.status != http.StatusOK {
		t.Fatalf("preferred election: %d %s", a.status, a.body)
	}
	decode(t, a.body, &el)
	if r := el.GetResults()[0]; r.GetErrorCode() != 0 || r.GetLeader() != preferred {
		t.Fatalf("preferred election: %v", &el)
	}
	// Leadership moved without a crash: the gateway follows.
	e.call(http.MethodPost, ordersPath+"/records", produceBody(-1, "back-home"), &p)
	if n := fetchValues(t, e, ordersPath); n[len(n)-1] != "back-home" {
		t.Fatalf("log ends with %q", n[len(n)-1])
	}
	checkLeaderHint(t, e)
}

// checkLeaderHint sends a partition call to a follower, as a route from
// stale metadata would: the answer is NOT_LEADER_OR_FOLLOWER, worth a
// retry, and once the client's metadata has taken the answer in, the next
// attempt reaches the leader.
func checkLeaderHint(t *testing.T, e *env) {
	cl, err := client.New(e.tc.brokers, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r := &router{cl: cl, budget: 5 * time.Second, stopping: context.Background()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listLatest := func(bc brokerv1.BrokerServiceClient) error {
		_, err := bc.ListOffsets(ctx, &brokerv1.ListOffsetsRequest{Topic: "orders", Spec: brokerv1.OffsetSpec_OFFSET_SPEC_LATEST})
		return err
	}
	leader := ordersPartition(t, e).GetLeader()
	follower, err := cl.Broker(e.tc.brokers[leader%3]) // broker leader%3+1
	if err != nil {
		t.Fatal(err)
	}
	ke := asKerr(listLatest(follower))
	if ke.Code != kerr.NotLeaderOrFollower || ke.Leader == nil || ke.Leader.ID != leader {
		t.Fatalf("call on a follower: %v; want NOT_LEADER_OR_FOLLOWER naming broker %d", ke, leader)
	}
	if !r.noteError("orders", 0, ke) {
		t.Fatal("NOT_LEADER_OR_FOLLOWER judged not worth a retry")
	}
	if retry, err := r.leaderAttempt(ctx, "orders", 0, listLatest); err != nil {
		t.Fatalf("call on the leader: %v (retry %v)", err, retry)
	}
}

// testNotEnoughReplicas crashes two of three brokers: with
// min.insync.replicas=2 an acks=all produce is 503 NOT_ENOUGH_REPLICAS with
// Retry-After, while acks=1 still works; a topic whose only replica died
// is unavailable.
func testNotEnoughReplicas(t *testing.T, e *env) {
	leader := ordersPartition(t, e).GetLeader()
	var others []int32
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			others = append(others, id)
		}
	}
	var created adminv1.CreateTopicsResponse
	e.call(http.MethodPost, "/v1/topics", fmt.Sprintf(`{"topics": [{"name": "solo",
		"assignments": [{"partition": 0, "replicas": [%d]}]}], "timeoutMs": 10000}`, others[0]), &created)

	for _, id := range others {
		e.tc.CrashBroker(id)
	}
	waitFor(t, 10*time.Second, "the ISR of orders-0 down to its leader", func() bool {
		return len(ordersPartition(t, e).GetIsr()) == 1
	})
	// The leader must know it too before the acks=all write: had it still
	// counted two in-sync replicas, the write would be appended and wait for
	// a HW that cannot move below min.insync.replicas (REQUEST_TIMED_OUT,
	// as in Kafka) instead of being refused up front.
	waitFor(t, 10*time.Second, "the leader of orders-0 acting on the shrunk ISR", func() bool {
		isr, ok := e.tc.ReplicaISR(leader, "orders", 0)
		return ok && len(isr) == 1
	})
	// solo-0 keeps its dead replica as its ISR (an ISR is never emptied),
	// which is min.insync.replicas (1) for it.
	expectFiltered(t, e, "orders&topics=solo", map[string][]string{
		"underReplicated": {"orders-0"},
		"atMinIsr":        {"solo-0"},
		"underMinIsr":     {"orders-0"},
		"unavailable":     {"solo-0"},
	})

	e.r.fails(http.MethodPost, ordersPath+"/records", produceBody(-1, "lost?"), http.StatusServiceUnavailable, "NOT_ENOUGH_REPLICAS")
	e.call(http.MethodPost, ordersPath+"/records", produceBody(1, "acks-one"), nil)

	// No leader for solo-0: after its retry budget the gateway says so.
	quick := newREST(t, startGateway(t, e.tc, func(o *Options) { o.RetryTimeout = 300 * time.Millisecond }))
	quick.fails(http.MethodGet, "/v1/topics/solo/partitions/0/records?offset=0", nil, http.StatusServiceUnavailable, "LEADER_NOT_AVAILABLE")
}

type followed struct {
	resp *brokerv1.FollowResponse
	err  error
}

// followAsync opens a follow stream in the background and delivers its
// first answer.
func followAsync(api *rest, path string) <-chan followed {
	out := make(chan followed, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.base+path, nil)
		if err != nil {
			out <- followed{err: err}
			return
		}
		resp, err := api.hc.Do(req)
		if err != nil {
			out <- followed{err: err}
			return
		}
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var line struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := dec.Decode(&line); err != nil {
				out <- followed{err: fmt.Errorf("status %d: %w", resp.StatusCode, err)}
				return
			}
			if len(line.Result) == 0 {
				out <- followed{err: fmt.Errorf("status %d: the stream ended with %s", resp.StatusCode, line.Error)}
				return
			}
			f := &brokerv1.FollowResponse{}
			err := protojson.Unmarshal(line.Result, f)
			if ft := f.GetFetch(); err == nil && len(ft.GetRecords()) == 0 && len(ft.GetRecordBatches()) == 0 && ft.GetDivergingEpoch() == nil {
				continue // the first answer, or a keep-alive: where the log stands, no records
			}
			out <- followed{resp: f, err: err}
			return
		}
	}()
	return out
}

// A REST follower whose stream the gateway reopens on a replica elected
// uncleanly is told the log was truncated under it: one answer naming
// where the logs part, then OFFSET_OUT_OF_RANGE. Reopened at its next
// offset without its last epoch, it was handed what the new leader wrote
// there and silently skipped what it wrote below.
func TestRESTFollowAcrossAnUncleanElectionReportsTheTruncation(t *testing.T) {
	tc := startClusterWith(t, clustertest.Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	tc.CreateTopic("cut", 1, 3, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	api := newREST(t, startGateway(t, tc, func(o *Options) { o.RetryTimeout = 40 * time.Second }))
	reps := tc.Partition("cut", 0).GetReplicas()
	leader, other, lagging := reps[0], reps[1], reps[2]
	ctx := context.Background()
	if _, err := tc.Produce(ctx, "cut", 0, -1, "a0"); err != nil {
		t.Fatal(err)
	}
	tc.SameLogs("cut", 0, reps...)
	tc.Net.Partition(clustertest.BrokerName(leader), clustertest.BrokerName(lagging))
	for i := 1; i <= 5; i++ {
		if _, err := tc.Produce(ctx, "cut", 0, -1, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	tc.WaitFor(10*time.Second, "the cut-off follower out of the ISR", func() bool {
		return !slices.Contains(tc.Partition("cut", 0).GetIsr(), lagging)
	})

	resp, closeBody := api.open(http.MethodGet, "/v1/topics/cut/partitions/0/records:follow?offset=0", nil)
	defer closeBody()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: status %d", resp.StatusCode)
	}
	type line struct {
		Result json.RawMessage `json:"result"`
		Error  *errorBody      `json:"error"`
	}
	lines := make(chan line, 16)
	go func() {
		defer close(lines)
		dec := json.NewDecoder(resp.Body)
		for {
			var l line
			if dec.Decode(&l) != nil {
				return
			}
			lines <- l
		}
	}()
	next := func(what string) line {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the follow stream ended waiting for %s", what)
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("nothing on the follow stream waiting for %s", what)
		}
		return line{}
	}
	var read []string
	for len(read) < 6 {
		l := next("a0..a5")
		var f brokerv1.FollowResponse
		if l.Error != nil || protojson.Unmarshal(l.Result, &f) != nil {
			t.Fatalf("before the election: %+v %s", l.Error, l.Result)
		}
		for _, r := range f.GetFetch().GetRecords() {
			read = append(read, string(r.GetValue()))
		}
	}

	tc.CrashBroker(leader)
	tc.CrashBroker(other)
	tc.Net.HealAll()
	tc.WaitFor(15*time.Second, "the out-of-sync replica elected", func() bool {
		return tc.Partition("cut", 0).GetLeader() == lagging && tc.Leads(lagging, "cut", 0)
	})
	for i := 1; i <= 7; i++ {
		if _, err := tc.Produce(ctx, "cut", 0, -1, fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	l := next("the divergence")
	var f brokerv1.FollowResponse
	if l.Error != nil || protojson.Unmarshal(l.Result, &f) != nil {
		t.Fatalf("after the election: error %+v, result %s; want the divergence", l.Error, l.Result)
	}
	if d := f.GetFetch().GetDivergingEpoch(); d.GetEndOffset() != 1 || len(f.GetFetch().GetRecords()) != 0 {
		t.Fatalf("after the unclean election the stream sent %v; want the divergence at offset 1 and no records (it had read %v)", &f, read)
	}
	if l := next("the end of the stream"); l.Error == nil || l.Error.Name != "OFFSET_OUT_OF_RANGE" {
		t.Fatalf("after the divergence: error %+v, result %s; want OFFSET_OUT_OF_RANGE", l.Error, l.Result)
	}
}

// With no controller reachable, a cluster watch is an ordinary REST error
// once the retry budget is spent, as every other admin call is. It waited
// for its first snapshot for ever: no status, not even headers.
func TestClusterWatchWithoutAControllerAnswersAnError(t *testing.T) {
	tc := startClusterWith(t, clustertest.Options{})
	api := newREST(t, startGateway(t, tc, func(o *Options) { o.RetryTimeout, o.RequestTimeout = 2*time.Second, time.Second }))
	tc.StopController(1)
	tc.StopController(2)
	api.fails(http.MethodGet, "/v1/cluster", nil, http.StatusServiceUnavailable, "NETWORK_EXCEPTION")
	api.fails(http.MethodGet, "/v1/cluster:watch", nil, http.StatusServiceUnavailable, "NETWORK_EXCEPTION")
}

// A cluster:watch open while every controller goes away ends with a
// NETWORK_EXCEPTION line once no message came for its interval and the
// retry budget, as a new watch is refused then and a follow ends once its
// budget is spent; it stayed open and silent for as long as the
// controllers were gone. A new watch works once a controller is back.
func TestAnOpenClusterWatchEndsWhenNoControllerAnswers(t *testing.T) {
	tc := startClusterWith(t, clustertest.Options{})
	api := newREST(t, startGateway(t, tc, func(o *Options) { o.RetryTimeout, o.RequestTimeout = 2*time.Second, time.Second }))
	const path = "/v1/cluster:watch?intervalMs=200"
	resp, closeBody := api.open(http.MethodGet, path, nil) // open bounds the read by a deadline
	defer closeBody()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	if !sc.Scan() {
		t.Fatalf("no first message: %v", sc.Err())
	}
	tc.StopController(1)
	tc.StopController(2)
	var last struct {
		Error *errorBody `json:"error"`
	}
	for last.Error == nil {
		if !sc.Scan() {
			t.Fatalf("the watch ended without an error line (%v)", sc.Err())
		}
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("line %s: %v", sc.Bytes(), err)
		}
	}
	if last.Error.Name != "NETWORK_EXCEPTION" {
		t.Fatalf("the watch ended with %+v, want NETWORK_EXCEPTION", last.Error)
	}
	tc.StartController(1)
	waitFor(t, 30*time.Second, "a new watch", func() bool {
		resp, closeBody := api.open(http.MethodGet, path, nil)
		defer closeBody()
		return resp.StatusCode == http.StatusOK
	})
}

// Idle records:follow streams do not hold up the gateway's other calls to
// their broker: they ride connections of their own. On the calls' shared
// connection, as many idle follows as the broker's streams per connection
// (max.concurrent.streams.per.connection) made every produce and fetch to
// that broker wait, for every user, and fail with 504.
func TestIdleFollowsDoNotHoldUpOtherCalls(t *testing.T) {
	const limit = 8
	tc := startClusterWith(t, clustertest.Options{Adjust: func(c *broker.Config) { c.Limits.MaxConcurrentStreams = limit }})
	tc.CreateTopic("hot", 1, 3, nil)
	api := newREST(t, startGateway(t, tc, func(o *Options) { o.RequestTimeout, o.RetryTimeout = 2*time.Second, 2*time.Second }))
	const path = "/v1/topics/hot/partitions/0/records"
	if a := api.do(http.MethodPost, path, produceBody(-1, "first")); a.status != http.StatusOK {
		t.Fatalf("produce: %d %s", a.status, a.body)
	}
	for i := range limit {
		resp, closeBody := api.open(http.MethodGet, path+":follow?offset=0", nil)
		t.Cleanup(closeBody)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("follow %d: status %d", i, resp.StatusCode)
		}
	}
	if a := api.do(http.MethodPost, path, produceBody(-1, "second")); a.status != http.StatusOK {
		t.Fatalf("a produce with %d idle follows open: %d %s", limit, a.status, a.body)
	}
	if a := api.do(http.MethodGet, path+"?offset=0", nil); a.status != http.StatusOK {
		t.Fatalf("a fetch with %d idle follows open: %d %s", limit, a.status, a.body)
	}
}
