package gateway

import (
	"maps"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/config"
)

// The gateway idle while the one broker it was started with restarts on
// another port: the calls that may go to any broker (a group's coordinator
// lookup, a producer id) find the brokers the metadata names, as the
// partition calls do. Sent to the --brokers addresses only, they answered
// 503 NETWORK_EXCEPTION for as long as the gateway ran, while produce and
// fetch worked.
func TestAnyBrokerCallsFindTheBrokersAfterTheBootstrapBrokerMoved(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("quiet", 1, 3, nil)
	g := startGateway(t, tc, func(o *Options) {
		o.Brokers = config.StringList{tc.BrokerConfig(1).Listen}
		o.RequestTimeout, o.RetryTimeout = 2*time.Second, 3*time.Second
	})
	api := newREST(t, g)
	const records = "/v1/topics/quiet/partitions/0/records"
	// Before: every kind of call works, and the metadata knows every broker.
	api.ok(http.MethodPost, records, produceBody(-1, "before"), nil)
	succeedsSoon(t, api, http.MethodGet, "/v1/groups/quiet-app/coordinator", "")
	api.ok(http.MethodPost, "/v1/producer-ids", `{}`, nil)

	tc.CrashBroker(1)
	tc.MoveBroker(1)
	tc.StartBroker(1)
	tc.WaitBrokerAlive(1)

	for _, call := range []struct{ method, path, body string }{
		{http.MethodPost, records, produceBody(-1, "after")},
		{http.MethodGet, "/v1/groups/quiet-app/coordinator", ""},
		{http.MethodPost, "/v1/producer-ids", `{}`},
		{http.MethodGet, "/v1/groups/quiet-app/offsets", ""},
	} {
		succeedsSoon(t, api, call.method, call.path, call.body)
	}
}

// succeedsSoon wants a call answered 200 within a few tries: a first
// answer may be a retriable error, never one that lasts.
func succeedsSoon(t *testing.T, api *rest, method, path, body string) {
	t.Helper()
	var a answer
	for range 5 {
		var b any
		if body != "" {
			b = body
		}
		if a = api.do(method, path, b); a.status == http.StatusOK {
			return
		}
		t.Logf("%s %s: %d %s", method, path, a.status, a.body)
		time.Sleep(time.Second)
	}
	t.Fatalf("%s %s: still %d %s", method, path, a.status, a.body)
}

// Idle follows and watches whose callers go away while nothing flows are
// released: their goroutines and upstream streams end, on the gateway's
// side and the brokers' and controllers', and the slots they held are
// given back.
func TestAbandonedIdleStreamsAreReleased(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("idle", 1, 3, nil)
	g := startGateway(t, tc, func(o *Options) { o.MaxStreamsPerUser = 40 })
	api := newREST(t, g)
	api.ok(http.MethodPost, "/v1/topics/idle/partitions/0/records", produceBody(-1, "only"), nil)
	// Warm every connection the streams use before counting.
	_, closeWarm := api.open(http.MethodGet, "/v1/topics/idle/partitions/0/records:follow?offset=1", nil)
	closeWarm()
	waitFor(t, time.Minute, "the warming stream released", func() bool { return streamGoroutines().total() == 0 })
	before := goroutinesByStart()
	const streams = 20
	for round := range 2 {
		var closers []func()
		for i := range streams {
			path := "/v1/topics/idle/partitions/0/records:follow?offset=1"
			if i%4 == 0 {
				path = "/v1/cluster:watch"
			}
			resp, closeBody := api.open(http.MethodGet, path, nil)
			closers = append(closers, closeBody)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("round %d stream %d: status %d", round, i, resp.StatusCode)
			}
		}
		open := streamGoroutines()
		t.Logf("round %d: %v with %d streams open", round, open, streams)
		follows, watches := 3*streams/4, streams/4
		want := streamSides{"gateway handler": streams, "gateway watch reader": watches,
			"broker Follow": follows, "controller WatchCluster": watches}
		if !maps.Equal(open, want) {
			t.Fatalf("round %d: %v serving %d follows and %d watches, want %v", round, open, follows, watches, want)
		}
		if n := g.streams.openCount(); n != streams {
			t.Fatalf("round %d: %v stream slots taken, want %d", round, n, streams)
		}
		for _, c := range closers {
			c()
		}
		// Released means: no goroutine serves a stream anywhere and every
		// slot is back. The wait is long: a loaded machine may be slow,
		// what is checked is that everything is released, not how soon.
		waitFor(t, time.Minute, "the abandoned streams released", func() bool {
			return streamGoroutines().total() == 0 && g.streams.openCount() == 0
		})
	}
	// And nothing they started stays behind: a leak of one goroutine per
	// stream, whatever it runs, shows as a start site with at least one
	// more goroutine per watch (the fewer kind) than before. Other start
	// sites come and go with the idle cluster's own work, a few at a time.
	var grown map[string]int
	waitFor(t, time.Minute, "no start site grown by one goroutine per stream", func() bool {
		now := goroutinesByStart().grownSince(before, 2*streams/4)
		if len(now) > 0 && !maps.Equal(now, grown) {
			t.Logf("grown since before the streams: %v", now)
		}
		grown = now
		return len(grown) == 0
	})
}

