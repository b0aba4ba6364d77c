package gateway

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
)

const ordersPath = "/v1/topics/orders/partitions/0"

func testDescribeCluster(t *testing.T, e *env) {
	var c adminv1.DescribeClusterResponse
	e.call(http.MethodGet, "/v1/cluster", nil, &c)
	if c.GetController().GetId() < 1 || c.GetControllerEpoch() < 1 {
		t.Fatalf("no active controller: %v", &c)
	}
	alive := 0
	for _, b := range c.GetBrokers() {
		if b.GetAlive() && b.GetBrokerEpoch() > 0 {
			alive++
		}
	}
	active := 0
	for _, ci := range c.GetControllers() {
		if ci.GetActive() {
			active++
		}
	}
	if alive != 3 || len(c.GetControllers()) != 2 || active != 1 {
		t.Fatalf("want 3 live brokers and 2 controllers, one active: %v", &c)
	}
	var md brokerv1.MetadataResponse
	e.call(http.MethodGet, "/v1/metadata", nil, &md)
	if len(md.GetBrokers()) != 3 {
		t.Fatalf("metadata names %d brokers, want 3: %v", len(md.GetBrokers()), &md)
	}
}

func testCreateTopics(t *testing.T, e *env) {
	var resp adminv1.CreateTopicsResponse
	e.call(http.MethodPost, "/v1/topics", `{"topics": [
		{"name": "orders", "numPartitions": 1, "replicationFactor": 3, "configs": {"min.insync.replicas": "2"}},
		{"name": "small", "numPartitions": 1, "replicationFactor": 3, "configs": {"max.message.bytes": "1024"}}
	], "timeoutMs": 10000}`, &resp)
	for _, r := range resp.GetResults() {
		if r.GetErrorCode() != 0 || r.GetReplicationFactor() != 3 {
			t.Fatalf("create %s: %v", r.GetName(), r)
		}
	}
	e.r.fails(http.MethodPost, "/v1/topics", `{"topics": [{"name": "orders", "numPartitions": 1}]}`,
		http.StatusConflict, "TOPIC_ALREADY_EXISTS")
	// The proto field names work as well as the JSON ones.
	e.r.fails(http.MethodPost, "/v1/topics", `{"topics": [{"name": "bad", "num_partitions": 1, "replication_factor": 9}]}`,
		http.StatusBadRequest, "INVALID_REPLICATION_FACTOR")
	waitFor(t, 10*time.Second, "orders in every broker's metadata", func() bool {
		for range 3 {
			var md brokerv1.MetadataResponse
			e.call(http.MethodGet, "/v1/metadata?topics=orders&topics=small", nil, &md)
			for _, tm := range md.GetTopics() {
				if tm.GetErrorCode() != 0 || tm.GetPartitions()[0].GetLeader() < 0 {
					return false
				}
			}
		}
		return true
	})
}

// produceBody is a produce request of structured records with the given values.
func produceBody(acks int, values ...string) string {
	recs := make([]map[string]any, len(values))
	for i, v := range values {
		recs[i] = map[string]any{"key": b64("k"), "value": b64(v), "headers": []any{map[string]any{"key": "src", "value": b64("rest")}}}
	}
	b, _ := json.Marshal(map[string]any{"acks": acks, "timeoutMs": 10000, "records": map[string]any{"records": recs}})
	return string(b)
}

// fetchValues reads the partition from offset 0 and returns its values.
func fetchValues(t testing.TB, e *env, path string) []string {
	t.Helper()
	var f brokerv1.FetchResponse
	e.call(http.MethodGet, path+"/records?offset=0&maxWaitMs=100", nil, &f)
	var out []string
	for i, r := range f.GetRecords() {
		if r.GetOffset() != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.GetOffset())
		}
		out = append(out, string(r.GetValue()))
	}
	return out
}

func testProduceFetch(t *testing.T, e *env) {
	var p brokerv1.ProduceResponse
	e.call(http.MethodPost, ordersPath+"/records", produceBody(-1, "one", "two"), &p)
	if p.GetBaseOffset() != 0 || p.GetLastOffset() != 1 {
		t.Fatalf("produce: %v, want offsets 0..1", &p)
	}
	var f brokerv1.FetchResponse
	e.call(http.MethodGet, ordersPath+"/records?offset=0", nil, &f)
	if f.GetHighWatermark() != 2 || f.GetNextOffset() != 2 || len(f.GetRecords()) != 2 {
		t.Fatalf("fetch: %v", &f)
	}
	r := f.GetRecords()[1]
	if string(r.GetKey()) != "k" || string(r.GetValue()) != "two" || len(r.GetHeaders()) != 1 ||
		string(r.GetHeaders()[0].GetValue()) != "rest" || r.GetTimestamp() == 0 {
		t.Fatalf("second record: %v", r)
	}
	for spec, want := range map[string]int64{"OFFSET_SPEC_EARLIEST": 0, "OFFSET_SPEC_LATEST": 2} {
		var lo brokerv1.ListOffsetsResponse
		e.call(http.MethodGet, ordersPath+"/offsets?spec="+spec, nil, &lo)
		if lo.GetOffset() != want {
			t.Fatalf("list offsets %s: %v, want %d", spec, &lo, want)
		}
	}
	// The first record carrying the largest timestamp.
	want := f.GetRecords()[0]
	for _, r := range f.GetRecords() {
		if r.GetTimestamp() > want.GetTimestamp() {
			want = r
		}
	}
	var lo brokerv1.ListOffsetsResponse
	e.call(http.MethodGet, ordersPath+"/offsets?spec=OFFSET_SPEC_MAX_TIMESTAMP", nil, &lo)
	if lo.GetOffset() != want.GetOffset() || lo.GetTimestamp() != want.GetTimestamp() {
		t.Fatalf("list offsets OFFSET_SPEC_MAX_TIMESTAMP: %v, want offset %d timestamp %d", &lo, want.GetOffset(), want.GetTimestamp())
	}
	// acks=0 answers at once, without offsets.
	e.call(http.MethodPost, ordersPath+"/records", produceBody(0, "three"), &p)
	if p.GetBaseOffset() != -1 {
		t.Fatalf("acks=0 produce: %v", &p)
	}
	waitFor(t, 5*time.Second, "the acks=0 record", func() bool { return len(fetchValues(t, e, ordersPath)) == 3 })
}

