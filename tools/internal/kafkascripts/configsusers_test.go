package kafkascripts

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/scram"
)

// kafka-configs.sh --entity-type users creates, describes and deletes a
// user's SCRAM credentials (salted by the tool) with Kafka's lines; the
// credentials it creates log in with franz-go's SCRAM over SASL_PLAINTEXT,
// and a deleted one is refused.
func TestConfigsScriptUsersSCRAMCredentials(t *testing.T) {
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
	salted, err := scram.SaltPassword(scram.SHA512, "ops-secret", salt, 4096)
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
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="ops" password="ops-secret";`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for id := int32(1); id <= 3; id++ {
		addrs = append(addrs, c.BrokerConfig(id).KafkaListeners[0][len("SASL_PLAINTEXT://"):])
	}
	base := []string{"--bootstrap-server", addrs[0], "--command-config", props, "--entity-type", "users"}
	alice := append(base[:len(base):len(base)], "--entity-name", "alice")
	loginsWith := func(m sasl.Mechanism) (n int, refused bool) {
		refused = true
		for _, addr := range addrs {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m), kgo.RetryTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = cl.Ping(ctx)
			cancel()
			cl.Close()
			if err == nil {
				n++
			}
			refused = refused && errors.Is(err, fkerr.SaslAuthenticationFailed)
		}
		return n, refused
	}
	// ops logs in once the brokers have the controller's push.
	ops := kscram.Auth{User: "ops", Pass: "ops-secret"}.AsSha512Mechanism()
	c.WaitFor(30*time.Second, "ops logging in on every broker", func() bool {
		n, _ := loginsWith(ops)
		return n == len(addrs)
	})
	step := func(wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		code, out, errOut := runConfigs(args...)
		if code != wantCode || out != wantOut || errOut != wantErr {
			t.Fatalf("kafka-configs.sh %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q", args, code, out, errOut, wantCode, wantOut, wantErr)
		}
	}
	step(0, "", "", append(alice, "--describe")...)
	step(0, "Completed updating config for user alice.\n", "",
		append(alice, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]")...)
	step(0, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n", "", append(alice, "--describe")...)
	// Every user with credentials when none is named.
	code, out, _ := runConfigs(append(base, "--describe")...)
	if code != 0 || !strings.Contains(out, "SCRAM credential configs for user-principal 'ops' are SCRAM-SHA-512=iterations=4096\n") ||
		!strings.Contains(out, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n") {
		t.Fatalf("describe every user: exit %d, stdout %q", code, out)
	}
	// Kafka's refusals, before anything is sent.
	step(1, "", "Iterations 1000 is less than the minimum 4096 required for SCRAM-SHA-256\n",
		append(alice, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=1000,password=x]")...)
	step(1, "", "Invalid credential property SCRAM_SHA_512=pass\n", append(alice, "--alter", "--add-config", "SCRAM-SHA-512=pass")...)
	step(1, "", "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. Unexpected config names: Set(retention.ms)\n",
		append(alice, "--alter", "--add-config", "retention.ms=1")...)
	step(1, "", "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using --bootstrap-server.\n",
		append(base, "--entity-default", "--alter", "--delete-config", "SCRAM-SHA-256")...)

	sha256 := kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()
	sha512 := kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
	c.WaitFor(30*time.Second, "alice logging in with both mechanisms on every broker", func() bool {
		n256, _ := loginsWith(sha256)
		n512, _ := loginsWith(sha512)
		return n256 == len(addrs) && n512 == len(addrs)
	})

	step(0, "Completed updating config for user alice.\n", "", append(alice, "--alter", "--delete-config", "SCRAM-SHA-512")...)
	step(0, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n", "", append(alice, "--describe")...)
	c.WaitFor(30*time.Second, "alice's SCRAM-SHA-512 refused on every broker", func() bool {
		_, refused := loginsWith(sha512)
		return refused
	})
	if n, _ := loginsWith(sha256); n != len(addrs) {
		t.Fatalf("alice's SCRAM-SHA-256 logs in on %d brokers of %d after SCRAM-SHA-512 was deleted", n, len(addrs))
	}
	step(0, "Completed updating config for user alice.\n", "", append(alice, "--alter", "--delete-config", "SCRAM-SHA-256")...)
	step(0, "", "", append(alice, "--describe")...)
	c.WaitFor(30*time.Second, "alice refused on every broker", func() bool {
		_, refused := loginsWith(sha256)
		return refused
	})
}