// The goroutines a REST stream holds for as long as it is open, all in
// this process: the gateway's handler forwarding it (and, for a watch, the
// one reading the controller's stream into it), the broker's Follow and
// the controller's WatchCluster.
var streamHolders = []struct{ side, frame string }{
	{"gateway handler", "github.com/grpc-ecosystem/grpc-gateway/v2/runtime.ForwardResponseStream("},
	{"gateway watch reader", "tidemark.io/gateway.watch.func1("},
	{"broker Follow", "tidemark.io/services/broker/internal/grpcapi.(*Broker).Follow("},
	{"controller WatchCluster", "tidemark.io/services/controller/internal/grpcapi.(*AdminServer).WatchCluster("},
}

// streamSides counts the goroutines serving REST streams, by side.
type streamSides map[string]int

func (s streamSides) total() int {
	n := 0
	for _, c := range s {
		n += c
	}
	return n
}

// streamGoroutines reads every goroutine's stack for the functions that
// serve a stream for as long as it is open.
func streamGoroutines() streamSides {
	sides := streamSides{}
	for _, g := range goroutineStacks() {
		for _, h := range streamHolders {
			if strings.Contains(g, h.frame) {
				sides[h.side]++
				break
			}
		}
	}
	return sides
}

// startSites counts goroutines by the function that started them.
type startSites map[string]int

func goroutinesByStart() startSites {
	sites := startSites{}
	for _, g := range goroutineStacks() {
		site := "main"
		if i := strings.LastIndex(g, "\ncreated by "); i >= 0 {
			site, _, _ = strings.Cut(g[i+len("\ncreated by "):], " in goroutine")
			site, _, _ = strings.Cut(site, "\n")
		}
		sites[site]++
	}
	return sites
}

// grownSince names the start sites with at least by more goroutines than
// in before.
func (s startSites) grownSince(before startSites, by int) map[string]int {
	grown := map[string]int{}
	for site, n := range s {
		if n-before[site] >= by {
			grown[site] = n - before[site]
		}
	}
	return grown
}

