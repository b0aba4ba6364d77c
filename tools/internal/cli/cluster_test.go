package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// tcluster is an in-process cluster with mutual TLS and the CLI flags
// that reach it.
type tcluster struct {
	*clustertest.Cluster
	flags []string // --bootstrap-server, --controller, then the admin's --tls.* flags
	etcd  string
}

func startCluster(t *testing.T) *tcluster {
	t.Helper()
	return startClusterWith(t, clustertest.Options{})
}

// startClusterWith is startCluster with more options: racks and mutual TLS
// are always on.
func startClusterWith(t *testing.T, o clustertest.Options) *tcluster {
	t.Helper()
	o.Racks, o.Secure = []string{"rack-a", "rack-b", "rack-c"}, true
	c := clustertest.Start(t, o)
	admin := pki.Options(c.PKIDir, "admin")
	var brokers []string
	for id := int32(1); id <= 3; id++ {
		brokers = append(brokers, c.BrokerConfig(id).Listen)
	}
	// The harness has no accessor for controller addresses; the cluster
	// itself names them.
	desc, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ctrls []string
	for _, ci := range desc.GetControllers() {
		ctrls = append(ctrls, ci.GetNode().GetAddress())
	}
	return &tcluster{Cluster: c, etcd: c.Etcd.Endpoint(),
		flags: []string{"--bootstrap-server", strings.Join(brokers, ","), "--controller", strings.Join(ctrls, ","),
			"--tls.ca", admin.CA, "--tls.cert", admin.Cert, "--tls.key", admin.Key}}
}

func (c *tcluster) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := runCLI(t, stdin, append(args, c.flags...)...)
	if os.Getenv("TIDEMARK_TEST_SHOW") != "" {
		t.Logf("$ tidemark %s  (exit %d, %v)\n%s%s", strings.Join(args, " "), r.code, r.took.Round(time.Millisecond), r.out, r.err)
	}
	return r
}

