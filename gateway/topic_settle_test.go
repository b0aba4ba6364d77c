package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/config"
)

// A record sent over REST to a topic created a moment ago is written even
// when the broker the gateway asks about the topic has not yet had the
// controller's UpdateMetadata for it (here broker 1, which hosts no replica
// and hears of the topic 1 s late), rather than answered 404.
func TestRESTProduceRightAfterCreateWaitsForTheBrokersMetadata(t *testing.T) {
	tc := startCluster(t)
	g := startGateway(t, tc, func(o *Options) { o.Brokers = config.StringList{tc.BrokerConfig(1).Listen} })
	api := newREST(t, g)
	ctrl, _ := tc.ActiveController()
	tc.Net.Delay(clustertest.ControllerName(ctrl), clustertest.BrokerName(1), time.Second)
	defer tc.Net.Delay(clustertest.ControllerName(ctrl), clustertest.BrokerName(1), 0)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := tc.Admin().CreateTopics(ctx, &adminv1.CreateTopicsRequest{TimeoutMs: 10000, Topics: []*adminv1.TopicSpec{{
		Name: "fresh", Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: []int32{2, 3}}}}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v %v", err, resp)
	}
	if a := api.do(http.MethodPost, "/v1/topics/fresh/partitions/0/records", produceBody(-1, "one")); a.status != http.StatusOK {
		t.Fatalf("produce right after the create: %d %s", a.status, a.body)
	}
	if a := api.do(http.MethodPost, "/v1/topics/ghost/partitions/0/records", produceBody(-1, "one")); a.status != http.StatusNotFound {
		t.Fatalf("produce to a topic that does not exist: %d %s, want 404", a.status, a.body)
	}
}
