package kafkascripts

import (
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
	step(0, "Completed updating config for user <default>.\n", "", "--entity-type", "users", "--entity-default", "--alter", "--add-config", "producer_byte_rate=10000000")
	step(0, "Completed updating config for user alice, client <default>.\n", "",
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
