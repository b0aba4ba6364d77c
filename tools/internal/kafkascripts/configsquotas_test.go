package kafkascripts

import (
	"sort"
	"strings"
	"testing"

	"tidemark.io/services/clustertest"
)

// kafka-configs.sh --entity-type users|clients adds, describes and deletes
// client quotas (named and --entity-default entities, users and clients
// together) with Kafka's lines; the broker's refusals come back as
// Kafka's tool prints them.
func TestConfigsScriptClientQuotas(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Kafka: true})
	b := c.KafkaAddrs()[0]
	step := func(wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		all := append([]string{"--bootstrap-server", b}, args...)
		code, out, errOut := runConfigs(all...)
		wantErr = strings.ReplaceAll(wantErr, "ARGS", strings.Join(all, " "))
		if code != wantCode || out != wantOut || errOut != wantErr {
			t.Fatalf("kafka-configs.sh %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q", args, code, out, errOut, wantCode, wantOut, wantErr)
		}
	}
	step(0, "Completed updating config for client app.\n", "", "--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
	step(0, "Completed updating default config for users in the cluster.\n", "", "--entity-type", "users", "--entity-default", "--alter", "--add-config", "producer_byte_rate=10000000")
	// Kafka's line names the first entity type given only.
	step(0, "Completed updating config for user alice.\n", "",
		"--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default", "--alter", "--add-config", "consumer_byte_rate=500")
	step(0, "Quota configs for client-id 'app' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n", "", "--entity-type", "clients", "--entity-name", "app", "--describe")
	step(0, "Quota configs for the default user-principal are producer_byte_rate=1.0E7\n", "", "--entity-type", "users", "--entity-default", "--describe")
	step(0, "Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=500.0\n", "",
		"--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default", "--describe")
	// Every user entity (without a client part), then the users' SCRAM
	// credentials (none here).
	step(0, "Quota configs for the default user-principal are producer_byte_rate=1.0E7\n", "", "--entity-type", "users", "--describe")

	step(1, "", "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: Set(retention.ms)\n",
		"--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config", "retention.ms=1")
	step(1, "", "Cannot parse quota configuration value for producer_byte_rate: fast\n",
		"--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config", "producer_byte_rate=fast")
	step(1, "", "Error while executing config command with args 'ARGS'\n"+
		"java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.InvalidRequestException: Quota request_percentage is not supported: tidemark enforces producer_byte_rate and consumer_byte_rate only\n",
		"--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config", "request_percentage=50")
	step(1, "", "Error while executing config command with args 'ARGS'\n"+
		"java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.InvalidRequestException: Quota producer_byte_rate must be a positive number, not -1\n",
		"--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config", "producer_byte_rate=-1")

	step(0, "Completed updating config for client app.\n", "", "--entity-type", "clients", "--entity-name", "app", "--alter", "--delete-config", "producer_byte_rate")
	step(0, "Quota configs for client-id 'app' are consumer_byte_rate=2048.0\n", "", "--entity-type", "clients", "--entity-name", "app", "--describe")
	step(0, "Completed updating config for client app.\n", "", "--entity-type", "clients", "--entity-name", "app", "--alter", "--delete-config", "consumer_byte_rate")
	step(0, "", "", "--entity-type", "clients", "--entity-name", "app", "--describe")
}

// The (user, client-id) entity through the shortcuts and the --entity-*
// pairs, every entity of a type described when none is named, a user's
// quotas and SCRAM credentials described together, and a key to delete
// that is not set refused as Kafka's tool does.
func TestConfigsScriptUserClientQuotasAndShortcuts(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Kafka: true})
	b := c.KafkaAddrs()[0]
	step := func(wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		code, out, errOut := runConfigs(append([]string{"--bootstrap-server", b}, args...)...)
		if code != wantCode || out != wantOut || errOut != wantErr {
			t.Fatalf("kafka-configs.sh %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q", args, code, out, errOut, wantCode, wantOut, wantErr)
		}
	}
	// Kafka adds --client before --user, so the line names the client.
	step(0, "Completed updating config for client app.\n", "", "--user", "alice", "--client", "app", "--alter", "--add-config", "producer_byte_rate=1024")
	step(0, "Completed updating config for user alice.\n", "", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config", "consumer_byte_rate=2048")
	step(0, "Completed updating config for user bob.\n", "", "--user", "bob", "--client-defaults", "--alter", "--add-config", "consumer_byte_rate=100")
	step(0, "Completed updating config for user alice.\n", "", "--user", "alice", "--alter", "--add-config", "producer_byte_rate=4096")
	step(0, "Completed updating default config for clients in the cluster.\n", "", "--client-defaults", "--alter", "--add-config", "producer_byte_rate=512")
	step(0, "Completed updating config for client web.\n", "", "--client", "web", "--alter", "--add-config", "producer_byte_rate=256")
	step(0, "Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n", "", "--user", "alice", "--client", "app", "--describe")
	step(0, "Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n", "",
		"--entity-type", "clients", "--entity-name", "app", "--entity-type", "users", "--entity-name", "alice", "--describe")
	step(0, "Quota configs for user-principal 'bob', the default client-id are consumer_byte_rate=100.0\n", "", "--user", "bob", "--client-defaults", "--describe")
	step(0, "Quota configs for the default client-id are producer_byte_rate=512.0\n", "", "--client-defaults", "--describe")

	// Without names: every entity of exactly those types.
	lines := func(args ...string) []string {
		t.Helper()
		code, out, errOut := runConfigs(append([]string{"--bootstrap-server", b}, args...)...)
		if code != 0 || errOut != "" {
			t.Fatalf("kafka-configs.sh %q: exit %d, stderr %q", args, code, errOut)
		}
		got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		sort.Strings(got)
		return got
	}
	want := func(args []string, wantLines ...string) {
		t.Helper()
		sort.Strings(wantLines)
		if got := lines(args...); strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
			t.Fatalf("kafka-configs.sh %q: lines %q, want %q", args, got, wantLines)
		}
	}
	want([]string{"--entity-type", "users", "--entity-type", "clients", "--describe"},
		"Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0",
		"Quota configs for user-principal 'bob', the default client-id are consumer_byte_rate=100.0")
	want([]string{"--entity-type", "clients", "--describe"},
		"Quota configs for the default client-id are producer_byte_rate=512.0",
		"Quota configs for client-id 'web' are producer_byte_rate=256.0")

	// A user's quotas, then its SCRAM credentials, as Kafka prints them;
	// every user's when none is named.
	step(0, "Completed updating config for user alice.\n", "", "--user", "alice", "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
	step(0, "Completed updating config for user carol.\n", "", "--user", "carol", "--alter", "--add-config", "SCRAM-SHA-512=[password=carol-secret]")
	step(0, "Quota configs for user-principal 'alice' are producer_byte_rate=4096.0\n"+
		"SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n", "", "--user", "alice", "--describe")
	want([]string{"--entity-type", "users", "--describe"},
		"Quota configs for user-principal 'alice' are producer_byte_rate=4096.0",
		"SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192",
		"SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096")
	// The default user has quotas only.
	step(0, "", "", "--user-defaults", "--describe")

	// Deleting a key the entity does not have is refused before anything
	// changes; deleting the rest removes the entity.
	step(1, "", "Invalid config(s): request_percentage\n", "--user", "alice", "--client", "app", "--alter", "--delete-config", "producer_byte_rate,request_percentage")
	step(0, "Completed updating config for client app.\n", "", "--user", "alice", "--client", "app", "--alter", "--delete-config", "producer_byte_rate,consumer_byte_rate")
	step(0, "", "", "--user", "alice", "--client", "app", "--describe")
}
