package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/platform/testenv"
)

// The learning note's lab (deploy/note) is a compose project of its own
// beside the stack: the e2e project's name with -note, its Kafka ports
// moved from 9092/9094/9096 to 27092/27094/27096 (the advertised addresses
// follow), so that it runs beside `make note-lab` as well; below the
// kernel's ephemeral port range, where a connection's local port could
// hold one as the lab started.
var (
	noteLabProject = project + "-note"
	noteLabPorts   = map[string]string{"KAFKA1_PORT": "27092", "KAFKA2_PORT": "27094", "KAFKA3_PORT": "27096"}
	// noteLabServices are the lab's long-running services, each with a
	// health check.
	noteLabServices = []string{"etcd", "controller-1", "controller-2", "kafka1", "kafka2", "kafka3"}
)

// pythonWithKafka is Debian's python3 with python3-confluent-kafka
// (librdkafka's Python binding installs there, not into other pythons).
const pythonWithKafka = "/usr/bin/python3"

// TestNoteLabPythonDemos plays the note's three Python demos the way the
// note does (confluent-kafka-python, `docker compose stop/start kafkaN`,
// kafka-leader-election.sh through `compose exec -T`) against the lab, with
// tools/e2e/testdata/note_lab_demos.py: a new leader when the leader's
// container stops, no delivery failure under the idempotent acks=all
// producer, the stopped broker back in the ISR and, after the preferred
// election, leading again; NOT_ENOUGH_REPLICAS with two brokers stopped
// and writes again once they are back; the metadata the ISR watcher reads.
func TestNoteLabPythonDemos(t *testing.T) {
	s := need(t)
	if err := exec.Command(pythonWithKafka, "-c", "import confluent_kafka").Run(); err != nil {
		testenv.Unavailable(t, "Python's confluent_kafka under "+pythonWithKafka, "apt-get install python3-confluent-kafka")
	}
	dir, env := upNoteLab(t, s)
	script, err := filepath.Abs(filepath.Join("testdata", "note_lab_demos.py"))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pythonWithKafka, "-u", script,
		"--bootstrap", "localhost:27092,localhost:27094,localhost:27096",
		"--compose", strings.Join(s.compose, " "), "--project", noteLabProject, "--compose-dir", dir)
	cmd.Env, cmd.WaitDelay = env, 10*time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tl := newTimeline(t, "note lab: the note's Python demos")
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		// librdkafka's own log lines start with %; the script's are the timeline.
		if l := lines.Text(); !strings.HasPrefix(l, "%") {
			tl.mark("%s", l)
		}
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the demos did not finish within 6 minutes")
	}
	if err != nil {
		t.Fatalf("the demos failed (%v): see the timeline above", err)
	}
}

// upNoteLab starts the lab as its own compose project, removed (with its
// logs in the test's output when it failed) when the test ends, and waits
// until its services are healthy. It returns the lab's directory and the
// environment of its compose commands.
func upNoteLab(t *testing.T, s *stack) (dir string, env []string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "deploy", "note"))
	if err != nil {
		t.Fatal(err)
	}
	env = noteLabEnv(dir)
	compose := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		full := append(append(append([]string{}, s.compose[1:]...), "-p", noteLabProject), args...)
		cmd := exec.CommandContext(ctx, s.compose[0], full...)
		cmd.Dir, cmd.Env, cmd.WaitDelay = dir, env, 5*time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("compose %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), err
	}
	down := func() {
		if _, err := compose(2*time.Minute, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			t.Logf("taking the lab down: %v", err)
		}
	}
	down() // what an earlier run left
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
	return dir, env
}

// TestNoteLabInNetworkClient: a client inside the lab's network that
// bootstraps kafka1:19092 is told the INTERNAL listener's kafkaN:19092 and
// produces and consumes (see checkNoteLabInNetworkClient).
func TestNoteLabInNetworkClient(t *testing.T) {
	s := need(t)
	upNoteLab(t, s)
	checkNoteLabInNetworkClient(t, s)
}

