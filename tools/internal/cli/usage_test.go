package cli_test

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"tidemark.io/tools/internal/cli"
)

func TestBadUsageExitsTwoNamingTheFlag(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"topics", "describe", "--bogus"}, "--bogus"},
		{[]string{"topics", "create"}, "--topic"},
		{[]string{"topics", "create", "--topic", "t", "--partitions", "x"}, "--partitions"},
		{[]string{"topics", "create", "--topic", "t", "--replica-assignment", "1:a"}, "--replica-assignment"},
		{[]string{"topics", "create", "--topic", "t", "--replica-assignment", "1:2,3"}, "--replica-assignment"},
		{[]string{"topics", "create", "--topic", "t", "--config", "nokey"}, "--config"},
		{[]string{"topics", "create", "--topic", "t", "--partitions", "0"}, "--partitions must be at least 1"},
		{[]string{"topics", "create", "--topic", "t", "--replication-factor", "0"}, "--replication-factor must be at least 1"},
		{[]string{"topics", "list", "--plaintext", "--controller", "ctrl-1"}, `--controller: "ctrl-1" is not a host:port`},
		{[]string{"topics", "list", "--plaintext", "--controller", "ctrl-1:"}, `--controller: "ctrl-1:" is not a host:port`},
		{[]string{"produce", "--topic", "t", "--plaintext", "--bootstrap-server", "broker-1:9092,broker-2"}, `--bootstrap-server: "broker-2" is not a host:port`},
		{[]string{"topics", "alter-config", "--add-config", "a=b"}, "--topic"},
		{[]string{"topics", "alter-config", "--topic", "t"}, "--add-config"},
		{[]string{"topics", "nosuch"}, `unknown command "nosuch"`},
		{[]string{"nosuch"}, `unknown command "nosuch"`},
		// A word after a command that takes none is most likely what a
		// flag should carry: said so, where cobra answered `unknown
		// command "orders" for "tidemark topics create"`.
		{[]string{"topics", "create", "orders"}, `topics create takes no arguments, got "orders": name the topic with --topic orders`},
		{[]string{"topics", "create", "--topic", "t", "extra"}, `topics create takes no arguments, got "extra"`},
		{[]string{"version", "now"}, `version takes no arguments, got "now"`},
		// A group is named as an argument or with --group (as
		// kafka-consumer-groups names it); --group was an unknown flag.
		{[]string{"groups", "describe"}, "name a group: as an argument or with --group"},
		{[]string{"groups", "describe", "a", "--group", "b"}, "describe takes one group, got 2: a, b"},
		{[]string{"groups", "delete"}, "name a group"},
		{[]string{"groups", "delete", "a", "--group", ""}, "group 2 of 2 is empty"},
		{[]string{"leader-election", "--topic", "t", "--partition", "0"}, "--election-type"},
		{[]string{"leader-election", "--election-type", "sideways", "--all-topic-partitions"}, "--election-type"},
		{[]string{"leader-election", "--election-type", "preferred", "--topic", "t"}, "--partition"},
		{[]string{"produce", "--topic", "t", "--acks", "2"}, "--acks"},
		{[]string{"produce", "--topic", "t", "--linger-ms", "-1"}, "--linger-ms"},
		{[]string{"produce", "--topic", "t", "--partition", "-5"}, "--partition"},
		{[]string{"produce", "--topic", "t", "--retries", "-1"}, "--retries"},
		{[]string{"produce", "--topic", "t", "--linger-ms", "50", "--delivery-timeout", "10ms"}, "--delivery-timeout"},
		{[]string{"produce", "--topic", "t", "--key", "k", "--key-separator", ":"}, "--key-separator"},
		{[]string{"produce", "--topic", "t", "--acks", "1", "--idempotence"}, "acks"},
		{[]string{"consume", "--topic", "t", "--offset", "3"}, "--partition"},
		{[]string{"consume", "--topic", "t", "--partition", "0", "--offset", "3", "--from-beginning"}, "--from-beginning"},
		{[]string{"watch", "--interval", "0s"}, "--interval"},
		{[]string{"watch", "--interval", "1000h"}, "--interval"},
		{[]string{"consume", "--topic", "t", "--group", "g", "--partition", "0"}, "--group"},
		{[]string{"consume", "--topic", "t", "--timeout-ms", "100"}, "--timeout-ms"},
		{[]string{"perf", "commit"}, "--topic"},
		{[]string{"perf", "e2e", "--topic", "t", "--num-records", "10", "--record-size", "4", "--throughput", "10"}, "--record-size"},
		{[]string{"perf", "e2e", "--topic", "t", "--num-records", "10", "--record-size", "100"}, "--throughput"},
		{[]string{"perf", "commit", "--topic", "t", "--members", "0"}, "--members"},
		{[]string{"perf", "commit", "--topic", "t", "--members", "4", "--num-commits", "2"}, "--num-commits"},
		{[]string{"groups", "describe", "g", "--members", "--state"}, "--state"},
		{[]string{"groups", "describe", "g", "--verbose"}, "--verbose"},
		{[]string{"groups", "reset-offsets", "--topic", "t", "--to-earliest"}, "--group"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--to-earliest"}, "--topic"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--topic", "t"}, "--to-earliest"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"}, "exactly one"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--topic", "t:x", "--to-earliest"}, "partition number"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"}, "--to-datetime"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-offset", "-3"}, "--to-offset"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--dry-run", "--execute"}, "--execute"},
		{[]string{"watch", "--color", "pink"}, "--color"},
		{[]string{"records", "delete", "--partition", "0", "--offset", "3"}, "--topic"},
		{[]string{"records", "delete", "--topic", "t", "--offset", "3"}, "--partition"},
		{[]string{"records", "delete", "--topic", "t", "--partition", "0"}, "--offset"},
		{[]string{"records", "delete", "--topic", "t", "--partition", "0", "--offset", "-2"}, "--offset"},
		{[]string{"perf", "produce", "--topic", "t", "--record-size", "10"}, "--num-records"},
		{[]string{"perf", "consume", "--topic", "t"}, "--messages"},
		{[]string{"reassign", "--execute"}, "--reassignment-json-file is required"},
		{[]string{"reassign", "--generate", "--broker-list", "1,2"}, "--topics-to-move-json-file"},
		{[]string{"reassign", "--verify", "--reassignment-json-file", "no-such-plan.json"}, "--reassignment-json-file"},
		{[]string{"health", "--plaintext", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"health", "--plaintext", "--addr", "broker-1"}, `--addr: "broker-1" is not a host:port`},
		{[]string{"perf", "produce", "--topic", "t", "--num-records", "4", "--record-size", "10", "--throughput", "0"}, "--throughput"},
		{[]string{"perf", "e2e", "--topic", "t", "--num-records", "4", "--record-size", "10", "--throughput", "NaN"}, "--throughput"},
		{[]string{"perf", "produce", "--topic", "t", "--num-records", "4", "--record-size", "10", "--producers", "0"}, "--producers"},
		{[]string{"perf", "produce", "--topic", "t", "--num-records", "4", "--record-size", "10", "--producers", "5"}, "--producers"},
		{[]string{"cluster", "describe", "--command-timeout", "-1s"}, "--command-timeout"},
		{[]string{"chaos", "run", "--seconds", "0"}, "--seconds"},
		{[]string{"chaos", "run", "--runs", "2", "--data-dir", "x"}, "--data-dir"},
		{[]string{"bench", "compare", "--scale", "0"}, "--scale"},
		{[]string{"bench", "compare", "--only", "kafka"}, "--only"},
		{[]string{"scenario", "run", "nosuch"}, `no scenario "nosuch"`},
		{[]string{"scenario", "run"}, "accepts 1 arg"},
		{[]string{"scenario", "run", "min-isr", "--wait", "0s"}, "--wait"},
		{[]string{"scenario", "run", "min-isr", "--lag-time", "-1s"}, "--lag-time"},
		{[]string{"fault", "slow", "--delay", "500ms"}, "--broker"},
		{[]string{"fault", "slow", "--broker", "3"}, "--delay"},
		{[]string{"fault", "slow", "--broker", "3", "--delay", "500ms", "--partition", "-3"}, "--partition"},
		{[]string{"fault", "stall", "--topic", "t"}, "--broker"},
		{[]string{"fault", "cut", "--from", "1"}, "--to"},
		{[]string{"fault", "heal", "--to", "2", "--both"}, "--from"},
		{[]string{"fault", "cut", "--from", "2", "--to", "2"}, "the same broker"},
	}
	for _, c := range cases {
		r := runCLI(t, "", c.args...)
		if r.code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %q", c.args, r.code, cli.ExitUsage, r.err)
			continue
		}
		if !strings.Contains(r.err, c.want) {
			t.Errorf("%v: stderr %q does not name %q", c.args, r.err, c.want)
		}
	}
}

