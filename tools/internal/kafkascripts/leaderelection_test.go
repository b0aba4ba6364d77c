package kafkascripts

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker is a Kafka listener that answers ApiVersions and ElectLeaders
// with answer, and keeps the ElectLeaders requests it got.
type fakeBroker struct {
	ln     net.Listener
	answer func(*kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse

	mu  sync.Mutex
	got []*kmsg.ElectLeadersRequest
}

func startFakeBroker(t *testing.T, answer func(*kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBroker{ln: ln, answer: answer}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(conn)
		}
	}()
	return f
}

func (f *fakeBroker) requests() []*kmsg.ElectLeadersRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*kmsg.ElectLeadersRequest(nil), f.got...)
}

// serve reads request frames: size, then the header (key, version,
// correlation id, client id, and tagged fields when flexible), then the body.
func (f *fakeBroker) serve(conn net.Conn) {
	defer conn.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, frame); err != nil {
			return
		}
		key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
		corr := frame[4:8]
		clientLen := int16(binary.BigEndian.Uint16(frame[8:]))
		body := frame[10+max(int(clientLen), 0):]
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.IsFlexible() {
			body = body[1:] // no tagged fields in the header
		}
		if err := req.ReadFrom(body); err != nil {
			return
		}
		var resp kmsg.Response
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			av := r.ResponseKind().(*kmsg.ApiVersionsResponse)
			for _, k := range []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 3}, {ApiKey: 43, MaxVersion: 2}} {
				av.ApiKeys = append(av.ApiKeys, k)
			}
			resp = av
		case *kmsg.ElectLeadersRequest:
			f.mu.Lock()
			f.got = append(f.got, r)
			f.mu.Unlock()
			resp = f.answer(r)
		default:
			return
		}
		resp.SetVersion(version)
		out := append([]byte{0, 0, 0, 0}, corr...)
		if resp.IsFlexible() && key != int16(kmsg.ApiVersions) {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := conn.Write(out); err != nil {
			return
		}
	}
}

// answerWith answers every named partition with the code codes gives it.
func answerWith(codes map[string]int16) func(*kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	return func(req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
		resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode = codes[topicPartition{t.Topic, p}.String()]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}

func runElection(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = LeaderElection(args, &out, &errw)
	return code, out.String(), errw.String()
}

// The note's call: one partition, a preferred election, sent over the
// Kafka protocol to the bootstrap server, reported as Kafka's tool does.
func TestLeaderElectionOnePartitionPreferred(t *testing.T) {
	f := startFakeBroker(t, answerWith(nil))
	code, out, errOut := runElection("--bootstrap-server", f.ln.Addr().String(), "--election-type", "preferred", "--topic", "orders", "--partition", "2")
	if code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if want := "Successfully completed leader election (PREFERRED) for partitions orders-2\n"; out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
	got := f.requests()
	if len(got) != 1 || got[0].ElectionType != 0 || len(got[0].Topics) != 1 ||
		got[0].Topics[0].Topic != "orders" || len(got[0].Topics[0].Partitions) != 1 || got[0].Topics[0].Partitions[0] != 2 {
		t.Fatalf("requests %+v, want one preferred election for orders-2", got)
	}
}

// An unreachable first bootstrap server is skipped; the next one answers.
func TestLeaderElectionTriesTheNextBootstrapServer(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	f := startFakeBroker(t, answerWith(nil))
	code, out, errOut := runElection("--bootstrap-server", deadAddr+","+f.ln.Addr().String(), "--election-type", "PREFERRED", "--topic", "t", "--partition", "0")
	if code != 0 || !strings.Contains(out, "for partitions t-0") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Kafka's tool sorts the answers into elected, already in place (exit 0)
// and failed (one line each, exit 1).
func TestLeaderElectionReportsEachOutcome(t *testing.T) {
	f := startFakeBroker(t, answerWith(map[string]int16{
		"a-1": kerr.ElectionNotNeeded.Code,
		"b-0": kerr.EligibleLeadersNotAvailable.Code,
	}))
	file := filepath.Join(t.TempDir(), "election.json")
	if err := os.WriteFile(file, []byte(`{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 1}, {"topic": "b", "partition": 0}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runElection("--bootstrap-server", f.ln.Addr().String(), "--election-type", "unclean", "--path-to-json-file", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (b-0 failed); stdout %q", code, out)
	}
	for _, want := range []string{
		"Successfully completed leader election (UNCLEAN) for partitions a-0\n",
		"Valid replica already elected for partitions a-1\n",
		"Error completing leader election (UNCLEAN) for partition: b-0: ELIGIBLE_LEADERS_NOT_AVAILABLE",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout %q lacks %q", out, want)
		}
	}
	if !strings.Contains(errOut, "1 replica(s) could not be elected") {
		t.Errorf("stderr %q", errOut)
	}
	if got := f.requests(); len(got) != 1 || got[0].ElectionType != 1 || len(got[0].Topics) != 2 {
		t.Fatalf("requests %+v, want one unclean election over topics a and b", got)
	}
}

// --all-topic-partitions sends no topic list (null: every partition).
func TestLeaderElectionAllPartitionsSendsNoTopics(t *testing.T) {
	f := startFakeBroker(t, answerWith(nil))
	code, _, errOut := runElection("--bootstrap-server", f.ln.Addr().String(), "--election-type", "preferred", "--all-topic-partitions")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := f.requests(); len(got) != 1 || got[0].Topics != nil {
		t.Fatalf("requests %+v, want one with a null topic list", got)
	}
}

// Kafka's validation: the required options, exactly one way of naming
// partitions, --partition only with --topic.
func TestLeaderElectionRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--election-type", "preferred", "--all-topic-partitions"}, "Missing required option(s): bootstrap-server"},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "random", "--all-topic-partitions"}, "illegal value [random]"},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "preferred"}, "One and only one of the following options is required"},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "preferred", "--topic", "t", "--all-topic-partitions"}, "One and only one"},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "preferred", "--topic", "t"}, "Missing required option(s): partition"},
		{[]string{"--bootstrap-server", "x:1", "--election-type", "preferred", "--all-topic-partitions", "--partition", "1"}, "Option partition is only allowed if topic is used"},
	} {
		code, out, errOut := runElection(tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

func TestLookupByProgramName(t *testing.T) {
	for _, name := range []string{"kafka-acls.sh", "kafka-leader-election.sh", "kafka-topics.sh", "kafka-broker-api-versions.sh"} {
		if Lookup("/opt/kafka/bin/"+name) == nil || Lookup(name) == nil || Lookup("bin/"+name) == nil {
			t.Fatalf("%s not found by path or name", name)
		}
	}
	if Lookup("/usr/local/bin/tidemark") != nil {
		t.Fatal("the tidemark binary under its own name ran a script")
	}
}

// The image links exactly the scripts this package runs: the Makefile's
// KAFKA_SCRIPTS names them for `make images`.
func TestMakefileLinksEveryScript(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "KAFKA_SCRIPTS"); ok {
			_, value, _ := strings.Cut(rest, ":=")
			if got, want := strings.Join(strings.Fields(value), " "), strings.Join(Names(), " "); got != want {
				t.Fatalf("Makefile KAFKA_SCRIPTS %q, want %q", got, want)
			}
			return
		}
	}
	t.Fatal("the Makefile sets no KAFKA_SCRIPTS")
}
