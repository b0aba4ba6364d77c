package gateway

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/clustertest"
)

// DeleteRecords over REST: the gateway takes it to the partition's leader,
// which answers with the low watermark once every replica's log start is
// there; the earliest offset is then that offset, and an offset past the
// HW is OFFSET_OUT_OF_RANGE.
func TestRESTDeleteRecords(t *testing.T) {
	tc := startCluster(t)
	g := startGateway(t, tc, nil)
	e := &env{tc: tc, g: g, r: newREST(t, g)}
	tc.CreateTopic("trim", 1, 3, nil)
	const path = "/v1/topics/trim/partitions/0"
	waitFor(t, 10*time.Second, "a leader of trim-0", func() bool {
		a := e.r.do(http.MethodGet, path+"/offsets?spec=OFFSET_SPEC_LATEST", nil)
		return a.status == http.StatusOK
	})
	var p brokerv1.ProduceResponse
	e.call(http.MethodPost, path+"/records", produceBody(-1, "a", "b", "c"), &p)
	e.r.fails(http.MethodPost, path+"/records:delete", `{"offset": 9}`, http.StatusBadRequest, "OFFSET_OUT_OF_RANGE")
	var d brokerv1.DeleteRecordsResponse
	e.call(http.MethodPost, path+"/records:delete", `{"offset": 2, "timeoutMs": 10000}`, &d)
	if d.GetLowWatermark() != 2 {
		t.Fatalf("delete records below 2: %v, want low watermark 2", &d)
	}
	var lo brokerv1.ListOffsetsResponse
	e.call(http.MethodGet, path+"/offsets?spec=OFFSET_SPEC_EARLIEST", nil, &lo)
	if lo.GetOffset() != 2 {
		t.Fatalf("earliest offset %d after deleting below 2", lo.GetOffset())
	}
}

// A records:delete that times out waiting for a follower that stopped
// fetching answers 504 REQUEST_TIMED_OUT with the low watermark reached in
// the error body, as Kafka's answer carries low_watermark beside the
// error code. The body had only the error: the caller could not tell how
// far the delete got.
func TestRESTDeleteRecordsTimeoutCarriesTheLowWatermark(t *testing.T) {
	tc := startCluster(t)
	g := startGateway(t, tc, func(o *Options) { o.RetryTimeout = time.Second })
	e := &env{tc: tc, g: g, r: newREST(t, g)}
	tc.CreateTopic("stalled", 1, 2, nil)
	const path = "/v1/topics/stalled/partitions/0"
	waitFor(t, 10*time.Second, "a leader of stalled-0", func() bool {
		return e.r.do(http.MethodGet, path+"/offsets?spec=OFFSET_SPEC_LATEST", nil).status == http.StatusOK
	})
	for i := range 10 {
		e.call(http.MethodPost, path+"/records", produceBody(-1, fmt.Sprintf("r%d", i)), &brokerv1.ProduceResponse{})
	}
	var d brokerv1.DeleteRecordsResponse
	e.call(http.MethodPost, path+"/records:delete", `{"offset": 4, "timeoutMs": 10000}`, &d)
	if d.GetLowWatermark() != 4 {
		t.Fatalf("delete records below 4: %v, want low watermark 4", &d)
	}

	p := tc.Partition("stalled", 0)
	follower := p.GetReplicas()[0]
	if follower == p.GetLeader() {
		follower = p.GetReplicas()[1]
	}
	tc.Net.Pause(clustertest.BrokerName(follower))
	defer tc.Net.Resume(clustertest.BrokerName(follower))
	body := e.r.fails(http.MethodPost, path+"/records:delete", `{"offset": 8, "timeoutMs": 1000}`,
		http.StatusGatewayTimeout, "REQUEST_TIMED_OUT")
	if body.LowWatermark == nil || *body.LowWatermark != 4 {
		t.Fatalf("REQUEST_TIMED_OUT body with broker %d stalled: %+v, want lowWatermark 4", follower, body)
	}
}
