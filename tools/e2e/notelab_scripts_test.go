package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// describedPartition is one partition line of kafka-topics.sh --describe.
type describedPartition struct {
	topic, leader, replicas, isr string
}

// parseDescribe reads Kafka's describe output: the topic lines and the
// tab-led partition lines (Topic, Partition, Leader, Replicas, Isr).
func parseDescribe(t *testing.T, out string) (heads []string, parts map[string]describedPartition) {
	t.Helper()
	parts = map[string]describedPartition{}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "\t") {
			heads = append(heads, line)
			continue
		}
		fields := map[string]string{}
		for _, f := range strings.Split(strings.TrimPrefix(line, "\t"), "\t") {
			k, v, ok := strings.Cut(f, ": ")
			if !ok {
				t.Fatalf("describe line %q: field %q is not 'Name: value'", line, f)
			}
			fields[k] = v
		}
		parts[fields["Topic"]+"-"+fields["Partition"]] = describedPartition{fields["Topic"], fields["Leader"], fields["Replicas"], fields["Isr"]}
	}
	return heads, parts
}

// without is a comma-separated broker list without id, in its order.
func without(list, id string) string {
	return strings.Join(slices.DeleteFunc(strings.Split(list, ","), func(s string) bool { return s == id }), ",")
}

// TestNoteLabKafkaScripts runs the note's chapter 9 in the lab with Kafka's
// scripts as the note writes them, through `compose exec -T kafka2
// /opt/kafka/bin/kafka-topics.sh` and the in-network listeners (and from
// the host, bin/kafka-topics.sh on the published ports): the topic
// created with min.insync.replicas=2, each partition led by its first
// replica with the whole ISR; kafka1 stopped, every partition led by a
// broker still up and kafka1 out of each ISR; the under-replicated and
// at-min-ISR filters list every partition, the unavailable and under-min-
// ISR ones none; kafka-broker-api-versions.sh lists the brokers still up;
// kafka1 started again, back in every ISR.
func TestNoteLabKafkaScripts(t *testing.T) {
	s := need(t)
	dir, err := filepath.Abs(filepath.Join("..", "..", "deploy", "note"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "kafka-topics.sh")); err != nil {
		t.Fatalf("bin/kafka-topics.sh: %v (make build links Kafka's script names to bin/tidemark)", err)
	}
	env := noteLabEnv(dir)
	// compose returns the command's stdout (what a script printed there);
	// its stderr comes with an error.
	compose := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		full := append(append(append([]string{}, s.compose[1:]...), "-p", noteLabProject), args...)
		cmd := exec.CommandContext(ctx, s.compose[0], full...)
		cmd.Dir, cmd.Env, cmd.WaitDelay = dir, env, 5*time.Second
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("compose %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out), err
	}
	down := func() {
		if _, err := compose(2*time.Minute, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			t.Logf("taking the lab down: %v", err)
		}
	}
	down()
	t.Cleanup(func() {
		if t.Failed() {
			if logs, err := compose(time.Minute, "logs", "--no-color", "--tail", "200"); err == nil {
				t.Logf("the lab's logs:\n%s", logs)
			}
		}
		down()
	})
	if _, err := compose(4*time.Minute, "up", "-d", "--remove-orphans"); err != nil {
		t.Fatal(err)
	}
	waitNoteLabHealthy(t, s, 2*time.Minute)
	tl := newTimeline(t, "note lab: chapter 9 with Kafka's scripts")

	// script runs a Kafka script in a broker's container, as the note's
	// readers run it on a Kafka image.
	script := func(in, name string, args ...string) (string, error) {
		return compose(time.Minute, append([]string{"exec", "-T", in, "/opt/kafka/bin/" + name}, args...)...)
	}
	const topic = "learn.09.orders"
	out, err := script("kafka2", "kafka-topics.sh", "--bootstrap-server", "kafka1:19092", "--create", "--topic", topic,
		"--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	if err != nil || !strings.Contains(out, "Created topic "+topic+".\n") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	tl.mark("kafka-topics.sh --create: %s", strings.TrimSpace(out))

	// describe polls until check accepts the output: brokers learn the
	// controller's decisions a moment after it makes them.
	describe := func(what string, check func(heads []string, parts map[string]describedPartition) error, run func() (string, error)) map[string]describedPartition {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			out, err := run()
			var why error = err
			var parts map[string]describedPartition
			if err == nil {
				var heads []string
				heads, parts = parseDescribe(t, out)
				why = check(heads, parts)
			}
			if why == nil {
				tl.mark("%s:\n%s", what, strings.TrimRight(out, "\n"))
				return parts
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v\n%s", what, why, out)
			}
			time.Sleep(time.Second)
		}
	}
	inKafka2 := func(args ...string) func() (string, error) {
		return func() (string, error) { return script("kafka2", "kafka-topics.sh", args...) }
	}
	settled := describe("kafka-topics.sh --describe via kafka1:19092", func(heads []string, parts map[string]describedPartition) error {
		if len(heads) != 1 || !strings.HasPrefix(heads[0], "Topic: "+topic+"\tTopicId: ") ||
			!strings.HasSuffix(heads[0], "\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: min.insync.replicas=2") {
			return fmt.Errorf("topic line %q", heads)
		}
		for p := 0; p < 3; p++ {
			d, ok := parts[fmt.Sprintf("%s-%d", topic, p)]
			if !ok || len(strings.Split(d.replicas, ",")) != 3 || d.isr != d.replicas || !strings.HasPrefix(d.replicas, d.leader+",") {
				return fmt.Errorf("partition %d: %+v, want led by its first replica with the whole ISR", p, d)
			}
		}
		return nil
	}, inKafka2("--bootstrap-server", "kafka1:19092", "--describe", "--topic", topic))

	if _, err := compose(time.Minute, "stop", "kafka1"); err != nil {
		t.Fatal(err)
	}
	tl.mark("docker compose stop kafka1")
	describe("kafka-topics.sh --describe via kafka2:19092, kafka1 stopped", func(_ []string, parts map[string]describedPartition) error {
		for key, before := range settled {
			d := parts[key]
			if d.replicas != before.replicas || d.isr != without(before.replicas, "1") || d.leader == "1" || d.leader == "none" ||
				!slices.Contains(strings.Split(d.isr, ","), d.leader) {
				return fmt.Errorf("%s: %+v, want replicas %s, ISR %s and a leader among them", key, d, before.replicas, without(before.replicas, "1"))
			}
		}
		return nil
	}, inKafka2("--bootstrap-server", "kafka2:19092", "--describe", "--topic", topic))

	all := func(_ []string, parts map[string]describedPartition) error {
		if len(parts) != 3 {
			return fmt.Errorf("%d partitions listed, want the 3 of %s", len(parts), topic)
		}
		return nil
	}
	none := func(heads []string, parts map[string]describedPartition) error {
		if len(heads)+len(parts) != 0 {
			return fmt.Errorf("listed %v %v, want nothing", heads, parts)
		}
		return nil
	}
	describe("--under-replicated-partitions", all, inKafka2("--bootstrap-server", "kafka2:19092", "--describe", "--under-replicated-partitions"))
	describe("--at-min-isr-partitions", all, inKafka2("--bootstrap-server", "kafka2:19092", "--describe", "--at-min-isr-partitions"))
	describe("--unavailable-partitions", none, inKafka2("--bootstrap-server", "kafka2:19092", "--describe", "--unavailable-partitions"))
	describe("--under-min-isr-partitions", none, inKafka2("--bootstrap-server", "kafka2:19092", "--describe", "--under-min-isr-partitions"))

	// From the host, as the note writes it: the script names make build
	// links in bin/ (what PATH=$PWD/bin:$PATH finds), the published ports
	// (the lab's 9094 is 27094 here).
	host := func(name string, args ...string) func() (string, error) {
		return func() (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
			cmd.WaitDelay = 5 * time.Second
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				err = fmt.Errorf("%s: %w\n%s%s", name, err, out, stderr.String())
			}
			return string(out), err
		}
	}
	describe("bin/kafka-topics.sh --describe --under-replicated-partitions via localhost:27094", all,
		host("kafka-topics.sh", "--bootstrap-server", "localhost:27094", "--describe", "--under-replicated-partitions"))
	out, err = host("kafka-broker-api-versions.sh", "--bootstrap-server", "localhost:27094")()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"localhost:27094 (id: 2 rack: null) -> (\n\tProduce(0): 3 to 11 [usable: 11],\n", "localhost:27096 (id: 3 rack: null) -> (\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("kafka-broker-api-versions.sh lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "(id: 1 ") {
		t.Fatalf("kafka-broker-api-versions.sh lists the stopped broker 1:\n%s", out)
	}
	tl.mark("kafka-broker-api-versions.sh: brokers 2 and 3, Produce(0): 3 to 11 [usable: 11]")

	if _, err := compose(time.Minute, "start", "kafka1"); err != nil {
		t.Fatal(err)
	}
	tl.mark("docker compose start kafka1")
	describe("--under-replicated-partitions, kafka1 back", none, inKafka2("--bootstrap-server", "kafka2:19092", "--describe", "--under-replicated-partitions"))

	// The console tools' round trip: lines typed into
	// kafka-console-producer.sh (acks=all) come out of
	// kafka-console-consumer.sh in a group, which kafka-consumer-groups.sh
	// then describes at the log end.
	const group = "learn.09.readers"
	var lines []string
	for i := range 9 {
		lines = append(lines, fmt.Sprintf("order-%d", i))
	}
	pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
	defer pcancel()
	produce := exec.CommandContext(pctx, s.compose[0], append(append([]string{}, s.compose[1:]...), "-p", noteLabProject, "exec", "-T", "kafka2",
		"/opt/kafka/bin/kafka-console-producer.sh", "--bootstrap-server", "kafka2:19092", "--topic", topic, "--producer-property", "acks=all")...)
	produce.Dir, produce.Env, produce.WaitDelay = dir, env, 5*time.Second
	produce.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := produce.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("kafka-console-producer.sh: %v\n%s", err, out)
	}
	out, err = script("kafka2", "kafka-console-consumer.sh", "--bootstrap-server", "kafka2:19092", "--topic", topic,
		"--group", group, "--from-beginning", "--max-messages", fmt.Sprint(len(lines)))
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(got)
	if err != nil || !slices.Equal(got, lines) {
		t.Fatalf("kafka-console-consumer.sh --max-messages %d printed %q, want %q: %v", len(lines), got, lines, err)
	}
	tl.mark("kafka-console-producer.sh | kafka-console-consumer.sh --group %s: %d lines", group, len(lines))
	out, err = script("kafka2", "kafka-consumer-groups.sh", "--bootstrap-server", "kafka2:19092", "--describe", "--group", group)
	if err != nil {
		t.Fatal(err)
	}
	checkGroupDescribe(t, out, group, topic, len(lines))
	tl.mark("kafka-consumer-groups.sh --describe --group %s:\n%s", group, strings.TrimSpace(out))
}
