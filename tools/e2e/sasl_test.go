package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"tidemark.io/services/platform/pki"
	tmscram "tidemark.io/services/platform/scram"
	"tidemark.io/services/platform/testenv"
)

// broker-1's SASL_SSL and SSL Kafka listeners on the stack under test
// (BROKER_1_KAFKA_SASL_PORT, BROKER_1_KAFKA_PORT).
var (
	saslPort = stackPorts["BROKER_1_KAFKA_SASL_PORT"]
	sslPort  = stackPorts["BROKER_1_KAFKA_PORT"]
)

// execIn runs argv in a running service's container (docker exec -i) with
// stdin, and returns its stdout and stderr apart.
func (s *stack) execIn(timeout time.Duration, svc, stdin string, argv ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append([]string{"exec", "-i", s.id(svc)}, argv...)...)
	cmd.Env, cmd.WaitDelay = s.env, 5*time.Second
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s in %s: no answer within %v", strings.Join(argv, " "), svc, timeout)
	} else if err != nil {
		err = fmt.Errorf("%s in %s: %w\n%s%s", strings.Join(argv, " "), svc, err, out.String(), errb.String())
	}
	return out.String(), errb.String(), err
}

// adminProperties is a --command-config for the SSL listener that presents
// the admin's certificate inline (PEM values with \n escapes), so a broker's
// container, which holds only its own key, runs a script as admin without
// the admin's key ever being written into it.
func adminProperties(t *testing.T, s *stack) string {
	t.Helper()
	inline := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", `\n`)
	}
	return "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/pki/ca.pem\nssl.keystore.type=PEM\n" +
		"ssl.keystore.certificate.chain=" + inline(pki.CertPath(s.pkiDir, "admin")) + "\n" +
		"ssl.keystore.key=" + inline(pki.KeyPath(s.pkiDir, "admin")) + "\n"
}

// userProperties is a --command-config for the SASL_SSL listener, as a
// user with a password (SCRAM-SHA-512), trusting the stack's CA.
func userProperties(user, password string) string {
	return "security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location=/pki/ca.pem\nsasl.mechanism=SCRAM-SHA-512\n" +
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="` + user + `" password="` + password + "\";\n"
}

// saslClient is a franz-go client on the host logging in as user over
// SASL_SSL: it trusts the stack's CA, presents no certificate, and dials
// the brokers' advertised names on 127.0.0.1 (dialStack) while checking
// the certificate against the name.
func saslClient(t *testing.T, s *stack, user, password string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	ca, err := os.ReadFile(pki.CAPath(s.pkiDir))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("the stack's ca.pem holds no certificate")
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		raw, err := dialStack(ctx, addr)
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12})
		if err := conn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return conn, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers("broker-1:" + saslPort),
		kgo.Dialer(dial),
		kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()),
		kgo.RetryTimeout(20 * time.Second),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestStackSASLUsersAndACLs plays a Kafka user's first day on the stack's