// testIdempotentRetry sends the same idempotent batch twice, as a retry
// after a lost answer would: the second is a duplicate, written once.
func testIdempotentRetry(t *testing.T, e *env) {
	var id brokerv1.InitProducerIdResponse
	e.call(http.MethodPost, "/v1/producer-ids", `{"producerId": -1}`, &id)
	if id.GetProducerId() < 1 {
		t.Fatalf("producer id: %v", &id)
	}
	body := fmt.Sprintf(`{"acks": -1, "producerId": %d, "producerEpoch": %d, "baseSequence": 0,
		"records": {"records": [{"value": %q}]}}`, id.GetProducerId(), id.GetProducerEpoch(), b64("once"))
	var first, again brokerv1.ProduceResponse
	e.call(http.MethodPost, ordersPath+"/records", body, &first)
	e.call(http.MethodPost, ordersPath+"/records", body, &again)
	if first.GetDuplicate() || !again.GetDuplicate() || again.GetBaseOffset() != first.GetBaseOffset() {
		t.Fatalf("first %v, retry %v: want the retry to be a duplicate at the same offset", &first, &again)
	}
}

// testStreams reads the first line of each server stream: newline-delimited
// JSON, each line {"result": ...}.
func testStreams(t *testing.T, e *env) {
	var f brokerv1.FollowResponse
	firstLine(t, e.r, ordersPath+"/records:follow?offset=1", &f)
	if recs := f.GetFetch().GetRecords(); len(recs) == 0 || recs[0].GetOffset() != 1 || string(recs[0].GetValue()) != "two" {
		t.Fatalf("follow from offset 1: %v", &f)
	}
	// From the log end of a quiet partition the first line comes at once:
	// no records, where the log stands.
	end := f.GetFetch().GetHighWatermark()
	var quiet brokerv1.FollowResponse
	firstLine(t, e.r, fmt.Sprintf("%s/records:follow?offset=%d", ordersPath, end), &quiet)
	if q := quiet.GetFetch(); len(q.GetRecords()) != 0 || q.GetNextOffset() != end || q.GetHighWatermark() != end {
		t.Fatalf("follow from the log end %d: %v", end, &quiet)
	}
	var w adminv1.WatchClusterResponse
	firstLine(t, e.r, "/v1/cluster:watch?topics=orders&intervalMs=200", &w)
	if len(w.GetCluster().GetBrokers()) != 3 || len(w.GetPartitions()) != 1 || w.GetPartitions()[0].GetTopic() != "orders" {
		t.Fatalf("watch snapshot: %v", &w)
	}
	// Errors before the first answer are ordinary REST errors.
	e.r.fails(http.MethodGet, "/v1/topics/nope/partitions/0/records:follow", nil, http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION")
	// A rack names a broker to read from that a REST caller cannot
	// choose: refused, where the read came back empty (the follow stream
	// ended with no error).
	e.r.fails(http.MethodGet, ordersPath+"/records:follow?offset=0&rackId=r1", nil, http.StatusBadRequest, "INVALID_REQUEST")
	e.r.fails(http.MethodGet, ordersPath+"/records?offset=0&rackId=r1", nil, http.StatusBadRequest, "INVALID_REQUEST")
}

// firstLine opens a stream, decodes the result of its first line into out,
// and closes it.
func firstLine(t *testing.T, api *rest, path string, out proto.Message) {
	t.Helper()
	resp, closeBody := api.open(http.MethodGet, path, nil)
	defer closeBody()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	if !sc.Scan() {
		t.Fatalf("GET %s: no line: %v", path, sc.Err())
	}
	var line struct {
		Result json.RawMessage `json:"result"`
		Error  *errorBody      `json:"error"`
	}
	if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Error != nil {
		t.Fatalf("GET %s: line %s: %v", path, sc.Bytes(), err)
	}
	if err := protojson.Unmarshal(line.Result, out); err != nil {
		t.Fatalf("GET %s: result %s: %v", path, line.Result, err)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
