package scenario

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
)

// kcatLeader parses kcat -L's line for partition 0: its leader and ISR.
var kcatPartition = regexp.MustCompile(`partition 0, leader (-?\d+), replicas: ([\d,]*), isrs: ([\d,]*)`)

// The learning note's three demos, replayed with kcat (librdkafka) against
// a dev cluster of separate processes over its mutual-TLS Kafka
// listeners, as the README shows them: the leader killed under an
// idempotent acks=all stream (every record kept, once, in order);
// acks=all refused with NOT_ENOUGH_REPLICAS once the ISR is below
// min.insync.replicas; the ISR shrinking and growing back as kcat -L shows
// it while a follower is stopped and started.
func TestKcatReplaysTheNoteDemosOnTheDevCluster(t *testing.T) {
	testenv.SkipIfShort(t, "a dev cluster of real processes")
	kcat := testenv.RequireCommand(t, "kcat", "apt-get install kcat (CI installs it)", "kcat")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, _, _ := startCluster(ctx, t, nil, "")
	sec := cl.Options().Security()
	k := []string{"-b", cl.KafkaBootstrap(), "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + sec.CA,
		"-X", "ssl.certificate.location=" + sec.Cert, "-X", "ssl.key.location=" + sec.Key}
	kc := func(stdin io.Reader, args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, kcat, append(append([]string{}, k...), args...)...)
		cmd.Stdin = stdin
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	ports := cl.Options().Ports()
	tm := func(args ...string) {
		t.Helper()
		flags := []string{"--bootstrap-server", strings.Join(ports.Brokers, ","), "--controller", strings.Join(ports.Controllers, ","),
			"--tls.ca", sec.CA, "--tls.cert", sec.Cert, "--tls.key", sec.Key}
		out, err := exec.CommandContext(ctx, cl.Options().BinDir+"/tidemark", append(args, flags...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tidemark %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	partition := func(topic string) (leader string, isr []string) {
		t.Helper()
		out, errOut, err := kc(nil, "-L", "-t", topic)
		if err != nil {
			t.Fatalf("kcat -L: %v\n%s", err, errOut)
		}
		m := kcatPartition.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("kcat -L -t %s shows no partition 0:\n%s", topic, out)
		}
		return m[1], strings.Split(m[3], ",")
	}
	waitISR := func(topic string, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, isr := partition(topic)
			if len(isr) == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("kcat -L never showed an ISR of %d for %s (last %v)", n, topic, isr)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	node := func(id string) string { return "broker-" + id }

	// 1. The leader killed while kcat produces idempotently with acks=all.
	tm("topics", "create", "--topic", "demo2", "--partitions", "1", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	waitISR("demo2", 3)
	leader, _ := partition("demo2")
	const n = 3000
	pr, pw := io.Pipe()
	produced := make(chan error, 1)
	var prodErr string
	go func() {
		_, errOut, err := kc(pr, "-P", "-t", "demo2", "-X", "acks=all", "-X", "enable.idempotence=true")
		prodErr = errOut
		produced <- err
	}()
	for i := 1; i <= n; i++ {
		if _, err := fmt.Fprintf(pw, "%d\n", i); err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if i == n/3 {
			victim, err := cl.Node(node(leader))
			if err != nil {
				t.Fatal(err)
			}
			if err := victim.Kill(); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed the leader, broker %s, after %d records", leader, i)
		}
	}
	pw.Close()
	if err := <-produced; err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, prodErr)
	}
	out, errOut, err := kc(nil, "-C", "-t", "demo2", "-o", "beginning", "-e", "-q")
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, errOut)
	}
	got := strings.Fields(out)
	if len(got) != n {
		t.Fatalf("read back %d records, want %d (kcat -P said: %s)", len(got), n, prodErr)
	}
	for i, v := range got {
		if v != strconv.Itoa(i+1) {
			t.Fatalf("record %d is %q, want %d: lost, duplicated or out of order", i, v, i+1)
		}
	}
	killed, _ := cl.Node(node(leader))
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	waitISR("demo2", 3)

	// 2. min.insync.replicas: the two followers stopped, acks=all refused.
	leader, isr := partition("demo2")
	var stopped []string
	for _, id := range isr {
		if id != leader {
			f, err := cl.Node(node(id))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Stop(20 * time.Second); err != nil {
				t.Fatal(err)
			}
			stopped = append(stopped, id)
		}
	}
	waitISR("demo2", 1)
	_, errOut, _ = kc(strings.NewReader("refused\n"), "-P", "-t", "demo2", "-X", "acks=all", "-X", "message.send.max.retries=0")
	if !strings.Contains(errOut, "Not enough in-sync replicas") {
		t.Fatalf("acks=all below min.insync.replicas: kcat said %q, want a NOT_ENOUGH_REPLICAS delivery failure", errOut)
	}

	// 3. The ISR grows back as the followers return (kcat -L shows it).
	for _, id := range stopped {
		f, _ := cl.Node(node(id))
		if err := f.Start(); err != nil {
			t.Fatal(err)
		}
	}
	waitISR("demo2", 3)
	out, _, err = kc(nil, "-C", "-t", "demo2", "-o", "beginning", "-e", "-q")
	if err != nil || len(strings.Fields(out)) != n {
		t.Fatalf("after the refusal the partition holds %d records (%v), want %d: the refused write must not be there", len(strings.Fields(out)), err, n)
	}
}