// noteLabEnv is the environment of the lab's compose commands and of the
// script: the stack's compose file and project, which `make e2e` exports,
// replaced by the lab's; the images as given.
func noteLabEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COMPOSE_FILE=") && !strings.HasPrefix(kv, "COMPOSE_PROJECT_NAME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "COMPOSE_FILE="+filepath.Join(dir, "docker-compose.yml"), "COMPOSE_PROJECT_NAME="+noteLabProject)
	for k, v := range noteLabPorts {
		env = append(env, k+"="+v)
	}
	return env
}

// waitNoteLabHealthy waits until each of the lab's services has a healthy
// container.
func waitNoteLabHealthy(t *testing.T, s *stack, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		for _, svc := range noteLabServices {
			out, err := s.docker(30*time.Second, "ps", "-q",
				"--filter", "label=com.docker.compose.project="+noteLabProject,
				"--filter", "label=com.docker.compose.service="+svc,
				"--filter", "health=healthy")
			if err != nil {
				t.Fatal(err)
			}
			if out == "" {
				missing = append(missing, svc)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lab's services not healthy within %v: %v", timeout, missing)
		}
		time.Sleep(time.Second)
	}
}

// checkNoteLabInNetworkClient is a client inside the lab's compose network:
// it bootstraps kafka1:19092 (the INTERNAL listener) and resolves names as
// the network's DNS does (each kafkaN to its container's address, which
// the host routes to), so it reaches only addresses that work inside the
// network. It must be told kafkaN:19092 for every broker, and then create
// a topic, produce and read back. With one listener it was told the host's
// localhost:909x.
func checkNoteLabInNetworkClient(t *testing.T, s *stack) {
	t.Helper()
	ips := map[string]string{}
	for _, svc := range []string{"kafka1", "kafka2", "kafka3"} {
		id, err := s.docker(30*time.Second, "ps", "-q",
			"--filter", "label=com.docker.compose.project="+noteLabProject, "--filter", "label=com.docker.compose.service="+svc)
		if err != nil || id == "" {
			t.Fatalf("%s's container: %q %v", svc, id, err)
		}
		ip, err := s.docker(30*time.Second, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id)
		if err != nil || net.ParseIP(ip) == nil {
			t.Fatalf("%s's address in the network: %q %v", svc, ip, err)
		}
		ips[svc] = ip
	}
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers("kafka1:19092"), kgo.RetryTimeout(30*time.Second),
		kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			ip, ok := ips[host]
			if !ok {
				return nil, fmt.Errorf("%s does not resolve inside the lab's network", addr)
			}
			return d.DialContext(ctx, network, net.JoinHostPort(ip, port))
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("Metadata through kafka1:19092: %v", err)
	}
	got := map[int32]string{}
	for _, b := range meta.Brokers {
		got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	if want := map[int32]string{1: "kafka1:19092", 2: "kafka2:19092", 3: "kafka3:19092"}; !maps.Equal(got, want) {
		t.Fatalf("a client on the INTERNAL listener is told %v, want %v", got, want)
	}

	const topic = "notelab.internal"
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 1, 3
	create.Topics = append(create.Topics, ct)
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := cresp.Topics[0].ErrorCode; c != 0 && c != 36 { // 36: TOPIC_ALREADY_EXISTS
		t.Fatalf("creating %s: code %d", topic, c)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("in-network")}).FirstErr(); err != nil {
		t.Fatalf("producing inside the network: %v", err)
	}
	cl.AddConsumeTopics(topic)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back inside the network: %v", ctx.Err())
		}
		var read []string
		fs.EachRecord(func(r *kgo.Record) { read = append(read, string(r.Value)) })
		if len(read) > 0 {
			if read[0] != "in-network" {
				t.Fatalf("read back %q", read)
			}
			t.Logf("a client in the lab's network bootstrapped kafka1:19092, was told %v, produced and read back", got)
			return
		}
	}
}
