package kafkascripts

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"tidemark.io/services/clustertest"
)

func runGetOffsets(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = GetOffsets(args, &out, &errw)
	return code, out.String(), errw.String()
}

// Offsets before and after producing, by name and by number, filtered by
// --topic, --partitions and --topic-partitions, as Kafka prints them.
func TestGetOffsetsScript(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	b := c.KafkaAddrs()[0]
	createTopic(t, b, "--topic", "events", "--partitions", "3", "--replication-factor", "2")
	createTopic(t, b, "--topic", "other", "--partitions", "1", "--replication-factor", "1")
	get := func(want string, args ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, out, errOut := runGetOffsets(append([]string{"--bootstrap-server", b}, args...)...)
			if code == 0 && out == want && errOut == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("kafka-get-offsets.sh %q: exit %d, stdout %q, stderr %q, want stdout %q", args, code, out, errOut, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	get("events:0:0\nevents:1:0\nevents:2:0\nother:0:0\n")
	get("events:0:0\nevents:1:0\nevents:2:0\n", "--topic", "ev.*", "--time", "-2")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := time.Now().Add(-time.Minute).UnixMilli()
	for p, n := range map[int32]int{0: 2, 2: 3} {
		for i := 0; i < n; i++ {
			if _, err := c.Produce(ctx, "events", p, -1, "v"); err != nil {
				t.Fatal(err)
			}
		}
	}
	get("events:0:2\nevents:1:0\nevents:2:3\nother:0:0\n")
	get("events:0:2\nevents:1:0\nevents:2:3\n", "--topic", "events", "--time", "latest")
	get("events:0:0\nevents:2:0\n", "--topic", "events", "--partitions", "0,2", "--time", "earliest")
	get("events:1:0\nevents:2:3\nother:0:0\n", "--topic-partitions", "events:1-,other")
	get("events:0:2\n", "--topic-partitions", "events:-1")
	// By timestamp: the first record at or after it; partitions with none
	// are left out.
	get("events:0:0\nevents:2:0\n", "--topic", "events", "--time", itoa(before))
	get("", "--topic", "events", "--time", itoa(time.Now().Add(time.Hour).UnixMilli()))

	// Max timestamp (ListOffsets v7): the first record carrying the
	// largest timestamp, whatever order the timestamps came in; an empty
	// partition is left out.
	get("", "--topic", "other", "--time", "-3")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b), kgo.DefaultProduceTopic("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	now := time.Now().UnixMilli()
	for _, ts := range []int64{now - 3000, now - 1000, now - 2000, now - 1000} {
		r := &kgo.Record{Value: []byte("v"), Timestamp: time.UnixMilli(ts)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	get("other:0:1\n", "--topic", "other", "--time", "-3")
	get("other:0:1\n", "--topic", "other", "--time", "max-timestamp")
	code, out, errOut := runGetOffsets("--bootstrap-server", b, "--topic", "nope")
	if code != 1 || out != "" || errOut != "Error occurred: Could not match any topic-partitions with the specified filters\n" {
		t.Errorf("no match: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Kafka's refusals of bad command lines.
func TestGetOffsetsScriptRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantStderr string
		usage      bool
	}{
		{nil, "An interactive shell for getting topic-partition offsets.\n", true},
		{[]string{"--topic", "t"}, "Missing required argument \"[bootstrap-server]\"\n", true},
		{[]string{"--bootstrap-server", "x:1", "--time", "yesterday"}, "Error occurred: Malformed time argument yesterday. Please use -1 or latest / -2 or earliest / -3 or max-timestamp, or a specified long format timestamp\n", false},
		{[]string{"--bootstrap-server", "x:1", "--topic-partitions", "t:1", "--topic", "t"}, "Error occurred: --topic-partitions cannot be used with --topic or --partitions\n", false},
		{[]string{"--bootstrap-server", "x:1", "--partitions", "0,one"}, "Error occurred: --partitions expects a comma separated list of numeric partition ids, but received: 0,one\n", false},
		{[]string{"--bootstrap-server", "x:1", "--topic-partitions", "t:1:2"}, "Error occurred: Invalid rule specification: t:1:2\n", false},
	} {
		code, out, errOut := runGetOffsets(tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.wantStderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and stderr starting %q", tc.args, code, out, errOut, tc.wantStderr)
			continue
		}
		if hasUsage := strings.Contains(errOut, "--bootstrap-server string"); hasUsage != tc.usage {
			t.Errorf("%q: usage printed %v, want %v", tc.args, hasUsage, tc.usage)
		}
	}
}
