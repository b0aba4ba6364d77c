package kafkascripts

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"tidemark.io/services/clustertest"
)

func runProducer(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = ConsoleProducer(args, strings.NewReader(stdin), &out, &errw)
	return code, out.String(), errw.String()
}

// logStamp is the date log4j's layout puts first on Kafka's log lines.
var logStamp = regexp.MustCompile(`(?m)^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] `)

// createTopic runs kafka-topics.sh --create and waits until every broker
// knows the topic.
func createTopic(t *testing.T, bootstrap string, args ...string) {
	t.Helper()
	code, out, errOut := runTopics(append([]string{"--bootstrap-server", bootstrap, "--create"}, args...)...)
	if code != 0 {
		t.Fatalf("create %q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
	}
}

// consumeAll reads topic's records with a client of the test's own until
// it has n of them.
func consumeAll(t *testing.T, bootstrap, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s", len(recs), n, topic)
		}
		recs = append(recs, fs.Records()...)
	}
	slices.SortFunc(recs, func(a, b *kgo.Record) int { return int(a.Offset - b.Offset) })
	return recs
}

// Lines become records: parse.key with a separator of its own, a line
// without one refused as Kafka's reader refuses it, null.marker, headers.
func TestConsoleProducerKeysAndSeparators(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	b := c.KafkaAddrs()[0]
	createTopic(t, b, "--topic", "lines", "--partitions", "1", "--replication-factor", "3")

	code, out, errOut := runProducer("k1:v1\nk2:v:2\n:empty key\nNULL:no key\nk5:NULL\n",
		"--bootstrap-server", b, "--topic", "lines", "--property", "parse.key=true", "--property", "key.separator=:", "--property", "null.marker=NULL")
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("produce: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runProducer("h1:a,h2:b\tkey\tvalue\n",
		"--bootstrap-server", b, "--topic", "lines", "--property", "parse.key=true", "--property", "parse.headers=true", "--producer-property", "acks=1")
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("produce with headers: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	recs := consumeAll(t, b, "lines", 6)
	type kv struct{ key, value []byte }
	want := []kv{{[]byte("k1"), []byte("v1")}, {[]byte("k2"), []byte("v:2")}, {[]byte(""), []byte("empty key")}, {nil, []byte("no key")}, {[]byte("k5"), nil}, {[]byte("key"), []byte("value")}}
	for i, r := range recs {
		if !bytes.Equal(r.Key, want[i].key) || (r.Key == nil) != (want[i].key == nil) || !bytes.Equal(r.Value, want[i].value) || (r.Value == nil) != (want[i].value == nil) {
			t.Errorf("record %d: key %q value %q, want key %q value %q", i, r.Key, r.Value, want[i].key, want[i].value)
		}
	}
	if h := recs[5].Headers; len(h) != 2 || h[0].Key != "h1" || string(h[0].Value) != "a" || h[1].Key != "h2" || string(h[1].Value) != "b" {
		t.Errorf("headers %+v, want h1=a, h2=b", h)
	}

	// The second line has no separator: Kafka's reader throws, the tool
	// prints the exception and ends 1, after sending the line before it.
	code, _, errOut = runProducer("a\tb\nno separator\n", "--bootstrap-server", b, "--topic", "lines", "--property", "parse.key=true")
	if want := "org.apache.kafka.common.KafkaException: No key separator found on line number 2: 'no separator'\n"; code != 1 || errOut != want {
		t.Errorf("line without a separator: exit %d, stderr %q, want 1 and %q", code, errOut, want)
	}
	if recs := consumeAll(t, b, "lines", 7); string(recs[6].Key) != "a" {
		t.Errorf("the line before the bad one: %+v", recs[6])
	}
	if code, _, errOut := runProducer("no separator\n", "--bootstrap-server", b, "--topic", "lines", "--property", "parse.key=true", "--property", "ignore.error=true"); code != 0 || errOut != "" {
		t.Errorf("ignore.error=true: exit %d, stderr %q", code, errOut)
	}
}

// acks=all into a partition whose ISR is below min.insync.replicas: the
// record is refused with NOT_ENOUGH_REPLICAS, logged as Kafka's producer
// logs it; --sync ends the run 1, as Kafka's tool does.
func TestConsoleProducerNotEnoughReplicas(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	b1 := c.KafkaAddrs()[0]
	createTopic(t, b1, "--topic", "strict", "--replica-assignment", "1:2", "--config", "min.insync.replicas=2")
	if code, _, errOut := runProducer("before\n", "--bootstrap-server", b1, "--topic", "strict"); code != 0 || errOut != "" {
		t.Fatalf("produce with the ISR whole: exit %d, stderr %q", code, errOut)
	}
	if err := c.StopBroker(2); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(30*time.Second, "strict-0's ISR to shrink to [1]", func() bool {
		isr, ok := c.ReplicaISR(1, "strict", 0)
		return ok && slices.Equal(isr, []int32{1})
	})

	code, out, errOut := runProducer("lost\n", "--bootstrap-server", b1, "--topic", "strict", "--producer-property", "acks=all")
	wantLines := []string{
		"ERROR Error when sending message to topic strict with key: null, value: 4 bytes with error: (org.apache.kafka.clients.producer.internals.ErrorLoggingCallback)",
		"org.apache.kafka.common.errors.NotEnoughReplicasException: Messages are rejected since there are fewer in-sync replicas than required.",
		"",
	}
	if got := strings.Split(logStamp.ReplaceAllString(errOut, ""), "\n"); code != 0 || out != "" || !slices.Equal(got, wantLines) {
		t.Errorf("async: exit %d, stdout %q, stderr lines %q, want exit 0 (Kafka's) and %q", code, out, got, wantLines)
	}
	code, _, errOut = runProducer("lost\n", "--bootstrap-server", b1, "--topic", "strict", "--sync", "--request-required-acks", "-1")
	if want := "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.NotEnoughReplicasException: Messages are rejected since there are fewer in-sync replicas than required.\n"; code != 1 || errOut != want {
		t.Errorf("--sync: exit %d, stderr %q, want exit 1 and %q", code, errOut, want)
	}
	// acks=1 needs only the leader's append (the high watermark stays
	// where it is until the ISR is back at the minimum, as in Kafka 3.7).
	if code, _, errOut := runProducer("kept\n", "--bootstrap-server", b1, "--topic", "strict", "--sync", "--request-required-acks", "1"); code != 0 || errOut != "" {
		t.Errorf("acks=1: exit %d, stderr %q", code, errOut)
	}
	if got := c.Values(1, "strict", 0); !slices.Equal(got, []string{"before", "kept"}) {
		t.Errorf("the leader's log %q, want before, kept (the refused records never appended)", got)
	}

	// A topic that does not exist, the producer not asking to create it.
	code, _, errOut = runProducer("x\n", "--bootstrap-server", b1, "--topic", "nope", "--sync", "--producer-property", "allow.auto.create.topics=false", "--max-block-ms", "5000")
	if want := "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.TimeoutException: Topic nope not present in metadata after 5000 ms.\n"; code != 1 || errOut != want {
		t.Errorf("unknown topic: exit %d, stderr %q, want exit 1 and %q", code, errOut, want)
	}
}

// Kafka's refusals of bad command lines and settings.
func TestConsoleProducerRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantStderr string
		usage      bool
	}{
		{nil, "This tool helps to read data from standard input and publish it to Kafka.\n", true},
		{[]string{"--topic", "t"}, "Missing required option(s) [bootstrap-server]\n", true},
		{[]string{"--bootstrap-server", "x:1"}, "Missing required argument \"[topic]\"\n", true},
		{[]string{"--bootstrap-server", "x", "--topic", "t"}, "Please provide valid host:port like host1:9091,host2:9092\n", true},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--frobnicate"}, "frobnicate is not a recognized option\n", true},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--request-required-acks", "2"}, "org.apache.kafka.common.config.ConfigException: Invalid value 2 for configuration acks: String must be one of: all, -1, 0, 1\n", false},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--request-required-acks", "1", "--producer-property", "enable.idempotence=true"}, "org.apache.kafka.common.config.ConfigException: Must set acks to all in order to use the idempotent producer. Otherwise we cannot guarantee idempotence.\n", false},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--compression-codec", "brotli"}, "org.apache.kafka.common.config.ConfigException: Invalid value brotli for configuration compression.type: String must be one of: none, gzip, snappy, lz4, zstd\n", false},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--property", "null.marker=\t"}, "org.apache.kafka.common.KafkaException: null.marker and key.separator may not be equal\n", false},
	} {
		code, out, errOut := runProducer("", tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.wantStderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and stderr starting %q", tc.args, code, out, errOut, tc.wantStderr)
			continue
		}
		if hasUsage := strings.Contains(errOut, "--bootstrap-server string"); hasUsage != tc.usage {
			t.Errorf("%q: usage printed %v, want %v", tc.args, hasUsage, tc.usage)
		}
	}
}
