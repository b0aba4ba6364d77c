package kafkascripts

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/pki"
)

func runConsumer(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = ConsoleConsumer(context.Background(), args, &out, &errw)
	return code, out.String(), errw.String()
}

// committedOffset is group's committed offset of topic's partition, read with an
// OffsetFetch of the test's own (-1: none).
func committedOffset(t *testing.T, bootstrap, group, topic string, partition int32) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetFetch %s: %v %+v", group, err, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// lines splits output into its lines, the Kafka log stamp taken off.
func lines(s string) []string { return strings.Split(logStamp.ReplaceAllString(s, ""), "\n") }

// The producer's keyed lines back through the consumer: a group that
// commits what it printed and resumes there, --max-messages and
// --timeout-ms ending the run, the formatter's properties, --partition
// with --offset, and --include.
func TestConsoleProducerConsumerRoundTrip(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	b := c.KafkaAddrs()[0]
	createTopic(t, b, "--topic", "words", "--partitions", "1", "--replication-factor", "3")
	if code, _, errOut := runProducer("k1:alpha\nk2:beta\nk3:gamma\nk4:delta\n",
		"--bootstrap-server", b, "--topic", "words", "--property", "parse.key=true", "--property", "key.separator=:", "--producer-property", "linger.ms=0"); code != 0 || errOut != "" {
		t.Fatalf("produce: exit %d, stderr %q", code, errOut)
	}

	code, out, errOut := runConsumer("--bootstrap-server", b, "--topic", "words", "--group", "readers", "--from-beginning",
		"--max-messages", "2", "--property", "print.key=true", "--property", "key.separator= => ")
	if code != 0 || out != "k1 => alpha\nk2 => beta\n" || errOut != "Processed a total of 2 messages\n" {
		t.Fatalf("--max-messages 2: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got := committedOffset(t, b, "readers", "words", 0); got != 2 {
		t.Fatalf("the group committed %d, want 2 (the two records printed)", got)
	}
	// The group resumes at its commit; --timeout-ms ends the run as
	// Kafka's tool ends it, with the TimeoutException logged.
	code, out, errOut = runConsumer("--bootstrap-server", b, "--topic", "words", "--group", "readers", "--timeout-ms", "10000",
		"--property", "print.offset=true", "--property", "print.partition=true")
	if code != 0 || out != "Partition:0\tOffset:2\tgamma\nPartition:0\tOffset:3\tdelta\n" {
		t.Fatalf("resumed: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	wantErr := []string{
		"ERROR Error processing message, terminating consumer process:  (kafka.tools.ConsoleConsumer$)",
		"org.apache.kafka.common.errors.TimeoutException",
		"Processed a total of 2 messages",
		"",
	}
	if got := lines(errOut); !slices.Equal(got, wantErr) {
		t.Fatalf("resumed: stderr lines %q, want %q", got, wantErr)
	}
	if got := committedOffset(t, b, "readers", "words", 0); got != 4 {
		t.Fatalf("the group committed %d, want 4", got)
	}

	// Without --group the tool's own group commits nothing; --partition
	// with --offset reads from there.
	code, out, errOut = runConsumer("--bootstrap-server", b, "--topic", "words", "--partition", "0", "--offset", "1", "--max-messages", "2",
		"--property", "print.timestamp=true", "--property", "print.value=false", "--property", "print.key=true")
	if got := strings.Split(out, "\n"); code != 0 || len(got) != 3 || !strings.HasPrefix(got[0], "CreateTime:") || !strings.HasSuffix(got[0], "\tk2") || !strings.HasSuffix(got[1], "\tk3") || errOut != "Processed a total of 2 messages\n" {
		t.Fatalf("--partition 0 --offset 1: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runConsumer("--bootstrap-server", b, "--include", "wor.*", "--from-beginning", "--max-messages", "4")
	if code != 0 || out != "alpha\nbeta\ngamma\ndelta\n" {
		t.Fatalf("--include: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// --offset latest: nothing new arrives before the timeout.
	code, out, errOut = runConsumer("--bootstrap-server", b, "--topic", "words", "--partition", "0", "--timeout-ms", "1500")
	if code != 0 || out != "" || !strings.HasSuffix(errOut, "Processed a total of 0 messages\n") {
		t.Fatalf("from the end: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Kafka's refusals of bad command lines.
func TestConsoleConsumerRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantStderr string
		usage      bool
	}{
		{nil, "This tool helps to read data from Kafka topics and outputs it to standard output.\n", true},
		{[]string{"--bootstrap-server", "x:1"}, "Exactly one of --include/--topic is required. \n", true},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--include", "t.*"}, "Exactly one of --include/--topic is required. \n", true},
		{[]string{"--bootstrap-server", "x:1", "--include", "t", "--partition", "0"}, "The topic is required when partition is specified.\n", true},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--partition", "0", "--offset", "1", "--from-beginning"}, "Options from-beginning and offset cannot be specified together.\n", true},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--offset", "1"}, "The partition is required when offset is specified.\n", true},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--partition", "0", "--offset", "-5"}, "The provided offset value '-5' is incorrect. Valid values are 'earliest', 'latest', or a non-negative long.\n", true},
		{[]string{"--topic", "t"}, "Missing required argument \"[bootstrap-server]\"\n", true},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--group", "a", "--consumer-property", "group.id=b"}, "The group ids provided in different places (directly using '--group', via '--consumer-property', or via '--consumer.config') do not match. Detected group ids: 'a', 'b'\n", true},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--group", "a", "--partition", "0"}, "Options group and partition cannot be specified together.\n", true},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--from-beginning", "--consumer-property", "auto.offset.reset=latest"}, "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', please remove one option\n", false},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t", "--frobnicate"}, "frobnicate is not a recognized option\n", true},
	} {
		code, out, errOut := runConsumer(tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.wantStderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and stderr starting %q", tc.args, code, out, errOut, tc.wantStderr)
			continue
		}
		if hasUsage := strings.Contains(errOut, "--bootstrap-server string"); hasUsage != tc.usage {
			t.Errorf("%q: usage printed %v, want %v", tc.args, hasUsage, tc.usage)
		}
	}
	code, _, errOut := runConsumer("--bootstrap-server", "x:1", "--topic", "t", "--isolation-level", "dirty")
	if want := []string{"ERROR Unknown error when running consumer:  (kafka.tools.ConsoleConsumer$)", "org.apache.kafka.common.config.ConfigException: Invalid value dirty for configuration isolation.level: String must be one of: read_committed, read_uncommitted", ""}; code != 1 || !slices.Equal(lines(errOut), want) {
		t.Errorf("--isolation-level dirty: exit %d, stderr lines %q, want %q", code, lines(errOut), want)
	}
}

// --producer.config and --consumer.config take the same PEM stores as
// --command-config: both ends over a listener that wants mutual TLS.
func TestConsoleScriptsOverMutualTLS(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Secure: true, Kafka: true})
	dir := t.TempDir()
	key, err := os.ReadFile(pki.KeyPath(c.PKIDir, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := os.ReadFile(pki.CertPath(c.PKIDir, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	keystore := filepath.Join(dir, "admin-keystore.pem")
	if err := os.WriteFile(keystore, append(key, cert...), 0o600); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(dir, "client.properties")
	if err := os.WriteFile(props, []byte("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location="+pki.CAPath(c.PKIDir)+
		"\nssl.keystore.type=PEM\nssl.keystore.location="+keystore+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := c.KafkaAddrs()[0]
	if code, out, errOut := runTopics("--bootstrap-server", b, "--command-config", props, "--create", "--topic", "sealed", "--partitions", "1", "--replication-factor", "3"); code != 0 {
		t.Fatalf("create: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runProducer("one\ntwo\n", "--bootstrap-server", b, "--topic", "sealed", "--producer.config", props, "--sync"); code != 0 || errOut != "" {
		t.Fatalf("produce over TLS: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runConsumer("--bootstrap-server", b, "--topic", "sealed", "--consumer.config", props, "--from-beginning", "--max-messages", "2")
	if code != 0 || out != "one\ntwo\n" || errOut != "Processed a total of 2 messages\n" {
		t.Fatalf("consume over TLS: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runGetOffsets("--bootstrap-server", b, "--topic", "sealed", "--command-config", props)
	if code != 0 || out != "sealed:0:2\n" {
		t.Fatalf("get-offsets over TLS: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
