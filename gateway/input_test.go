package gateway

import (
	"errors"
	"io"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

func TestDecodeBodyNamesTheBadField(t *testing.T) {
	cases := []struct {
		msg   proto.Message
		body  string
		field string
		why   string
	}{
		{&brokerv1.ProduceRequest{}, `{"acks": "all"}`, "acks", "int32"},
		{&brokerv1.ProduceRequest{}, `{"timeout_ms": 1.5}`, "timeout_ms", "int32"},
		{&brokerv1.ProduceRequest{}, `{"acks": 1, "recods": {}}`, "recods", "unknown field"},
		{&brokerv1.ProduceRequest{}, `{"records": {"records": [{}, {"key": "%%%"}]}}`, "records.records[1].key", "bytes"},
		{&brokerv1.ProduceRequest{}, `{"records": {"records": [{}, 7]}}`, "records.records[1]", "object"},
		{&brokerv1.ProduceRequest{}, `{"records": {"records": [{"headers": [{"key": 1}]}]}}`, "records.records[0].headers[0].key", "string"},
		{&brokerv1.ProduceRequest{}, `{"recordBatch": "eA==", "records": {}}`, "records", "oneof"},
		{&brokerv1.ProduceRequest{}, `{"acks": 1, "acks": 1}`, "acks", "duplicate"},
		{&brokerv1.MetadataRequest{}, `{"topics": ["a", 2]}`, "topics[1]", "string"},
		{&adminv1.CreateTopicsRequest{}, `{"topics": [{"name": "t", "configs": {"a": 1}}]}`, "topics[0].configs", "string"},
		{&adminv1.ElectLeadersRequest{}, `{"electionType": "SOMETIMES"}`, "electionType", "enum"},
		{&adminv1.CreateTopicsRequest{}, `"topics"`, "body", "object"},
		// An unknown field's error says which fields the body takes: a
		// topic's fields at the top level are a wrapper forgotten.
		{&adminv1.CreateTopicsRequest{}, `{"name": "t", "numPartitions": 1}`, "name", "unknown field; the fields here are topics, validateOnly, timeoutMs"},
	}
	m := newJSONMarshaler()
	for _, c := range cases {
		err := m.NewDecoder(strings.NewReader(c.body)).Decode(c.msg)
		var ie *inputError
		if !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an inputError", c.body, err)
			continue
		}
		if ie.field != c.field || !strings.Contains(ie.msg, c.why) {
			t.Errorf("%s: field %q (%s); want %q mentioning %q", c.body, ie.field, ie.msg, c.field, c.why)
		}
		// What the REST caller sees once the generated handler has turned
		// the error into a status by its text.
		ke := restError(status.Errorf(codes.InvalidArgument, "%v", err))
		if ke.Code != kerr.InvalidRequest || ke.Field != c.field {
			t.Errorf("%s: rendered as %v field %q", c.body, ke, ke.Field)
		}
	}
}

func TestDecodeBody(t *testing.T) {
	m := newJSONMarshaler()
	var req brokerv1.ProduceRequest
	if err := m.NewDecoder(strings.NewReader(" \n")).Decode(&req); err != io.EOF {
		t.Fatalf("empty body: %v, want io.EOF (the empty request)", err)
	}
	if err := m.NewDecoder(strings.NewReader(`{"acks": -1, "timeout_ms": 5}`)).Decode(&req); err != nil || req.GetTimeoutMs() != 5 {
		t.Fatalf("valid body: %v %v", err, &req)
	}
	err := m.NewDecoder(strings.NewReader(`{"acks": -1} trailing`)).Decode(&req)
	var ie *inputError
	if !errors.As(err, &ie) || ie.field != "" || !strings.Contains(ie.msg, "not valid JSON") {
		t.Fatalf("trailing garbage: %v", err)
	}
}

func TestQueryParser(t *testing.T) {
	filter := utilities.NewDoubleArray([][]string{{"topic"}, {"partition"}})
	parse := func(q string) (*brokerv1.FetchRequest, error) {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		req := &brokerv1.FetchRequest{}
		return req, queryParser{}.Parse(req, v, filter)
	}
	req, err := parse("offset=5&max_bytes=10&maxWaitMs=20&raw_batches=true&rackId=r1")
	if err != nil || req.GetOffset() != 5 || req.GetMaxBytes() != 10 || req.GetMaxWaitMs() != 20 || !req.GetRawBatches() || req.GetRackId() != "r1" {
		t.Fatalf("%v %v", req, err)
	}
	for q, field := range map[string]string{
		"topic=x":                        "topic", // the path gives it: grpc-gateway would ignore it
		"offset=x":                       "offset",
		"offest=5":                       "offest",
		"maxBytes=1&max_bytes=2":         "max_bytes",
		"raw_batches=perhaps":            "raw_batches",
		"offset=1&maxWaitMs=99999999999": "maxWaitMs",
	} {
		_, err := parse(q)
		var ie *inputError
		if !errors.As(err, &ie) || ie.field != field {
			t.Errorf("%s: %v, want an error naming %s", q, err, field)
		}
	}
}