// A chaos run without the binaries fails at once, saying how to build them,
// and leaves no data dir behind.
func TestChaosRunWithoutBinariesSaysHowToBuild(t *testing.T) {
	r := runCLI(t, "", "chaos", "run", "--seed", "7", "--seconds", "1", "--bin-dir", t.TempDir())
	if r.code != cli.ExitFailed || !strings.Contains(r.err, "make build") || !strings.Contains(r.err, "seed 7") {
		t.Fatalf("exit %d, stderr %q: want exit 1 naming make build and the seed", r.code, r.err)
	}
	if r.took > 20*time.Second {
		t.Errorf("took %s to find no binaries", r.took)
	}
	if strings.Contains(r.out, "data dir kept") {
		t.Errorf("a run whose cluster never started kept its data dir:\n%s", r.out)
	}
}

// A comparison without the peer's binaries fails before starting anything,
// saying how to build them, and writes no table.
func TestBenchCompareWithoutNatsSaysHowToBuild(t *testing.T) {
	out := t.TempDir()
	r := runCLI(t, "", "bench", "compare", "--bin-dir", t.TempDir(), "--nats-bin-dir", t.TempDir(), "--out-dir", out)
	if r.code != cli.ExitFailed || !strings.Contains(r.err, "nats-server not in") || !strings.Contains(r.err, "make thirdparty-nats") {
		t.Fatalf("exit %d, stderr %q: want exit 1 naming nats-server and make thirdparty-nats", r.code, r.err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Fatalf("the out dir holds %d entries, want none", len(entries))
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUnreachableClusterFailsFastNamingTheAddress(t *testing.T) {
	dead := closedAddr(t)
	cases := [][]string{
		{"topics", "list", "--controller", dead},
		{"cluster", "describe", "--controller", dead},
		{"watch", "--once", "--controller", dead},
		{"leader-election", "--election-type", "preferred", "--all-topic-partitions", "--controller", dead},
		{"produce", "--topic", "t", "--bootstrap-server", dead},
		{"consume", "--topic", "t", "--bootstrap-server", dead},
		{"perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "--bootstrap-server", dead},
		{"metadata", "dump", "--etcd-endpoints", "http://" + dead},
	}
	for _, args := range cases {
		r := runCLI(t, "x\n", append(args, "--plaintext")...)
		if r.code != cli.ExitFailed || !strings.Contains(r.err, dead) {
			t.Errorf("%v: exit %d, want 1 naming %s; stderr %q", args, r.code, dead, r.err)
		}
		if r.took > 5*time.Second {
			t.Errorf("%v: took %v to fail", args, r.took)
		}
	}
}

// A health check of a node that never answers names the wait it was
// given, not another one; so does a command that runs out of time.
func TestHealthNamesItsOwnTimeout(t *testing.T) {
	// Connections wait in the listen queue: accepted by the kernel, never
	// answered.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	runCLI(t, "", "health", "--plaintext", "--addr", l.Addr().String(), "--timeout", "700ms").
		fails(t, cli.ExitFailed, "no answer within --timeout 700ms")
	// The same for a command whose --command-timeout ends before the check
	// that the cluster answers.
	runCLI(t, "", "topics", "list", "--plaintext", "--controller", l.Addr().String(), "--command-timeout", "700ms").
		fails(t, cli.ExitFailed, "no controller answered within --command-timeout").fails(t, cli.ExitFailed, l.Addr().String())
}

func TestEnvironmentTwins(t *testing.T) {
	dead := closedAddr(t)
	env := map[string]string{"TIDEMARK_CONTROLLER": dead, "TIDEMARK_PLAINTEXT": "true"}
	r := runEnv(t, env, "topics", "list")
	if r.code != cli.ExitFailed || !strings.Contains(r.err, dead) {
		t.Fatalf("TIDEMARK_CONTROLLER ignored: exit %d, stderr %q", r.code, r.err)
	}
	// The flag wins over the environment.
	other := closedAddr(t)
	r = runEnv(t, env, "topics", "list", "--controller", other)
	if !strings.Contains(r.err, other) || strings.Contains(r.err, dead) {
		t.Fatalf("--controller should win over TIDEMARK_CONTROLLER: stderr %q", r.err)
	}
	r = runEnv(t, map[string]string{"TIDEMARK_COMMAND_TIMEOUT": "soon"}, "topics", "list")
	if r.code != cli.ExitUsage || !strings.Contains(r.err, "TIDEMARK_COMMAND_TIMEOUT") {
		t.Fatalf("bad environment value: exit %d, stderr %q", r.code, r.err)
	}
}
