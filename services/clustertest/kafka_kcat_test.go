package clustertest

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"tidemark.io/services/platform/testenv"
)

// kcat (librdkafka, a third client implementation, in C) lists the
// cluster, produces idempotently with acks=all and zstd, and consumes to
// the end of the partition and exits (which needs empty, not null, record
// sets in fetch answers at the end). Where kcat is not installed (Debian
// package kcat) it skips, and fails under CI.
func TestKcatListsProducesAndConsumes(t *testing.T) {
	kcat := testenv.RequireCommand(t, "kcat", "apt-get install kcat (CI installs it)", "kcat")
	c := Start(t, Options{Brokers: 3, Kafka: true})
	c.kafkaCreate(kadm.NewClient(c.kafkaClient()), "kcat", 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	boot := strings.Join(c.KafkaAddrs(), ",")
	run := func(stdin string, args ...string) string {
		t.Helper()
		ctx := ctxFor(t, 60*time.Second)
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