// until reruns a CLI command until check accepts its output.
func (c *tcluster) until(t *testing.T, what string, check func(result) bool, args ...string) result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.run(t, "", args...)
		if check(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last output:\n%s\n%s", what, r.out, r.err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var (
	topicLineRE     = regexp.MustCompile(`(?m)^Topic: orders\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: min\.insync\.replicas=2$`)
	partitionLineRE = regexp.MustCompile(`(?m)^\tTopic: orders\tPartition: (\d)\tLeader: (\d)\tReplicas: (\d),\d,\d\tIsr: [\d,]+\tLeaderEpoch: \d+(\tOffline: [\d,]+)?$`)
)

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func TestCLIAgainstCluster(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)

	t.Run("topics create, list, describe", func(t *testing.T) {
		r := c.run(t, "", "topics", "create", "--topic", "orders", "--partitions", "3", "--replication-factor", "3",
			"--config", "min.insync.replicas=2").ok(t)
		contains(t, r.out, "Created topic orders.")
		c.run(t, "", "topics", "create", "--topic", "orders", "--partitions", "1").fails(t, cli.ExitFailed, "TOPIC_ALREADY_EXISTS")
		c.run(t, "", "topics", "create", "--topic", "orders", "--partitions", "1", "--if-not-exists").ok(t)
		c.run(t, "", "topics", "create", "--topic", "pinned", "--replica-assignment", "1:2:3,2:3:1").ok(t)
		c.run(t, "", "topics", "create", "--topic", "nope", "--replica-assignment", "1:9").fails(t, cli.ExitFailed, "INVALID_REPLICA_ASSIGNMENT")

		if r := c.run(t, "", "topics", "list").ok(t); r.out != "orders\npinned\n" {
			t.Fatalf("list = %q", r.out)
		}
		r = c.run(t, "", "topics", "describe", "--topic", "orders").ok(t)
		if !topicLineRE.MatchString(r.out) || len(partitionLineRE.FindAllString(r.out, -1)) != 3 || len(lines(r.out)) != 4 {
			t.Fatalf("describe is not in Kafka's shape:\n%s", r.out)
		}
		r = c.run(t, "", "topics", "describe", "--topic", "pinned").ok(t)
		contains(t, r.out, "Partition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3", "Partition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3,1")
		c.run(t, "", "topics", "describe", "--topic", "ghost").fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
	})

	t.Run("the dev cluster's certificates are found without TLS flags", func(t *testing.T) {
		// Where `make run` ran, .data/pki holds the CA and the admin's
		// certificate: the CLI uses them when given no TLS flag.
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, ".data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(c.PKIDir, filepath.Join(dir, ".data", "pki")); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		r := runCLI(t, "", append([]string{"topics", "list"}, c.flags[:4]...)...).ok(t)
		contains(t, r.out, "orders")
		r = runCLI(t, "", "health", "--addr", c.BrokerConfig(1).Listen).ok(t)
		contains(t, r.out, "SERVING")
		// Plaintext against a TLS cluster fails, saying what to change.
		runCLI(t, "", append([]string{"topics", "list", "--plaintext"}, c.flags[:4]...)...).
			fails(t, cli.ExitFailed, "cannot reach any controller").fails(t, cli.ExitFailed, "the node may require TLS (drop --plaintext)")
		runCLI(t, "", "health", "--addr", c.BrokerConfig(1).Listen, "--plaintext").fails(t, cli.ExitFailed, "drop --plaintext")
		// Another CA's certificate is refused, and the message says so.
		other := t.TempDir()
		if _, err := pki.Ensure(other, pki.Leaf{Name: "admin"}); err != nil {
			t.Fatal(err)
		}
		o := pki.Options(other, "admin")
		runCLI(t, "", "health", "--addr", c.BrokerConfig(1).Listen, "--tls.ca", o.CA, "--tls.cert", o.Cert, "--tls.key", o.Key).
			fails(t, cli.ExitFailed, "not signed by the CA of --tls.ca")
	})

	t.Run("produce then consume", func(t *testing.T) {
		r := c.run(t, "a\nb\nc\n", "produce", "--topic", "orders", "--partition", "0").ok(t)
		contains(t, r.err, "3 records sent to orders: 3 acknowledged, 0 failed")
		c.run(t, "k1:x\nk2:y\n", "produce", "--topic", "orders", "--partition", "1", "--key-separator", ":", "--linger-ms", "0").ok(t)

		r = c.run(t, "", "consume", "--topic", "orders", "--partition", "0", "--print-offset").ok(t)
		if want := "Partition:0\tOffset:0\ta\nPartition:0\tOffset:1\tb\nPartition:0\tOffset:2\tc\n"; !strings.HasPrefix(r.out, want) {
			t.Fatalf("consume = %q, want it to start with %q", r.out, want)
		}
		r = c.run(t, "", "consume", "--topic", "orders").ok(t)
		if got := lines(r.out); len(got) != 5 {
			t.Fatalf("consume of every partition gave %d lines, want 5:\n%s", len(got), r.out)
		}
		contains(t, r.out, "x\n", "y\n")
		r = c.run(t, "", "consume", "--topic", "orders", "--print-key", "--max-messages", "2").ok(t)
		if len(lines(r.out)) != 2 {
			t.Fatalf("--max-messages 2 gave:\n%s", r.out)
		}
		if r := c.run(t, "", "consume", "--topic", "orders", "--partition", "0", "--offset", "1").ok(t); r.out != "b\nc\n" {
			t.Fatalf("--offset 1 = %q", r.out)
		}

		// A producer is told how to make the topic (gRPC produce creates
		// none, where kafka-console-producer's Metadata would).
		c.run(t, "a\n", "produce", "--topic", "ghost").fails(t, cli.ExitFailed,
			`UNKNOWN_TOPIC_OR_PARTITION: topic "ghost" does not exist: create it first with tidemark topics create --topic ghost`)
		c.run(t, "", "consume", "--topic", "ghost").fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
		r = c.run(t, "a\n", "produce", "--topic", "orders", "--partition", "7").fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
		if strings.Contains(r.err, "create it") {
			t.Fatalf("a missing partition of a topic that exists is told to create the topic: %s", r.err)
		}
	})

	t.Run("consume --follow waits for the high watermark", func(t *testing.T) {
		done := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done <- runCtx(ctx, nil, "", append([]string{"consume", "--topic", "orders", "--partition", "0",
				"--offset", "3", "--follow", "--max-messages", "1"}, c.flags...)...)
		}()
		time.Sleep(300 * time.Millisecond)
		c.run(t, "live\n", "produce", "--topic", "orders", "--partition", "0").ok(t)
		if r := (<-done).ok(t); r.out != "live\n" {
			t.Fatalf("follow = %q", r.out)
		}
		// Ctrl-C ends following without an error.
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		defer cancel()
		r := runCtx(ctx, nil, "", append([]string{"consume", "--topic", "orders", "--follow"}, c.flags...)...)
		if r.code != cli.ExitOK || r.out != "" {
			t.Fatalf("follow from the end, interrupted: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
	})

	t.Run("consume --rack reads from a same-rack follower", func(t *testing.T) {
		leader := c.Partition("orders", 0).GetLeader()
		follower := leader%3 + 1 // racks are rack-a, rack-b, rack-c for brokers 1, 2, 3
		rack := fmt.Sprintf("rack-%c", 'a'+follower-1)
		r := c.run(t, "", "consume", "--topic", "orders", "--partition", "0", "--rack", rack).ok(t)
		contains(t, r.out, "a\nb\nc\nlive\n")
		contains(t, r.err, fmt.Sprintf("orders-0: last read from broker %d (rack %s)", follower, rack))
	})

	t.Run("cluster describe", func(t *testing.T) {
		r := c.run(t, "", "cluster", "describe").ok(t)
		id, epoch := c.ActiveController()
		contains(t, r.out, fmt.Sprintf("ActiveController: %d (", id), fmt.Sprintf("ControllerEpoch: %d", epoch), "active", "standby")
		for b := int32(1); b <= 3; b++ {
			if !regexp.MustCompile(fmt.Sprintf(`(?m)^%d +%s +rack-%c +alive +\d+ +\d+ +\d+$`, b, regexp.QuoteMeta(c.BrokerConfig(b).Listen), 'a'+b-1)).MatchString(r.out) {
				t.Fatalf("no row for broker %d:\n%s", b, r.out)
			}
		}
	})

	t.Run("watch --once", func(t *testing.T) {
		r := c.run(t, "", "watch", "--topic", "orders", "--once").ok(t)
		if strings.Contains(r.out, "\033") {
			t.Fatalf("escape codes in plain output:\n%q", r.out)
		}
		contains(t, r.out, "brokers: 1 up 2 up 3 up", "REPLICAS (id:LEO/HW, * leader)", "3 partitions, 0 under-replicated, 0 without a leader")
		if !regexp.MustCompile(`(?m)^orders +0 +\d +\d+ +[\d,]+ +4 +.*\d\*:4/4.*ok$`).MatchString(r.out) {
			t.Fatalf("no row for orders-0 with LEO and HW 4:\n%s", r.out)
		}
		r = c.run(t, "", "watch", "--topic", "orders", "--once", "--color", "always").ok(t)
		contains(t, r.out, "\033[33m") // the leader in yellow
		c.run(t, "", "watch", "--topic", "ghost", "--once").fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")

		// Live: a snapshot every interval until Ctrl-C, plain when not on a terminal.
		ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
		defer cancel()
		r = runCtx(ctx, nil, "", append([]string{"watch", "--topic", "orders", "--interval", "200ms"}, c.flags...)...).ok(t)
		if n := strings.Count(r.out, "tidemark watch "); n < 3 || strings.Contains(r.out, "\033") {
			t.Fatalf("live watch printed %d snapshots (want several, plain):\n%s", n, r.out)
		}
	})

	t.Run("metadata dump", func(t *testing.T) {
		r := c.run(t, "", "metadata", "dump", "--etcd-endpoints", c.etcd).ok(t)
		contains(t, r.out, "prefix /tidemark at revision", "/tidemark/brokers/topics/orders\n", "kind: partition_state",
			"/tidemark/controller_epoch", "/tidemark/config/topics/orders")
		r = c.run(t, "", "metadata", "dump", "--etcd-endpoints", c.etcd, "--json").ok(t)
		var snap struct {
			Entries []struct{ Key, Kind string }
		}
		if err := json.Unmarshal([]byte(r.out), &snap); err != nil {
			t.Fatalf("--json: %v\n%s", err, r.out)
		}
		found := false
		for _, e := range snap.Entries {
			found = found || (e.Key == "/tidemark/brokers/topics/orders/partitions/0/state" && e.Kind == "partition_state")
		}
		if !found {
			t.Fatalf("--json lacks orders-0's state:\n%s", r.out)
		}
	})

	t.Run("perf produce and consume", func(t *testing.T) {
		r := c.run(t, "", "perf", "produce", "--topic", "orders", "--num-records", "300", "--record-size", "100",
			"--throughput", "1000", "--reporting-interval", "100ms", "--timeout", "20s").ok(t)
		last := lines(r.out)[len(lines(r.out))-1]
		if !regexp.MustCompile(`^300 records sent, [\d.]+ records/s \([\d.]+ MB/s\), [\d.]+ ms avg latency, [\d.]+ ms max, [\d.]+ ms p50, [\d.]+ ms p95, [\d.]+ ms p99, [\d.]+ ms p99\.9$`).MatchString(last) {
			t.Fatalf("summary line %q", last)
		}
		if len(lines(r.out)) < 2 {
			t.Fatalf("no progress line in a 0.3 s run with --reporting-interval 100ms:\n%s", r.out)
		}
		r = c.run(t, "", "perf", "produce", "--topic", "orders", "--num-records", "20", "--record-size", "10", "--sync").ok(t)
		contains(t, r.out, "20 records sent")
		// Four producers side by side share 21 records, all acknowledged.
		r = c.run(t, "", "perf", "produce", "--topic", "orders", "--num-records", "21", "--record-size", "10", "--sync", "--producers", "4").ok(t)
		contains(t, r.out, "21 records sent")
		r = c.run(t, "", "perf", "consume", "--topic", "orders", "--messages", "300", "--timeout", "20s").ok(t)
		contains(t, r.out, "300 records consumed", "fetch latency", "p99.9")
		c.run(t, "", "perf", "consume", "--topic", "orders", "--messages", "100000", "--timeout", "500ms").fails(t, cli.ExitFailed, "--timeout")
		// End to end: every record sent is read back by the consumer in the
		// same process, and both latencies are reported.
		r = c.run(t, "", "perf", "e2e", "--topic", "orders", "--partition", "1", "--num-records", "200", "--record-size", "64",
			"--throughput", "400", "--reporting-interval", "1h", "--timeout", "30s").ok(t)
		got := lines(r.out)
		if len(got) != 4 ||
			!regexp.MustCompile(`^200 records sent, [\d.]+ records/s .* ms p99\.9$`).MatchString(got[0]) || !strings.Contains(got[0], "ack latency") ||
			!regexp.MustCompile(`^200 records consumed, [\d.]+ records/s .* ms p99\.9$`).MatchString(got[1]) || !strings.Contains(got[1], "end-to-end latency") ||
			!regexp.MustCompile(`^200 records handed to the producer, [\d.]+ records/s .* ms avg delay past schedule, .* ms p99\.9$`).MatchString(got[2]) ||
			!regexp.MustCompile(`^\d+ batches sent, \d+ waited for a request slot \(max\.in\.flight 5\), [\d.]+ ms avg record queue time, [\d.]+ ms max$`).MatchString(got[3]) {
			t.Fatalf("perf e2e summaries:\n%s", r.out)
		}
		// Sent far above what one in-flight kilobyte allows, records wait for
		// buffer room: the handed-over line shows how late they got.
		r = c.run(t, "", "perf", "e2e", "--topic", "orders", "--partition", "1", "--num-records", "200", "--record-size", "64",
			"--throughput", "1000000", "--buffer-memory", "1024", "--reporting-interval", "1h", "--timeout", "30s").ok(t)
		m := regexp.MustCompile(`(?m)^200 records handed to the producer, .* ([\d.]+) ms p99, `).FindStringSubmatch(r.out)
		if m == nil {
			t.Fatalf("no handed-over summary:\n%s", r.out)
		}
		if p99, _ := strconv.ParseFloat(m[1], 64); p99 < 1 {
			t.Fatalf("200 records due within 0.2 ms through a 1 KiB window reached the producer at most %v ms late:\n%s", p99, r.out)
		}
		// One request slot and a batch per record or two: batches wait for
		// the slot, and the batches line counts them.
		r = c.run(t, "", "perf", "e2e", "--topic", "orders", "--partition", "1", "--num-records", "200", "--record-size", "64",
			"--throughput", "1000000", "--batch-size", "128", "--max-in-flight", "1", "--reporting-interval", "1h", "--timeout", "30s").ok(t)
		m = regexp.MustCompile(`(?m)^(\d+) batches sent, (\d+) waited for a request slot \(max\.in\.flight 1\), `).FindStringSubmatch(r.out)
		if m == nil {
			t.Fatalf("no batches line:\n%s", r.out)
		}
		if sent, _ := strconv.Atoi(m[1]); sent < 50 {
			t.Fatalf("200 records of 64 B in batches of at most 128 B went in %d batches:\n%s", sent, r.out)
		}
		if waited, _ := strconv.Atoi(m[2]); waited == 0 {
			t.Fatalf("with one request slot no batch waited for it:\n%s", r.out)
		}
		// With a warm-up, 100 records at the same rate go first: written
		// and read back, but not in the summaries.
		c.run(t, "", "topics", "create", "--topic", "warmed", "--partitions", "1", "--replication-factor", "3").ok(t)
		r = c.run(t, "", "perf", "e2e", "--topic", "warmed", "--num-records", "200", "--record-size", "64",
			"--throughput", "400", "--warmup", "250ms", "--reporting-interval", "1h", "--timeout", "30s").ok(t)
		if got := lines(r.out); len(got) != 4 || !strings.HasPrefix(got[0], "200 records sent,") || !strings.HasPrefix(got[1], "200 records consumed,") ||
			!strings.HasPrefix(got[2], "200 records handed to the producer,") {
			t.Fatalf("perf e2e --warmup summaries:\n%s", r.out)
		}
		contains(t, c.run(t, "", "perf", "consume", "--topic", "warmed", "--messages", "300", "--timeout", "20s").ok(t).out, "300 records consumed")
		c.run(t, "", "perf", "consume", "--topic", "warmed", "--messages", "301", "--timeout", "1s").fails(t, cli.ExitFailed, "--timeout")
		c.run(t, "", "perf", "e2e", "--topic", "warmed", "--num-records", "1", "--record-size", "64", "--throughput", "1", "--warmup", "-1s").
			fails(t, cli.ExitUsage, "--warmup must not be negative")
		c.run(t, "", "topics", "delete", "--topic", "warmed").ok(t)
	})

	t.Run("alter-config", func(t *testing.T) {
		r := c.run(t, "", "topics", "alter-config", "--topic", "orders", "--add-config", "retention.ms=60000,cleanup.ok=1").
			fails(t, cli.ExitFailed, "INVALID_CONFIG")
		_ = r
		c.run(t, "", "topics", "alter-config", "--topic", "orders", "--add-config", "retention.ms=60000").ok(t)
		contains(t, c.run(t, "", "topics", "describe", "--topic", "orders").ok(t).out, "Configs: min.insync.replicas=2,retention.ms=60000\n")
		r = c.run(t, "", "topics", "alter-config", "--topic", "orders", "--delete-config", "retention.ms").ok(t)
		contains(t, r.out, "Completed updating config for topic orders.")
		contains(t, c.run(t, "", "topics", "describe", "--topic", "orders").ok(t).out, "Configs: min.insync.replicas=2\n")

		c.run(t, "", "topics", "alter-config", "--broker-defaults", "--add-config", "log.retention.ms=3600000").ok(t)
		resp, err := c.Admin().DescribeConfigs(context.Background(), &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{
			{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: "1"}}})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range resp.GetResults()[0].GetEntries() {
			found = found || e.GetName() == "log.retention.ms" && e.GetValue() == "3600000"
		}
		if !found {
			t.Fatalf("broker 1 does not see the new default: %v", resp)
		}
		r = c.run(t, "", "topics", "describe-config", "--broker", "1").ok(t)
		if !regexp.MustCompile(`(?m)^log\.retention\.ms +3600000 +DYNAMIC_DEFAULT_BROKER$`).MatchString(r.out) ||
			!regexp.MustCompile(`(?m)^replica\.lag\.time\.max\.ms +30000 +DEFAULT$`).MatchString(r.out) {
			t.Fatalf("describe-config --broker 1:\n%s", r.out)
		}
		contains(t, c.run(t, "", "topics", "describe-config", "--topic", "orders").ok(t).out, "min.insync.replicas")
		c.run(t, "", "topics", "describe-config", "--topic", "ghost").fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
		c.run(t, "", "topics", "describe-config", "--topic", "orders", "--broker", "1").fails(t, cli.ExitUsage, "exactly one")
		c.run(t, "", "topics", "alter-config", "--broker-defaults", "--delete-config", "log.retention.ms").ok(t)
		c.run(t, "", "topics", "alter-config", "--topic", "ghost", "--add-config", "retention.ms=1").fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
	})

	t.Run("a crashed broker shows in the describe filters and the watch", func(t *testing.T) {
		c.run(t, "", "topics", "create", "--topic", "strict", "--partitions", "1", "--replication-factor", "3",
			"--config", "min.insync.replicas=3").ok(t)
		c.CrashBroker(3)
		r := c.until(t, "orders to lose broker 3 from every ISR", func(r result) bool {
			return r.code == 0 && len(partitionLineRE.FindAllString(r.out, -1)) == 3
		}, "topics", "describe", "--topic", "orders", "--under-replicated-partitions")
		if strings.Contains(r.out, "PartitionCount") {
			t.Fatalf("filtered describe printed the topic line:\n%s", r.out)
		}
		contains(t, r.out, "Offline: 3")
		r = c.run(t, "", "topics", "describe", "--topic", "orders", "--at-min-isr-partitions").ok(t)
		if n := len(partitionLineRE.FindAllString(r.out, -1)); n != 3 {
			t.Fatalf("at-min-isr lists %d partitions, want 3:\n%s", n, r.out)
		}
		for _, filter := range []string{"--under-min-isr-partitions", "--unavailable-partitions"} {
			if r := c.run(t, "", "topics", "describe", "--topic", "orders", filter).ok(t); r.out != "" {
				t.Fatalf("%s lists partitions:\n%s", filter, r.out)
			}
		}
		r = c.run(t, "", "watch", "--topic", "orders", "--once").ok(t)
		contains(t, r.out, "3 down", "3:down", "! under-replicated", "at min ISR", "3 partitions, 3 under-replicated, 0 without a leader")
		c.run(t, "still\n", "produce", "--topic", "orders").ok(t)

		// min_isr_demo: with the ISR below min.insync.replicas, acks=all fails.
		c.until(t, "strict to fall under min ISR", func(r result) bool { return r.code == 0 && strings.Contains(r.out, "Topic: strict\t") },
			"topics", "describe", "--under-min-isr-partitions")
		r = c.run(t, "x\ny\n", "produce", "--topic", "strict", "--retries", "2").fails(t, cli.ExitFailed, "2 of 2 records failed")
		contains(t, r.err, "0 acknowledged, 2 failed", "NOT_ENOUGH_REPLICAS x2")
		contains(t, c.run(t, "", "watch", "--topic", "strict", "--once").ok(t).out, "! under min ISR (2<3)")
		c.run(t, "", "topics", "delete", "--topic", "strict").ok(t)
	})

	t.Run("preferred leader election after the restart", func(t *testing.T) {
		c.StartBroker(3)
		c.until(t, "broker 3 back in every ISR", func(r result) bool { return r.code == 0 && r.out == "" },
			"topics", "describe", "--under-replicated-partitions")
		// Find the partition whose preferred leader is 3: it moved away.
		var part string
		for _, m := range partitionLineRE.FindAllStringSubmatch(c.run(t, "", "topics", "describe", "--topic", "orders").ok(t).out, -1) {
			if m[3] == "3" {
				if m[2] == "3" {
					t.Fatalf("partition %s still led by 3 after its crash", m[1])
				}
				part = m[1]
			}
		}
		if part == "" {
			t.Fatal("no orders partition prefers broker 3")
		}
		r := c.run(t, "", "leader-election", "--election-type", "preferred", "--topic", "orders", "--partition", part).ok(t)
		contains(t, r.out, fmt.Sprintf("Successfully completed leader election (PREFERRED) for partition orders-%s: leader 3,", part))
		r = c.run(t, "", "leader-election", "--election-type", "preferred", "--topic", "orders", "--partition", part).ok(t)
		contains(t, r.out, fmt.Sprintf("Valid replica already elected for partition orders-%s: leader 3", part))
		r = c.run(t, "", "leader-election", "--election-type", "preferred", "--all-topic-partitions").ok(t)
		contains(t, r.out, "No partition needed a leader election.")
		c.run(t, "", "leader-election", "--election-type", "preferred", "--topic", "ghost", "--partition", "0").
			fails(t, cli.ExitFailed, "leader election failed")
	})

	t.Run("topics delete", func(t *testing.T) {
		contains(t, c.run(t, "", "topics", "delete", "--topic", "pinned").ok(t).out, "Deleted topic pinned.")
		if r := c.run(t, "", "topics", "list").ok(t); r.out != "orders\n" {
			t.Fatalf("list after delete = %q", r.out)
		}
		c.run(t, "", "topics", "delete", "--topic", "pinned").fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
		c.run(t, "", "topics", "delete", "--topic", "pinned", "--if-exists").ok(t)
	})
}