// SASL_SSL listener: alice created in a one-off container of the pki
// service with `tidemark users set-scram` as README says, bob with Kafka's
// AlterUserScramCredentials sent as admin; a topic and
// ACLs (Write and Read on the topic, Read on two groups for alice) made
// with kafka-topics.sh and kafka-acls.sh inside broker-1's container as
// admin over SSL; from the host, alice logs in with SCRAM-SHA-512 over TLS
// trusting the stack's CA, produces acks=all and consumes in a group;
// bob, a user without ACLs, is refused with TOPIC_AUTHORIZATION_FAILED;
// alice with a wrong password with SASL_AUTHENTICATION_FAILED. Then, as
// alice over SASL_SSL inside the container: kafka-consumer-groups.sh
// --describe shows the group's committed offsets at the log end,
// kafka-console-consumer.sh --max-messages prints what was produced, and
// kafka-get-offsets.sh the end offsets; last README's kcat line.
func TestStackSASLUsersAndACLs(t *testing.T) {
	s := needSecure(t)
	tl := newTimeline(t, "SASL_SSL: SCRAM users, ACLs and Kafka's scripts")
	const (
		topic     = "e2e-sasl-orders"
		group     = "e2e-sasl-readers"
		console   = "e2e-sasl-console"
		alicePass = "wonderland"
		bobPass   = "builder"
		records   = 12
	)
	bootstrapSSL := "broker-1:" + sslPort
	bootstrapSASL := "broker-1:" + saslPort

	// alice as README's first-user command: the pki service's one-off
	// container holds admin's certificate; the password comes on stdin.
	{
		user, pass := "alice", alicePass
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		full := append(slices.Clone(s.compose[1:]), "-p", project, "run", "--rm", "--no-deps", "-T",
			"--entrypoint", "/usr/local/bin/tidemark", "pki",
			"--tls.ca", "/pki/ca.pem", "--tls.cert", "/pki/admin.pem", "--tls.key", "/pki/admin-key.pem",
			"--bootstrap-server", brokerAddrs[0], "--controller", strings.Join(controllerAddrs, ","),
			"users", "set-scram", user, "--password-file", "/dev/stdin")
		cmd := exec.CommandContext(ctx, s.compose[0], full...)
		cmd.Env, cmd.Stdin, cmd.WaitDelay = s.env, strings.NewReader(pass+"\n"), 5*time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "Set SCRAM-SHA-512 credential of user "+user+".") {
			t.Fatalf("users set-scram %s: %v\n%s", user, err, out)
		}
	}
	tl.mark("tidemark users set-scram alice (compose run pki)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addUserWithKafkaAPI(ctx, t, s, "bob", bobPass)
	tl.mark("bob added with AlterUserScramCredentials as admin over SSL")

	admin := adminProperties(t, s)
	script := func(config, name string, args ...string) (string, string, error) {
		return s.execIn(time.Minute, "broker-1", config, append([]string{"/opt/kafka/bin/" + name}, args...)...)
	}
	out, errOut, err := script(admin, "kafka-topics.sh", "--bootstrap-server", bootstrapSSL, "--command-config", "/dev/stdin",
		"--create", "--topic", topic, "--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	if err != nil || out != "Created topic "+topic+".\n" {
		t.Fatalf("kafka-topics.sh --create: %v\n%s%s", err, out, errOut)
	}
	for _, args := range [][]string{
		{"--topic", topic, "--operation", "Write", "--operation", "Read"},
		{"--group", group, "--group", console, "--operation", "Read"},
	} {
		out, errOut, err := script(admin, "kafka-acls.sh", append([]string{"--bootstrap-server", bootstrapSSL, "--command-config", "/dev/stdin",
			"--add", "--allow-principal", "User:alice"}, args...)...)
		if err != nil || !strings.Contains(out, "principal=User:alice") {
			t.Fatalf("kafka-acls.sh --add %v: %v\n%s%s", args, err, out, errOut)
		}
	}
	out, _, err = script(admin, "kafka-acls.sh", "--bootstrap-server", bootstrapSSL, "--command-config", "/dev/stdin", "--list", "--principal", "User:alice")
	for _, want := range []string{
		"(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)",
		"(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
		"resourceType=GROUP, name=" + group + ", patternType=LITERAL",
	} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("kafka-acls.sh --list lacks %q: %v\n%s", want, err, out)
		}
	}
	tl.mark("kafka-topics.sh --create and kafka-acls.sh --add in broker-1 as admin over SSL")

	// alice produces acks=all and reads everything back in a group.
	alice := saslClient(t, s, "alice", alicePass, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(lctx, alice)
	lcancel()
	if err != nil {
		t.Fatalf("alice logs in over SASL_SSL at %s: %v", bootstrapSASL, err)
	}
	var want []string
	for i := range records {
		v := fmt.Sprintf("order-%02d", i)
		want = append(want, v)
		if err := alice.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("alice produces %s over SASL_SSL: %v", v, err)
		}
	}
	tl.mark("alice produced %d records acks=all over SASL_SSL", records)
	reader := saslClient(t, s, "alice", alicePass, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	var got []string
	for len(got) < records {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("alice reads %d of %d records in group %s", len(got), records, group)
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("alice consumes in group %s: %v", group, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if err := reader.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits group %s: %v", group, err)
	}
	reader.Close()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("alice read %v, want %v", got, want)
	}
	tl.mark("alice consumed the %d records in group %s and committed", records, group)

	// bob logs in but has no ACL on the topic.
	bob := saslClient(t, s, "bob", bobPass, kgo.DisableIdempotentWrite())
	err = bob.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("bob")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produces to %s: %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
	}
	tl.mark("bob refused: %v", err)

	// A wrong password does not log in.
	wrong := saslClient(t, s, "alice", "not-"+alicePass)
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, wrong)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("alice with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	tl.mark("a wrong password refused: %v", err)

	// Kafka's scripts as alice over SASL_SSL in broker-1's container.
	asAlice := userProperties("alice", alicePass)
	out, errOut, err = script(asAlice, "kafka-consumer-groups.sh", "--bootstrap-server", bootstrapSASL, "--command-config", "/dev/stdin", "--describe", "--group", group)
	if err != nil {
		t.Fatalf("kafka-consumer-groups.sh --describe: %v\n%s%s", err, out, errOut)
	}
	checkGroupDescribe(t, out, group, topic, records)
	if !strings.Contains(errOut, "Consumer group '"+group+"' has no active members.") {
		t.Fatalf("kafka-consumer-groups.sh --describe: stderr %q lacks the no-active-members notice", errOut)
	}
	tl.mark("kafka-consumer-groups.sh --describe as alice:\n%s", strings.TrimSpace(out))

	out, errOut, err = script(asAlice, "kafka-console-consumer.sh", "--bootstrap-server", bootstrapSASL, "--consumer.config", "/dev/stdin",
		"--topic", topic, "--group", console, "--from-beginning", "--max-messages", strconv.Itoa(records))
	if err != nil {
		t.Fatalf("kafka-console-consumer.sh: %v\n%s%s", err, out, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(lines)
	if !slices.Equal(lines, want) || !strings.Contains(errOut, fmt.Sprintf("Processed a total of %d messages", records)) {
		t.Fatalf("kafka-console-consumer.sh --max-messages %d printed %q (stderr %q), want %v", records, lines, errOut, want)
	}
	tl.mark("kafka-console-consumer.sh --max-messages %d as alice: %d lines; %s", records, len(lines), strings.TrimSpace(errOut))

	out, errOut, err = script(asAlice, "kafka-get-offsets.sh", "--bootstrap-server", bootstrapSASL, "--command-config", "/dev/stdin", "--topic", topic)
	if err != nil {
		t.Fatalf("kafka-get-offsets.sh: %v\n%s%s", err, out, errOut)
	}
	end := 0
	offsetLines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for p, line := range offsetLines {
		n, err := strconv.Atoi(strings.TrimPrefix(line, fmt.Sprintf("%s:%d:", topic, p)))
		if err != nil {
			t.Fatalf("kafka-get-offsets.sh line %q: want %s:%d:OFFSET\n%s", line, topic, p, out)
		}
		end += n
	}
	if len(offsetLines) != 3 || end != records {
		t.Fatalf("kafka-get-offsets.sh: %d lines ending at %d in all, want 3 and %d\n%s", len(offsetLines), end, records, out)
	}
	tl.mark("kafka-get-offsets.sh as alice:\n%s", strings.TrimSpace(out))

	// README's kcat line: librdkafka logs in as alice over SASL_SSL,
	// checking the certificate (valid for 127.0.0.1 too) against the CA.
	t.Run("kcat", func(t *testing.T) {
		kcat := testenv.RequireCommand(t, "kcat", "apt-get install kcat", "kcat")
		out, err := s.run(time.Minute, kcat, "-b", "127.0.0.1:"+saslPort, "-X", "security.protocol=SASL_SSL",
			"-X", "ssl.ca.location="+pki.CAPath(s.pkiDir), "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password="+alicePass, "-L", "-t", topic)
		for _, want := range []string{"broker 1 at broker-1:" + saslPort, `topic "` + topic + `" with 3 partitions:`} {
			if err != nil || !strings.Contains(out, want) {
				t.Fatalf("kcat -L over SASL_SSL lacks %q: %v\n%s", want, err, out)
			}
		}
	})
}

// checkGroupDescribe checks kafka-consumer-groups.sh --describe of a group
// with no member left: a row per partition of topic the group committed
// (GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID
// ...; Kafka lists no other partition of a group without members), each
// at the log end with lag 0 and no consumer, the offsets adding up to
// records.
func checkGroupDescribe(t *testing.T, out, group, topic string, records int) {
	t.Helper()
	committed, rows := 0, 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[0] != group {
			continue
		}
		cur, err := strconv.Atoi(f[3])
		if f[1] != topic || err != nil || f[3] != f[4] || f[5] != "0" || f[6] != "-" {
			t.Fatalf("kafka-consumer-groups.sh --describe row %q: want %s committed at its log end, lag 0, no consumer\n%s", line, topic, out)
		}
		committed += cur
		rows++
	}
	if rows == 0 || committed != records {
		t.Fatalf("kafka-consumer-groups.sh --describe: %d rows committing %d records, want %d\n%s", rows, committed, records, out)
	}
}

// addUserWithKafkaAPI creates a SCRAM-SHA-512 user with Kafka's
// AlterUserScramCredentials, sent as admin (its certificate) to the SSL
// listener from the host; the salted password is computed here, as
// Kafka's clients do.
func addUserWithKafkaAPI(ctx context.Context, t *testing.T, s *stack, user, password string) {
	t.Helper()
	tc, err := s.clientTLS("admin")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("broker-1:"+sslPort), kgo.RetryTimeout(20*time.Second),
		kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := dialStack(ctx, addr)
			if err != nil {
				return nil, err
			}
			cfg := tc.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
			return tls.Client(raw, cfg), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const iterations = 4096
	salt := tmscram.NewSalt()
	salted, err := tmscram.SaltPassword(tmscram.SHA512, password, salt, iterations)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = user, 2, iterations, salt, salted // 2: SCRAM-SHA-512
	req.Upsertions = append(req.Upsertions, up)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("AlterUserScramCredentials %s: %v", user, err)
	}
	if len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("AlterUserScramCredentials %s: %+v", user, resp.Results)
	}
}
