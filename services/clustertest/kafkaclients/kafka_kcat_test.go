package kafkaclients

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/testenv"
)

// kcat (librdkafka, a third client implementation, in C) lists the
// cluster, produces idempotently with acks=all and zstd, and consumes to
// the end of the partition and exits (which needs empty, not null, record
// sets in fetch answers at the end). Where kcat is not installed (Debian
// package kcat) it skips, and fails under CI.
func TestKcatListsProducesAndConsumes(t *testing.T) {
	kcat := testenv.RequireCommand(t, "kcat", "apt-get install kcat (CI installs it)", "kcat")
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	c.KafkaCreate(kadm.NewClient(c.KafkaClient()), "kcat", 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	boot := strings.Join(c.KafkaAddrs(), ",")
	run := func(stdin string, args ...string) string {
		t.Helper()
		ctx := clustertest.CtxFor(t, 60*time.Second)
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", boot}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	md := run("", "-L", "-t", "kcat")
	for _, want := range []string{"3 brokers", `topic "kcat" with 1 partitions`, "isrs: "} {
		if !strings.Contains(md, want) {
			t.Fatalf("kcat -L lacks %q:\n%s", want, md)
		}
	}
	run("one\ntwo\nthree\n", "-P", "-t", "kcat", "-X", "acks=all", "-X", "enable.idempotence=true", "-z", "zstd")
	out := run("", "-C", "-t", "kcat", "-o", "beginning", "-e", "-q", "-f", "%o %s\n")
	if out != "0 one\n1 two\n2 three\n" {
		t.Fatalf("kcat consumed %q", out)
	}
}

// kcat's balanced consumer (-G: librdkafka's KafkaConsumer, the classic
// group protocol as a C client speaks it) reads a topic to its end and
// commits; run again in the same group, it resumes after the commit and
// reads only what was written since. The committed offsets are the
// group's as tidemark's own CLI sees them.
func TestKcatGroupConsumerResumesAfterItsCommit(t *testing.T) {
	kcat := testenv.RequireCommand(t, "kcat", "apt-get install kcat (CI installs it)", "kcat")
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3)})
	adm := kadm.NewClient(c.KafkaClient())
	c.KafkaCreate(adm, "kcatg", 2, 3, nil)
	boot := strings.Join(c.KafkaAddrs(), ",")
	run := func(stdin string, args ...string) string {
		t.Helper()
		ctx := clustertest.CtxFor(t, 90*time.Second)
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", boot}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr strings.Builder
		cmd.Stderr = &stderr // librdkafka's warnings
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	// auto.offset.reset, not -o: kcat -G applies -o to every assigned
	// partition, overriding the group's commits (as against Kafka).
	consume := func() []string {
		t.Helper()
		out := run("", "-G", "kcat-readers", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\n",
			"-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100", "-X", "session.timeout.ms=6000", "kcatg")
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l != "" {
				got = append(got, l)
			}
		}
		slices.Sort(got)
		return got
	}
	run("a1\na2\na3\na4\n", "-P", "-t", "kcatg", "-X", "acks=all")
	if got := consume(); !slices.Equal(got, []string{"a1", "a2", "a3", "a4"}) {
		t.Fatalf("first run read %q", got)
	}
	c.WaitFor(20*time.Second, "the group's commits at the end of both partitions", func() bool {
		offs, err := adm.FetchOffsets(clustertest.CtxFor(t, 10*time.Second), "kcat-readers")
		if err != nil {
			return false
		}
		var sum int64
		for _, ps := range offs {
			for _, o := range ps {
				sum += o.At
			}
		}
		return sum == 4
	})
	run("b1\nb2\n", "-P", "-t", "kcatg", "-X", "acks=all")
	if got := consume(); !slices.Equal(got, []string{"b1", "b2"}) {
		t.Fatalf("second run read %q; want only what came after the commit", got)
	}
}