func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// The gateway idle while a partition's leader freezes (as under SIGSTOP)
// and the controller elects another: the first call may time out on the
// frozen broker (504), the next ones reach the new leader. The gateway
// never looked the leader up again after a timeout, and answered 504 for
// as long as its metadata was young enough to trust (metadata.max.age).
func TestRESTCallsLeaveALeaderFrozenWhileIdle(t *testing.T) {
	tc := startClusterWith(t, clustertest.Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	tc.CreateTopic("stalled", 1, 3, nil)
	api := newREST(t, startGateway(t, tc, func(o *Options) {
		o.Dialer = tc.Net.Dialer("gateway")
		o.RequestTimeout, o.RetryTimeout = 2*time.Second, 3*time.Second
	}))
	const records = "/v1/topics/stalled/partitions/0/records"
	api.ok(http.MethodPost, records, produceBody(1, "before"), nil)
	victim := tc.Partition("stalled", 0).GetLeader()
	tc.EtcdLink(victim).Pause()
	tc.Net.Pause(clustertest.BrokerName(victim))
	defer func() {
		tc.Net.Resume(clustertest.BrokerName(victim))
		tc.EtcdLink(victim).Resume()
	}()
	waitFor(t, 4*tc.BrokerConfig(victim).SessionTimeout, "another leader elected", func() bool {
		l := tc.Partition("stalled", 0).GetLeader()
		return l > 0 && l != victim
	})
	succeedsSoon(t, api, http.MethodPost, records, produceBody(1, "after"))
	succeedsSoon(t, api, http.MethodGet, records+"?offset=0&maxWaitMs=100", "")
}

// A follow that has waited longer than the retry budget for its next
// record when its leader dies reopens on the new leader: the budget bounds
// the retries, not the quiet wait before them. The wait was counted, and a
// follow idle for more than the budget ended with the leader's death.
func TestAFollowIdleLongerThanTheRetryBudgetOutlivesItsLeader(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("lull", 1, 3, nil)
	// Longer than the broker's session (2 s), so that a new leader is
	// elected within it.
	const budget = 5 * time.Second
	api := newREST(t, startGateway(t, tc, func(o *Options) { o.RequestTimeout, o.RetryTimeout = 2*time.Second, budget }))
	const records = "/v1/topics/lull/partitions/0/records"
	api.ok(http.MethodPost, records, produceBody(-1, "before"), nil)
	follow := followAsync(api, records+":follow?offset=1")
	time.Sleep(budget + time.Second) // nothing flows; the broker's keep-alive is 15 s away
	tc.CrashBroker(tc.Partition("lull", 0).GetLeader())
	succeedsSoon(t, api, http.MethodPost, records, produceBody(-1, "after"))
	select {
	case f := <-follow:
		if recs := f.resp.GetFetch().GetRecords(); f.err != nil || len(recs) == 0 || string(recs[0].GetValue()) != "after" {
			t.Fatalf("the follow across the leader's death: %v %v", f.resp, f.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the follow got nothing after its leader died")
	}
}

// Everything the gateway talks to changes while it is idle: the active
// controller is killed, etcd restarts, and every broker comes back on
// another port, one after the other. The first call of each kind then
// succeeds within a few tries, and a follow held open across it all
// delivers the next record. No broker address the gateway had was right
// any more, and every broker call answered 503 NETWORK_EXCEPTION for as
// long as the gateway ran; the brokers are now found through the
// controller (Options.DiscoverBrokers).
func TestEveryCallWorksAfterTheClusterChangedUnderAnIdleGateway(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("calm", 1, 3, nil)
	api := newREST(t, startGateway(t, tc, func(o *Options) { o.RequestTimeout, o.RetryTimeout = 2*time.Second, 5*time.Second }))
	const records = "/v1/topics/calm/partitions/0/records"
	calls := []struct{ method, path, body string }{
		{http.MethodGet, "/v1/cluster", ""},
		{http.MethodPost, "/v1/acls:describe", `{"filter": {}}`},
		{http.MethodPost, records, produceBody(-1, "x")},
		{http.MethodGet, records + "?offset=0&maxWaitMs=100", ""},
		{http.MethodGet, "/v1/metadata", ""},
		{http.MethodPost, "/v1/producer-ids", `{}`},
		{http.MethodGet, "/v1/groups/calm-app/coordinator", ""},
		{http.MethodPost, "/v1/groups/calm-app/offsets", `{"generationId": -1, "topics": [{"name": "calm",
			"partitions": [{"partition": 0, "committedOffset": 1, "committedLeaderEpoch": -1}]}]}`},
		{http.MethodGet, "/v1/groups", ""},
	}
	for _, c := range calls {
		succeedsSoon(t, api, c.method, c.path, c.body)
	}
	follow := followAsync(api, records+":follow?offset=1")

	active, _ := tc.ActiveController()
	tc.StopController(active)
	tc.Etcd.Restart(t, 2*time.Second)
	for id := int32(1); id <= 3; id++ {
		tc.CrashBroker(id)
		tc.MoveBroker(id)
		tc.StartBroker(id)
		tc.WaitBrokerAlive(id)
	}

	for _, c := range calls {
		succeedsSoon(t, api, c.method, c.path, c.body)
	}
	succeedsSoon(t, api, http.MethodPost, "/v1/topics",
		`{"topics": [{"name": "fresh", "numPartitions": 1, "replicationFactor": 3}], "timeoutMs": 10000}`)
	select {
	case f := <-follow:
		if recs := f.resp.GetFetch().GetRecords(); f.err != nil || len(recs) == 0 || string(recs[0].GetValue()) != "x" {
			t.Fatalf("the follow across the changes: %v %v", f.resp, f.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follow got nothing after the changes")
	}
}

// A follow opened while its partition's leader is frozen (its connections
// stall; it keeps its lease, so it stays leader) answers an ordinary REST
// error, 504 REQUEST_TIMED_OUT, within its retry budget plus a request
// timeout, as a fetch does; once the leader runs again a follow works. The
// stream's opening waited for the connection's keepalive or connect
// timeout (over 20 s here) and then answered 503.
func TestAFollowOnAFrozenLeaderAnswersAnError(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("numb", 1, 3, nil)
	api := newREST(t, startGateway(t, tc, func(o *Options) {
		o.Dialer = tc.Net.Dialer("gateway")
		o.RequestTimeout, o.RetryTimeout = 2*time.Second, 3*time.Second
	}))
	api.hc.Timeout = 15 * time.Second // three times the documented bound
	const follow = "/v1/topics/numb/partitions/0/records:follow?offset=0"
	api.ok(http.MethodPost, "/v1/topics/numb/partitions/0/records", produceBody(1, "x"), nil)
	resp, closeBody := api.open(http.MethodGet, follow, nil) // the follows' connection, then idle
	closeBody()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	leader := clustertest.BrokerName(tc.Partition("numb", 0).GetLeader())
	tc.Net.Pause(leader)
	api.fails(http.MethodGet, follow, nil, http.StatusGatewayTimeout, "REQUEST_TIMED_OUT")
	tc.Net.Resume(leader)
	waitFor(t, 20*time.Second, "a follow once the leader runs again", func() bool {
		resp, closeBody := api.open(http.MethodGet, follow, nil)
		defer closeBody()
		return resp.StatusCode == http.StatusOK
	})
}

// A broker frozen (its connections stall) while its registration lives on,
// so the metadata still lists it: the calls any broker may answer (a
// group's coordinator lookup, a producer id) all succeed, the one that
// meets the frozen broker moving on to another once its request timeout
// runs out, and the frozen broker is then asked last. They went to it as
// often as to any other broker, and each such call answered 504
// REQUEST_TIMED_OUT after a whole request timeout.
func TestAnyBrokerCallsAskAFrozenBrokerLast(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("quiet", 1, 3, nil)
	g := startGateway(t, tc, func(o *Options) {
		o.Dialer = tc.Net.Dialer("gateway")
		o.RequestTimeout, o.RetryTimeout = 2*time.Second, 3*time.Second
	})
	api := newREST(t, g)
	succeedsSoon(t, api, http.MethodGet, "/v1/groups/quiet-app/coordinator", "")
	api.ok(http.MethodPost, "/v1/producer-ids", `{}`, nil)

	// Broker 1 is first in --brokers, which is the order until a metadata
	// answer names the brokers (then they are shuffled).
	const frozen = 1
	frozenAddr := tc.BrokerConfig(frozen).Listen
	if !slices.Contains(g.client.AnyBrokerAddrs(), frozenAddr) {
		t.Fatalf("broker %d (%s) is not among the gateway's brokers %v", frozen, frozenAddr, g.client.AnyBrokerAddrs())
	}
	tc.Net.Pause(clustertest.BrokerName(frozen))
	defer tc.Net.Resume(clustertest.BrokerName(frozen))

	for i := range 8 {
		for _, call := range []struct{ method, path, body string }{
			{http.MethodGet, "/v1/groups/quiet-app/coordinator", ""},
			{http.MethodPost, "/v1/producer-ids", `{}`},
		} {
			var body any
			if call.body != "" {
				body = call.body
			}
			if a := api.do(call.method, call.path, body); a.status != http.StatusOK {
				t.Fatalf("%s %s (%d) with broker %d frozen: %d %s", call.method, call.path, i, frozen, a.status, a.body)
			}
		}
	}
	addrs := g.client.AnyBrokerAddrs()
	if len(addrs) < 2 || addrs[len(addrs)-1] != frozenAddr {
		t.Fatalf("any-broker order with broker %d (%s) frozen: %v, want it last", frozen, frozenAddr, addrs)
	}
}