func TestInputErrorOfGeneratedText(t *testing.T) {
	for text, field := range map[string]string{
		`type mismatch, parameter: partition, error: strconv.ParseInt: parsing "x": invalid syntax`: "partition",
		`missing parameter topic`:                     "topic",
		`invalid field "records[0].value": bad bytes`: "records[0].value",
		`invalid field "we\"ird": unknown field`:      `we"ird`,
		`something else`:                              "",
	} {
		e := inputErrorOf(text)
		if e.Code != kerr.InvalidRequest || e.Field != field {
			t.Errorf("%q: %v field %q, want %q", text, e, e.Field, field)
		}
	}
}

// A parameter that does not parse is named with what was sent and what it
// should be, not with Go's parse error: before, a caller read
// `offset: parsing field "offset": strconv.ParseInt: parsing "abc": invalid syntax`.
func TestParameterParseErrorsAreSaidPlainly(t *testing.T) {
	for text, want := range map[string]string{
		`type mismatch, parameter: partition, error: strconv.ParseInt: parsing "abc": invalid syntax`:                   `partition: "abc" is not a whole number`,
		`type mismatch, parameter: partition, error: strconv.ParseInt: parsing "99999999999": value out of range`:       `partition: "99999999999" is out of range`,
		`invalid field "offset": parsing field "offset": strconv.ParseInt: parsing "abc": invalid syntax`:               `offset: "abc" is not a whole number`,
		`invalid field "validateOnly": parsing field "validate_only": strconv.ParseBool: parsing "yes": invalid syntax`: `validateOnly: "yes" is not true or false`,
		`invalid field "spec": parsing field "spec": "bogus" is not a valid value`:                                      `spec: "bogus" is not a valid value`,
	} {
		if got := inputErrorOf(text).Message; got != want {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
	}
}

// A body of many tiny records is refused before it is decoded: 8 MiB of
// `{},` would become millions of messages. The refusal costs about the
// body's own size, not the decoded size.
func TestManyTinyRecordsAreRefusedBeforeDecoding(t *testing.T) {
	m := newJSONMarshaler()
	m.maxObjects = 200000
	var body strings.Builder
	body.WriteString(`{"records": {"records": [`)
	for i := 0; i < 2_500_000; i++ {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString("{}")
	}
	body.WriteString(`]}}`)
	data := body.String()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var req brokerv1.ProduceRequest
	err := m.NewDecoder(strings.NewReader(data)).Decode(&req)
	runtime.ReadMemStats(&after)
	var ie *inputError
	if !errors.As(err, &ie) || !strings.Contains(ie.msg, "--http.max.json.objects") || !strings.Contains(ie.msg, "200000") {
		t.Fatalf("2.5M records: %v, want a refusal naming --http.max.json.objects and its value", err)
	}
	if n := len(req.GetRecords().GetRecords()); n != 0 {
		t.Fatalf("%d records decoded before the refusal", n)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("body %d bytes; refusal allocated %d bytes", len(data), allocated)
	// Reading the body whole costs about twice its size (the buffer
	// grows); decoding it would cost some 40 times (2.5 million messages).
	if allocated > 10*uint64(len(data)) {
		t.Fatalf("refusing a %d-byte body allocated %d bytes: decoded before counting?", len(data), allocated)
	}

	// Braces inside strings are not objects; under the bound it decodes.
	if n := countContainers([]byte(`{"a": "{[{[\"}", "b": [1, {}]}`), 0); n != 3 {
		t.Fatalf("countContainers = %d, want 3 (braces in strings do not count)", n)
	}
	ok := `{"records": {"records": [{"value": "e30="}, {"key": "W10="}]}}`
	if err := m.NewDecoder(strings.NewReader(ok)).Decode(&req); err != nil || len(req.GetRecords().GetRecords()) != 2 {
		t.Fatalf("two records: %v %v", err, &req)
	}
}
