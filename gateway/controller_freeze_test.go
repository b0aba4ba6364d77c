package gateway

import (
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest"
)

// The active controller freezes (its connections stall, as under SIGSTOP):
// the gateway's controller calls answer within a bound, from the standby
// once it takes office. With every controller frozen they answer a JSON
// REQUEST_TIMED_OUT (504) when the call's deadline passes, and a frozen
// partition leader gets the same within the request timeout.
func TestGatewayFollowsTheStandbyWhileTheActiveControllerIsFrozen(t *testing.T) {
	tc := startClusterWith(t, clustertest.Options{PausableControllers: true})
	tc.CreateTopic("frozen", 1, 3, nil)
	const reqTimeout, retry = 2 * time.Second, 3 * time.Second
	g := startGateway(t, tc, func(o *Options) {
		o.Dialer = tc.Net.Dialer("gateway")
		o.RequestTimeout, o.RetryTimeout = reqTimeout, retry
	})
	api := newREST(t, g)
	bound := reqTimeout + retry + time.Second // the documented bound, and slack

	cluster := func() (*adminv1.DescribeClusterResponse, answer, time.Duration) {
		start := time.Now()
		a := api.do(http.MethodGet, "/v1/cluster", nil)
		took := time.Since(start)
		var d adminv1.DescribeClusterResponse
		if a.status == http.StatusOK {
			if err := protojson.Unmarshal(a.body, &d); err != nil {
				t.Fatalf("GET /v1/cluster: %s: %v", a.body, err)
			}
		}
		return &d, a, took
	}
	before, a, _ := cluster()
	if a.status != http.StatusOK {
		t.Fatalf("GET /v1/cluster: %d %s", a.status, a.body)
	}
	old := before.GetController().GetId()
	tc.PauseController(old)
	paused := []int32{old}
	defer func() {
		for _, id := range paused {
			tc.ResumeController(id)
		}
	}()

	now, a, took := cluster()
	t.Logf("GET /v1/cluster with controller %d frozen: %d after %v", old, a.status, took)
	if a.status != http.StatusOK || now.GetController().GetId() == old || now.GetController().GetId() <= 0 {
		t.Fatalf("GET /v1/cluster with controller %d frozen: %d %s after %v, want 200 from the new active controller", old, a.status, a.body, took)
	}
	if took > bound {
		t.Fatalf("GET /v1/cluster took %v with controller %d frozen, want at most %v", took, old, bound)
	}
	start := time.Now()
	var topics adminv1.DescribeTopicsResponse
	ta := api.do(http.MethodGet, "/v1/topics", nil)
	if ta.status != http.StatusOK || protojson.Unmarshal(ta.body, &topics) != nil || len(topics.GetTopics()) != 1 {
		t.Fatalf("GET /v1/topics with controller %d frozen: %d %s", old, ta.status, ta.body)
	}
	if took := time.Since(start); took > reqTimeout {
		t.Fatalf("GET /v1/topics took %v once the new controller answered, want it asked directly", took)
	}

	// A frozen partition leader: the produce answers 504 within the
	// request timeout (a retry elsewhere might write it twice).
	leader := tc.Partition("frozen", 0).GetLeader()
	if leader <= 0 {
		t.Fatalf("frozen-0 has no leader: %v", tc.Partition("frozen", 0))
	}
	if a := api.do(http.MethodPost, "/v1/topics/frozen/partitions/0/records", produceBody(1, "before")); a.status != http.StatusOK {
		t.Fatalf("produce: %d %s", a.status, a.body)
	}
	tc.Net.Pause(clustertest.BrokerName(leader))
	start = time.Now()
	pa := api.do(http.MethodPost, "/v1/topics/frozen/partitions/0/records", produceBody(1, "x"))
	took = time.Since(start)
	expectError(t, pa, "produce to a frozen leader", http.StatusGatewayTimeout, "REQUEST_TIMED_OUT")
	if took > reqTimeout+time.Second {
		t.Fatalf("produce to a frozen leader answered after %v, want about %v", took, reqTimeout)
	}
	tc.Net.Resume(clustertest.BrokerName(leader))

	// Every controller frozen: a JSON 504 once the deadline passes.
	next := now.GetController().GetId()
	tc.PauseController(next)
	paused = append(paused, next)
	_, a, took = cluster()
	t.Logf("GET /v1/cluster with every controller frozen: %d after %v", a.status, took)
	expectError(t, a, "GET /v1/cluster with every controller frozen", http.StatusGatewayTimeout, "REQUEST_TIMED_OUT")
	if took > bound {
		t.Fatalf("GET /v1/cluster took %v with every controller frozen, want at most %v", took, bound)
	}
}
