package kafkascripts

import (
	"bytes"
	"strings"
	"testing"

	"tidemark.io/services/clustertest"
)

func runConfigs(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = Configs(args, &out, &errw)
	return code, out.String(), errw.String()
}

// Describe, alter and delete a topic's configs and a broker's (its own and
// the cluster default), with Kafka's lines, and the broker's refusals as
// Kafka's tool prints them.
func TestConfigsScriptTopicsAndBrokers(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	b := c.KafkaAddrs()[0]
	createTopic(t, b, "--topic", "cfg", "--partitions", "1", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	step := func(wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		all := append([]string{"--bootstrap-server", b}, args...)
		code, out, errOut := runConfigs(all...)
		wantErr = strings.ReplaceAll(wantErr, "ARGS", strings.Join(all, " "))
		if code != wantCode || out != wantOut || errOut != wantErr {
			t.Fatalf("kafka-configs.sh %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q", args, code, out, errOut, wantCode, wantOut, wantErr)
		}
	}
	topic := []string{"--entity-type", "topics", "--entity-name", "cfg"}
	// Synonyms as Kafka's tool prints them: each layer setting the config,
	// highest first, by the broker-level name under the topic's own.
	step(0, "Dynamic configs for topic cfg are:\n  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}\n", "", append(topic, "--describe")...)
	step(0, "Completed updating config for topic cfg.\n", "", append(topic, "--alter", "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")...)
	step(0, "Dynamic configs for topic cfg are:\n"+
		"  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"+
		"  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}\n"+
		"  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DEFAULT_CONFIG:log.retention.ms=604800000}\n", "", append(topic, "--describe")...)
	// A key not set is refused before anything changes.
	step(1, "", "Invalid config(s): nope\n", append(topic, "--alter", "--delete-config", "retention.ms,nope")...)
	step(0, "Completed updating config for topic cfg.\n", "", append(topic, "--alter", "--delete-config", "retention.ms")...)
	step(0, "Dynamic configs for topic cfg are:\n"+
		"  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"+
		"  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}\n", "", "--entity-type", "topics", "--describe")
	step(1, "", "Error while executing config command with args 'ARGS'\n"+
		"java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.InvalidConfigException: min.insync.replicas: value \"x\" is not a valid int\n",
		append(topic, "--alter", "--add-config", "min.insync.replicas=x")...)
	step(1, "Dynamic configs for topic nope are:\n", "Error while executing config command with args 'ARGS'\n"+
		"java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: topic \"nope\" does not exist\n",
		"--entity-type", "topics", "--entity-name", "nope", "--describe")

	step(0, "Completed updating config for broker 1.\n", "", "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "log.retention.ms=5000")
	step(0, "Completed updating default config for brokers in the cluster.\n", "", "--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "log.retention.ms=6000")
	step(0, "Dynamic configs for broker 1 are:\n  log.retention.ms=5000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=5000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=6000, DEFAULT_CONFIG:log.retention.ms=604800000}\n"+
		"Dynamic configs for broker 2 are:\n"+
		"Dynamic configs for broker 3 are:\n"+
		"Default configs for brokers in the cluster are:\n  log.retention.ms=6000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=6000, DEFAULT_CONFIG:log.retention.ms=604800000}\n", "", "--entity-type", "brokers", "--describe")
	// Broker 2 takes the cluster default; --all lists every config.
	code, out, _ := runConfigs("--bootstrap-server", b, "--entity-type", "brokers", "--entity-name", "2", "--describe", "--all")
	if code != 0 || !strings.HasPrefix(out, "All configs for broker 2 are:\n") || !strings.Contains(out, "\n  log.retention.ms=6000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=6000, DEFAULT_CONFIG:log.retention.ms=604800000}\n") ||
		!strings.Contains(out, "\n  min.insync.replicas=1 sensitive=false synonyms={DEFAULT_CONFIG:min.insync.replicas=1}\n") {
		t.Fatalf("--describe --all of broker 2: exit %d, stdout %q", code, out)
	}
	// A broker's alter is its whole new set (AlterConfigs): the keys it
	// already had and does not delete stay.
	step(0, "Completed updating config for broker 1.\n", "", "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "log.roll.ms=7000")
	step(0, "Completed updating config for broker 1.\n", "", "--entity-type", "brokers", "--entity-name", "1", "--alter", "--delete-config", "log.retention.ms")
	step(0, "Dynamic configs for broker 1 are:\n  log.roll.ms=7000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.roll.ms=7000, DEFAULT_CONFIG:log.roll.ms=604800000}\n", "",
		"--entity-type", "brokers", "--entity-name", "1", "--describe")
	// Kafka's tool checks a broker id before it connects.
	step(1, "", "The entity name for brokers must be a valid integer broker id, but it is: one\n", "--entity-type", "brokers", "--entity-name", "one", "--describe")

	// The shortcuts are the --entity-type/--entity-name pairs.
	step(0, "Completed updating config for topic cfg.\n", "", "--topic", "cfg", "--alter", "--add-config", "retention.ms=2000")
	step(0, "Dynamic configs for topic cfg are:\n"+
		"  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"+
		"  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}\n"+
		"  retention.ms=2000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=2000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=6000, DEFAULT_CONFIG:log.retention.ms=604800000}\n", "", "--topic", "cfg", "--describe")
	step(0, "Completed updating config for broker 2.\n", "", "--broker", "2", "--alter", "--add-config", "log.roll.ms=8000")
	step(0, "Dynamic configs for broker 2 are:\n  log.roll.ms=8000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.roll.ms=8000, DEFAULT_CONFIG:log.roll.ms=604800000}\n", "", "--broker", "2", "--describe")
	step(0, "Completed updating default config for brokers in the cluster.\n", "", "--broker-defaults", "--alter", "--delete-config", "log.retention.ms")
	step(0, "Default configs for brokers in the cluster are:\n", "", "--broker-defaults", "--describe")
	step(1, "", "The entity name for brokers must be a valid integer broker id, but it is: two\n", "--broker", "two", "--describe")
}

// Kafka's refusals of bad command lines, before any connection.
func TestConfigsScriptRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantStderr string
		usage      bool
	}{
		{nil, "This tool helps to manipulate and describe entity config for a topic, client, user, broker, ip or client-metrics\n", true},
		{[]string{"--bootstrap-server", "x:1", "--entity-type", "topics"}, "Command must include exactly one action: --describe, --alter\n", true},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--alter", "--entity-type", "topics"}, "Command must include exactly one action: --describe, --alter\n", true},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--entity-type", "topics", "--add-config", "a=b"}, "Option \"[describe]\" can't be used with option \"[add-config]\"\n", true},
		{[]string{"--bootstrap-server", "x:1", "--describe"}, "At least one entity type must be specified\n", false},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--entity-type", "widgets"}, "Invalid entity type widgets, the entity type must be one of topics, clients, users, brokers, broker-loggers, ips, client-metrics with a --bootstrap-server or --bootstrap-controller argument\n", false},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--entity-type", "topics", "--entity-type", "brokers"}, "Only 'users' and 'clients' entity types may be specified together\n", false},
		{[]string{"--describe", "--entity-type", "topics"}, "One of the required --bootstrap-server, --boostrap-controller, or --zookeeper arguments must be specified\n", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--entity-type", "ips", "--entity-default", "--add-config", "a=1"}, "--entity-type ips: tidemark's kafka-configs.sh manages topics, brokers, users and clients only", false},
		// Kafka finds a user-and-client entity without the client's name
		// once the command runs, before anything is sent.
		{[]string{"--bootstrap-server", "x:1", "--alter", "--entity-type", "users", "--entity-type", "clients", "--entity-name", "a", "--add-config", "producer_byte_rate=1"}, "Exactly one entity name must be specified for every entity type\n", false},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--entity-type", "users", "--entity-name", "a", "--entity-name", "b"}, "More entity names specified than entity types\n", false},
		// The entity shortcuts, combined as Kafka's tool allows.
		{[]string{"--bootstrap-server", "x:1", "--describe", "--entity-type", "users", "--user", "alice"}, "Duplicate entity type(s) specified: users\n", false},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--user", "alice", "--user-defaults"}, "Duplicate entity type(s) specified: users\n", false},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--entity-type", "users", "--client", "app"}, "--entity-{type,name,default} should not be used in conjunction with specific entity flags\n", false},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--client", "app", "--entity-name", "alice"}, "--entity-{type,name,default} should not be used in conjunction with specific entity flags\n", false},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--topic", "t", "--broker", "1"}, "Only 'users' and 'clients' entity types may be specified together\n", false},
		{[]string{"--describe", "--topic", "t"}, "One of the required --bootstrap-server, --boostrap-controller, or --zookeeper arguments must be specified\n", false},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--ip", "10.0.0.1"}, "--entity-type ips: tidemark's kafka-configs.sh manages topics, brokers, users and clients only", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--topic", "t"}, "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter\n", false},
		// A user's SCRAM credentials and its quotas are altered apart, as
		// Kafka's tool requires; a client takes quotas only.
		{[]string{"--bootstrap-server", "x:1", "--alter", "--user", "alice", "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=1024"}, "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server.\n", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-512,consumer_byte_rate"}, "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server.\n", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--user-defaults", "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=1024"}, "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using --bootstrap-server.\n", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--user", "alice", "--client", "app", "--add-config", "SCRAM-SHA-256=[password=x],retention.ms=1"}, "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: Set(retention.ms, SCRAM-SHA-256)\n", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default", "--delete-config", "SCRAM-SHA-256"}, "Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected config names: ArrayBuffer(SCRAM-SHA-256)\n", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--entity-type", "users", "--add-config", "SCRAM-SHA-256=[password=x]"}, "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips\n", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--entity-type", "topics", "--add-config", "a=1"}, "an entity name must be specified with --alter of topics\n", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--entity-type", "brokers", "--add-config", "a=1"}, "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips\n", false},
		{[]string{"--bootstrap-server", "x:1", "--alter", "--entity-type", "topics", "--entity-name", "t"}, "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter\n", false},
		{[]string{"--bootstrap-server", "x:1", "--describe", "--entity-type", "topics", "--frobnicate"}, "frobnicate is not a recognized option\n", false},
	} {
		code, out, errOut := runConfigs(tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.wantStderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and stderr starting %q", tc.args, code, out, errOut, tc.wantStderr)
			continue
		}
		if hasUsage := strings.Contains(errOut, "--bootstrap-server string"); hasUsage != tc.usage {
			t.Errorf("%q: usage printed %v, want %v", tc.args, hasUsage, tc.usage)
		}
	}
	// --add-config's format, checked once the command runs, as Kafka does.
	code, out, errOut := runConfigs("--bootstrap-server", "127.0.0.1:1", "--alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "retention.ms")
	if want := "requirement failed: Invalid entity config: all configs to be added must be in the format \"key=val\".\n"; code != 1 || out != "" || errOut != want {
		t.Errorf("--add-config without =: exit %d, stdout %q, stderr %q, want %q", code, out, errOut, want)
	}
}
