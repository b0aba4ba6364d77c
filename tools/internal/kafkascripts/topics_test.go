package kafkascripts

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/scram"
)

func runTopics(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = Topics(args, &out, &errw)
	return code, out.String(), errw.String()
}

// settles runs kafka-topics.sh until it prints want and exits 0: the
// broker it asks learns the controller's decisions a moment after they are
// made, as a Kafka broker does.
func settles(t *testing.T, want string, args ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errOut := runTopics(args...)
		if code == 0 && out == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafka-topics.sh %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", strings.Join(args, " "), code, out, errOut, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// topicID is the topic's id as Kafka prints it, read with a Metadata
// request of the test's own.
func topicID(t *testing.T, bootstrap, topic string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata for %s: %v %+v", topic, err, resp)
	}
	return base64.RawURLEncoding.EncodeToString(resp.Topics[0].TopicID[:])
}

// The note's chapter 9 against a three-broker cluster: create with
// min.insync.replicas=2, describe, stop broker 1, describe again through
// another broker, and the partition filters; with a topic whose replicas
// are placed by hand and one on broker 1 alone beside it.
func TestTopicsScriptNoteChapter9(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	addrs := c.KafkaAddrs()
	b1, b2 := addrs[0], addrs[1]

	code, out, errOut := runTopics("--bootstrap-server", b1, "--create", "--topic", "learn.09.orders",
		"--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	if code != 0 {
		t.Fatalf("create: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	want := "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both.\n" +
		"Created topic learn.09.orders.\n"
	if out != want {
		t.Fatalf("create printed %q, want %q", out, want)
	}
	if code, out, errOut := runTopics("--bootstrap-server", b1, "--create", "--topic", "placed", "--replica-assignment", "1:2:3,2:3:1,3:1:2"); code != 0 || out != "Created topic placed.\n" {
		t.Fatalf("create placed: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runTopics("--bootstrap-server", b1, "--create", "--topic", "solo", "--replica-assignment", "1"); code != 0 {
		t.Fatalf("create solo: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// The controller places learn.09.orders' replicas from a random start,
	// as Kafka's does; placed's are the note's layout, by hand.
	var replicas [][]int32
	for p := int32(0); p < 3; p++ {
		replicas = append(replicas, c.Partition("learn.09.orders", p).GetReplicas())
	}
	id := topicID(t, b1, "learn.09.orders")
	ordersHead := "Topic: learn.09.orders\tTopicId: " + id + "\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: min.insync.replicas=2\n"
	settles(t, ordersHead+partitionLines("learn.09.orders", replicas, 0), "--bootstrap-server", b1, "--describe", "--topic", "learn.09.orders")
	settles(t, "Topic: placed\tTopicId: "+topicID(t, b1, "placed")+"\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: \n"+
		"\tTopic: placed\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\n"+
		"\tTopic: placed\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3,1\n"+
		"\tTopic: placed\tPartition: 2\tLeader: 3\tReplicas: 3,1,2\tIsr: 3,1,2\n",
		"--bootstrap-server", b1, "--describe", "--topic", "placed")
	settles(t, "learn.09.orders\nplaced\nsolo\n", "--bootstrap-server", b1, "--list")
	// Nothing is under-replicated yet.
	settles(t, "", "--bootstrap-server", b1, "--describe", "--under-replicated-partitions")

	// The note's 9.2 to 9.5: broker 1 stopped, asked through broker 2.
	if err := c.StopBroker(1); err != nil {
		t.Fatal(err)
	}
	orders := partitionLines("learn.09.orders", replicas, 1)
	placed := "\tTopic: placed\tPartition: 0\tLeader: 2\tReplicas: 1,2,3\tIsr: 2,3\n" +
		"\tTopic: placed\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3\n" +
		"\tTopic: placed\tPartition: 2\tLeader: 3\tReplicas: 3,1,2\tIsr: 3,2\n"
	solo := "\tTopic: solo\tPartition: 0\tLeader: none\tReplicas: 1\tIsr: 1\n"
	settles(t, ordersHead+orders, "--bootstrap-server", b2, "--describe", "--topic", "learn.09.orders")
	settles(t, orders+placed, "--bootstrap-server", b2, "--describe", "--under-replicated-partitions")
	// min.insync.replicas is 2 for learn.09.orders (two in sync: at the
	// minimum) and the default 1 for the others: solo's one replica is its
	// minimum, placed's two are above it.
	settles(t, orders+solo, "--bootstrap-server", b2, "--describe", "--at-min-isr-partitions")
	settles(t, solo, "--bootstrap-server", b2, "--describe", "--unavailable-partitions")
	settles(t, solo, "--bootstrap-server", b2, "--describe", "--under-min-isr-partitions")
	// A regular expression and a comma list select topics as Kafka's do.
	settles(t, placed+solo, "--bootstrap-server", b2, "--describe", "--topic", "pla.*,solo", "--under-min-isr-partitions", "--under-replicated-partitions")
	settles(t, ordersHead, "--bootstrap-server", b2, "--describe", "--topics-with-overrides")
}

// partitionLines are Kafka's describe lines of a topic whose partitions
// have the given replicas, each led by its first live replica, with broker
// stopped (0: none) out of the ISR.
func partitionLines(topic string, replicas [][]int32, stopped int32) string {
	var b strings.Builder
	for p, rs := range replicas {
		var isr []string
		for _, r := range rs {
			if r != stopped {
				isr = append(isr, strconv.Itoa(int(r)))
			}
		}
		all := make([]string, len(rs))
		for i, r := range rs {
			all[i] = strconv.Itoa(int(r))
		}
		fmt.Fprintf(&b, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s\n", topic, p, isr[0], strings.Join(all, ","), strings.Join(isr, ","))
	}
	return b.String()
}

// --list, --alter --partitions and --delete, and the refusals Kafka's tool
// prints for an unknown topic and an existing one.
func TestTopicsScriptListAlterDelete(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	b := strings.Join(c.KafkaAddrs(), ",")

	if code, out, errOut := runTopics("--bootstrap-server", b, "--create", "--topic", "grow", "--partitions", "1", "--replication-factor", "2"); code != 0 || out != "Created topic grow.\n" {
		t.Fatalf("create: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	settles(t, "grow\n", "--bootstrap-server", b, "--list")

	code, out, _ := runTopics("--bootstrap-server", b, "--create", "--topic", "grow", "--partitions", "1")
	if code != 1 || !strings.HasPrefix(out, "Error while executing topic command : ") || !strings.Contains(out, "grow") {
		t.Fatalf("creating an existing topic: exit %d, stdout %q", code, out)
	}
	if code, out, _ := runTopics("--bootstrap-server", b, "--create", "--topic", "grow", "--partitions", "1", "--if-not-exists"); code != 0 || out != "" {
		t.Fatalf("--if-not-exists on an existing topic: exit %d, stdout %q", code, out)
	}

	if code, out, errOut := runTopics("--bootstrap-server", b, "--alter", "--topic", "grow", "--partitions", "3"); code != 0 || out != "" {
		t.Fatalf("alter: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, out, _ := runTopics("--bootstrap-server", b, "--describe", "--topic", "grow")
		if strings.Contains(out, "\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: \n") && strings.Count(out, "\tTopic: grow\tPartition: ") == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe after --alter --partitions 3:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	code, out, _ = runTopics("--bootstrap-server", b, "--alter", "--topic", "grow", "--partitions", "2")
	if code != 1 || !strings.HasPrefix(out, "Error while executing topic command : ") {
		t.Fatalf("shrinking: exit %d, stdout %q", code, out)
	}

	if code, out, errOut := runTopics("--bootstrap-server", b, "--delete", "--topic", "grow"); code != 0 || out != "" {
		t.Fatalf("delete: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	settles(t, "\n", "--bootstrap-server", b, "--list")

	for _, action := range []string{"--describe", "--delete", "--alter"} {
		args := []string{"--bootstrap-server", b, action, "--topic", "nope"}
		if action == "--alter" {
			args = append(args, "--partitions", "2")
		}
		code, out, _ := runTopics(args...)
		if want := "Error while executing topic command : Topic 'nope' does not exist as expected\n"; code != 1 || out != want {
			t.Errorf("%s of an unknown topic: exit %d, stdout %q, want exit 1 and %q", action, code, out, want)
		}
		if code, out, _ := runTopics(append(args, "--if-exists")...); code != 0 || out != "" {
			t.Errorf("%s --if-exists of an unknown topic: exit %d, stdout %q, want exit 0 and nothing", action, code, out)
		}
	}
}

// Kafka's refusals of bad command lines, before any connection.
func TestTopicsScriptRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantStderr string
		usage      bool
	}{
		{nil, "Create, delete, describe, or change a topic.\n", true},
		{[]string{"--describe", "--topic", "t"}, "--bootstrap-server must be specified\n", false},
		{[]string{"--bootstrap-server", "x:1", "--topic", "t"}, "Command must include exactly one action: --list, --describe, --create, --alter or --delete\n", true},
		{[]string{"--bootstrap-server", "x:1", "--list", "--describe"}, "Command must include exactly one action", true},
		{[]string{"--bootstrap-server", "x:1", "--create", "--partitions", "1"}, "Missing required argument \"[topic]\"\n", true},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--config", "a=b"}, "Option \"[config]\" can't be used with option \"[describe]\"\n", true},
		{[]string{"--bootstrap-server", "x:1", "--create", "--topic", "t", "--replica-assignment", "1", "--partitions", "1"}, "Option \"[replica-assignment]\" can't be used with option \"[partitions]\"\n", true},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--under-replicated-partitions", "--topics-with-overrides"}, "Option \"[under-replicated-partitions]\" can't be used with option \"[topics-with-overrides]\"\n", true},
		{[]string{"--bootstrap-server", "x:1", "--list", "--at-min-isr-partitions"}, "Option \"[at-min-isr-partitions]\" can't be used with option \"[list]\"\n", true},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--topic", "t"}, "Missing required argument \"[partitions]\"\n", true},
		{[]string{"--bootstrap-server", "x:1", "--list", "--frobnicate"}, "frobnicate is not a recognized option\n", false},
		{[]string{"--bootstrap-server"}, "Option bootstrap-server requires an argument\n", false},
	} {
		code, out, errOut := runTopics(tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, strings.TrimSuffix(tc.wantStderr, "\n")) ||
			(strings.HasSuffix(tc.wantStderr, "\n") && !strings.HasPrefix(errOut, tc.wantStderr)) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and stderr starting %q", tc.args, code, out, errOut, tc.wantStderr)
			continue
		}
		if hasUsage := strings.Contains(errOut, "--bootstrap-server string"); hasUsage != tc.usage {
			t.Errorf("%q: usage printed %v, want %v", tc.args, hasUsage, tc.usage)
		}
	}
	// Checked once connected, printed as Kafka's tool prints a failed command.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--create", "--topic", "t", "--partitions", "0"}, "The partitions must be greater than 0"},
		{[]string{"--create", "--topic", "t", "--replication-factor", "40000"}, "The replication factor must be between 1 and 32767 inclusive"},
		{[]string{"--create", "--topic", "t", "--config", "retention.ms"}, `requirement failed: Invalid topic config: all configs to be added must be in the format "key=val".`},
		{[]string{"--create", "--topic", "t", "--replica-assignment", "1:1"}, "Partition replica lists may not contain duplicate entries: 1"},
		{[]string{"--create", "--topic", "t", "--replica-assignment", "1:2,3"}, "Partition 1 has different replication factor: [3]"},
		{[]string{"--create", "--topic", "t", "--partitions", "many"}, "Cannot parse argument 'many' of option partitions"},
	} {
		code, out, _ := runTopics(append([]string{"--bootstrap-server", "127.0.0.1:1"}, tc.args...)...)
		if want := "Error while executing topic command : " + tc.want + "\n"; code != 1 || out != want {
			t.Errorf("%q: exit %d, stdout %q, want exit 1 and %q", tc.args, code, out, want)
		}
	}
}

// A bootstrap server nobody listens on is an error naming it, not a hang.
func TestTopicsScriptUnreachableBootstrap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code, out, _ := runTopics("--bootstrap-server", addr, "--list")
	if code != 1 || !strings.HasPrefix(out, "Error while executing topic command : no bootstrap server answered ("+addr+")") {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
}

// --command-config with security.protocol=SSL and PEM stores reaches a
// listener that wants mutual TLS; without it the same command fails.
func TestTopicsScriptOverMutualTLS(t *testing.T) {
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
	if err := os.WriteFile(props, []byte("# the listener's CA and the admin certificate\n"+
		"security.protocol=SSL\n"+
		"ssl.truststore.type=PEM\n"+
		"ssl.truststore.location="+pki.CAPath(c.PKIDir)+"\n"+
		"ssl.keystore.type = PEM\n"+
		"ssl.keystore.location: "+keystore+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The same stores inline, continued over lines as Kafka's docs write
	// them.
	ca, err := os.ReadFile(pki.CAPath(c.PKIDir))
	if err != nil {
		t.Fatal(err)
	}
	continued := func(pem []byte) string {
		return strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", " \\\n  ")
	}
	inline := filepath.Join(dir, "inline.properties")
	if err := os.WriteFile(inline, []byte("security.protocol=SSL\n"+
		"ssl.truststore.type=PEM\n"+
		"ssl.truststore.certificates="+continued(ca)+"\n"+
		"ssl.keystore.type=PEM\n"+
		"ssl.keystore.certificate.chain="+continued(cert)+"\n"+
		"ssl.keystore.key="+continued(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := c.KafkaAddrs()[0]
	if code, out, errOut := runTopics("--bootstrap-server", b, "--command-config", inline, "--list"); code != 0 {
		t.Fatalf("--list with inline PEM: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runTopics("--bootstrap-server", b, "--command-config", props, "--create", "--topic", "secure", "--partitions", "1", "--replication-factor", "3"); code != 0 || out != "Created topic secure.\n" {
		t.Fatalf("create over TLS: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	settles(t, "secure\n", "--bootstrap-server", b, "--command-config", props, "--list")
	if code, out, _ := runTopics("--bootstrap-server", b, "--list"); code != 1 || !strings.HasPrefix(out, "Error while executing topic command : ") {
		t.Fatalf("plain text against the TLS listener: exit %d, stdout %q", code, out)
	}
}

// --command-config with security.protocol=SASL_PLAINTEXT logs in with the
// user name and password of sasl.jaas.config, as Kafka's scripts do.
func TestTopicsScriptOverSASL(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Adjust: func(cfg *broker.Config) {
		l, err := loopback.Listen()
		if err != nil {
			t.Fatal(err)
		}
		cfg.KafkaListen, cfg.KafkaListener = "", nil
		cfg.KafkaListeners = config.StringList{"SASL_PLAINTEXT://" + l.Addr().String()}
		cfg.KafkaNamedListeners = map[string]net.Listener{"SASL_PLAINTEXT": l}
	}})
	salt := scram.NewSalt()
	salted, err := scram.SaltPassword(scram.SHA512, "pa ss", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Admin().AlterUserScramCredentials(context.Background(), &adminv1.AlterUserScramCredentialsRequest{Upsertions: []*adminv1.ScramCredentialUpsertion{
		{User: "ops", Mechanism: scram.SHA512, Iterations: 4096, Salt: salt, SaltedPassword: salted}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("creating the user: %v %v", resp, err)
	}
	props := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="ops" password="pa ss";`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := c.BrokerConfig(1).KafkaListeners[0][len("SASL_PLAINTEXT://"):]
	// The brokers learn the user from the controller's next push.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errOut := runTopics("--bootstrap-server", b, "--command-config", props, "--create", "--topic", "logged-in", "--partitions", "1", "--replication-factor", "3")
		if code == 0 && out == "Created topic logged-in.\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create over SASL: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	settles(t, "logged-in\n", "--bootstrap-server", b, "--command-config", props, "--list")
	if code, out, _ := runTopics("--bootstrap-server", b, "--list"); code != 1 || !strings.HasPrefix(out, "Error while executing topic command : ") {
		t.Fatalf("without a login: exit %d, stdout %q", code, out)
	}
}

func TestCommandConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ props, want string }{
		{"security.protocol=SASL_SSL\n", "sasl.mechanism=GSSAPI: tidemark's SASL listeners serve PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512"},
		{"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n", "sasl.jaas.config: needs username"},
		{"security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n", "ssl.truststore.type=JKS: only PEM stores are supported"},
		{"security.protocol=SSL\nssl.truststore.location=" + filepath.Join(dir, "missing.pem") + "\n", "ssl.truststore.location: open "},
		{"security.protocol=TLS\n", "Invalid value TLS for configuration security.protocol"},
	} {
		path := filepath.Join(dir, "client.properties")
		if err := os.WriteFile(path, []byte(tc.props), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, _ := runTopics("--bootstrap-server", "127.0.0.1:1", "--command-config", path, "--list")
		if code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, want %q", tc.props, code, out, tc.want)
		}
	}
}
