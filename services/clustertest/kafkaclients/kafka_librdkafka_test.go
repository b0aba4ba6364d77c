package kafkaclients

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/testenv"
)

// pythonWithLibrdkafka is Debian's python3 with python3-confluent-kafka,
// librdkafka's Python binding (it installs there, not into other
// pythons); under CI a missing binding fails the test.
const pythonWithLibrdkafka = "/usr/bin/python3"

// librdkafkaScript drives librdkafka for these tests: see its docstring.
var librdkafkaScript = filepath.Join("testdata", "librdkafka_client.py")

func requireLibrdkafka(t *testing.T) {
	t.Helper()
	if err := exec.Command(pythonWithLibrdkafka, "-c", "import confluent_kafka").Run(); err != nil {
		testenv.Unavailable(t, "Python's confluent_kafka under "+pythonWithLibrdkafka, "apt-get install python3-confluent-kafka (CI installs it)")
	}
}

// librdkafkaReport is what the script prints of what librdkafka told
// the application.
type librdkafkaReport struct {
	Errors           [][2]string `json:"errors"` // error_cb: code name, reason
	DeliveryErrors   [][2]string `json:"delivery_errors"`
	ConsumeErrors    [][2]string `json:"consume_errors"`
	Throttles        []float64   `json:"throttles"` // throttle_cb, ms
	StatsThrottleMax float64     `json:"stats_throttle_max"`
	Produced         int         `json:"produced"`
	Consumed         int         `json:"consumed"`
	Undelivered      int         `json:"undelivered"`
	Elapsed          float64     `json:"elapsed"`
	Bytes            float64     `json:"bytes"`
}

func (r librdkafkaReport) errorCodes() []string {
	var codes []string
	for _, e := range r.Errors {
		codes = append(codes, e[0])
	}
	return codes
}

// syncBuffer is a process's stderr, written while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func readReport(t *testing.T, out *bufio.Reader, stderr *syncBuffer) librdkafkaReport {
	t.Helper()
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("librdkafka client: no report (%v)\n%s", err, stderr)
	}
	var r librdkafkaReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("librdkafka client report %q: %v", line, err)
	}
	return r
}

// librdkafka (confluent_kafka), logged in with SCRAM-SHA-512, keeps
// producing and consuming across several 2 s sessions
// (connections.max.reauth.ms): every record delivered and read back in
// order, no delivery or consume error. librdkafka 2.2 and later
// re-authenticate in place; older ones do not, and the broker closes
// each expired connection at its next request, unanswered, as Kafka
// does: librdkafka reconnects, logs in again and retries, telling the
// application only of the dropped connection (error_cb _TRANSPORT). The
// broker counts one or the other. The user deleted, librdkafka's next
// login is refused and its record is not delivered.
func TestLibrdkafkaAcrossSASLSessionLifetimes(t *testing.T) {
	testenv.SkipIfShort(t, "a librdkafka client across several 2 s SASL sessions")
	requireLibrdkafka(t)
	const lifetime = 2 * time.Second
	adjust, addrs := saslListeners(t, "PLAINTEXT", "SASL_PLAINTEXT")
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Adjust: func(cfg *broker.Config) {
		adjust(cfg)
		cfg.SASLMaxReauth = lifetime
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	}})
	admin, err := kgo.NewClient(kgo.SeedBrokers(addrs["PLAINTEXT"]...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	adm := kadm.NewClient(admin)
	ctx := clustertest.CtxFor(t, time.Minute)
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "rd", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "rd-pass"}}); err != nil || altered["rd"].Err != nil {
		t.Fatalf("creating the user: %v %+v", err, altered)
	}
	c.KafkaCreate(adm, "rdreauth", 1, 1, nil)
	c.WaitFor(20*time.Second, "the user logging in", func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs["SASL_PLAINTEXT"]...), kgo.RetryTimeout(time.Second),
			kgo.SASL(scram.Auth{User: "rd", Pass: "rd-pass"}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Ping(ctx) == nil
	})

	cmd := exec.CommandContext(ctx, pythonWithLibrdkafka, "-u", librdkafkaScript, "roundtrip",
		strings.Join(addrs["SASL_PLAINTEXT"], ","), "rd", "rd-pass", "rdreauth", fmt.Sprint((3*lifetime + lifetime/2).Seconds()))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out := bufio.NewReader(stdoutPipe)

	r := readReport(t, out, &stderr)
	t.Logf("librdkafka: %d produced, %d consumed; told the application of %v", r.Produced, r.Consumed, r.errorCodes())
	if r.Produced < 5 || r.Consumed != r.Produced || len(r.DeliveryErrors) > 0 || len(r.ConsumeErrors) > 0 {
		t.Fatalf("librdkafka across the sessions: %+v\n%s", r, stderr.String())
	}
	for _, code := range r.errorCodes() {
		// A closed connection (and, one broker, every broker down a
		// moment) is what librdkafka says of an expired session it does
		// not re-authenticate; nothing else may come up.
		if code != "_TRANSPORT" && code != "_ALL_BROKERS_DOWN" {
			t.Fatalf("librdkafka reported %v across the sessions\n%s", r.Errors, stderr.String())
		}
	}
	reauths := c.Metric(1, `tidemark_kafka_sasl_reauthentications_total{mechanism="SCRAM-SHA-512",result="success"}`)
	expired := c.Metric(1, `tidemark_kafka_connections_closed_total{reason="session_expired"}`)
	t.Logf("broker: %v re-authentications, %v expired sessions closed", reauths, expired)
	// Two connections (producer, consumer) over three lifetimes and more.
	if reauths+expired < 4 {
		t.Fatalf("%v re-authentications and %v expired sessions closed over %s of 2 s sessions", reauths, expired, 3*lifetime)
	}

	// Deleted: the next login is refused, the record not delivered.
	if altered, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "rd", Mechanism: kadm.ScramSha512}}, nil); err != nil || altered["rd"].Err != nil {
		t.Fatalf("deleting the user: %v %+v", err, altered)
	}
	if _, err := io.WriteString(stdin, "deleted\n"); err != nil {
		t.Fatal(err)
	}
	r = readReport(t, out, &stderr)
	if os.Getenv("LIBRDKAFKA_DEBUG") != "" {
		t.Logf("librdkafka's log:\n%s", stderr.String())
	}
	t.Logf("librdkafka after the deletion: %d undelivered; told the application of %v", r.Undelivered, r.Errors)
	if r.Undelivered == 0 && len(r.DeliveryErrors) == 0 {
		t.Fatalf("a deleted user's record was delivered: %+v", r)
	}
	if !slices.Contains(r.errorCodes(), "_AUTHENTICATION") {
		t.Fatalf("librdkafka was not told its login was refused: %+v\n%s", r, stderr.String())
	}
}

// librdkafkaProduce runs the script's produce mode: count records of
// size bytes as clientID, one request each, over PLAINTEXT.
func librdkafkaProduce(t *testing.T, boot, clientID, topic string, count, size int) librdkafkaReport {
	t.Helper()
	cmd := exec.CommandContext(clustertest.CtxFor(t, 60*time.Second), pythonWithLibrdkafka, "-u", librdkafkaScript, "produce",
		boot, clientID, topic, fmt.Sprint(count), fmt.Sprint(size))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("librdkafka producer %s: %v\n%s", clientID, err, stderr.String())
	}
	r := readReport(t, bufio.NewReader(strings.NewReader(string(out))), &stderr)
	if len(r.DeliveryErrors) > 0 || len(r.Errors) > 0 {
		t.Fatalf("librdkafka producer %s: %+v\n%s", clientID, r, stderr.String())
	}
	return r
}

// A producer_byte_rate set through AlterClientQuotas on a librdkafka
// producer's client.id throttles it: the Produce answers carry
// throttle_time_ms, which librdkafka reports (throttle_cb, and the
// per-broker throttle window of its statistics), and it is held to
// about the quota; a librdkafka producer with another client.id, the
// same load, is told of no throttle.
func TestLibrdkafkaProducerHeldToItsClientIDQuota(t *testing.T) {
	testenv.SkipIfShort(t, "a throttled librdkafka producer runs for several seconds")
	requireLibrdkafka(t)
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Controllers: 1, Kafka: true, BrokerSettings: map[string]string{
		"quota.window.num": "2", "quota.window.size.seconds": "1"}})
	adm := kadm.NewClient(c.KafkaClient(kgo.ClientID("admin")))
	c.KafkaCreate(adm, "rdq", 1, 1, nil)
	const rate, count, size = 4000, 12, 4000
	boot := strings.Join(c.KafkaAddrs(), ",")
	alterQuotas(t, adm, quotaEntry("rd-slow", rate, false))
	// The broker follows the controller's entities: short runs as rd-slow
	// until librdkafka reports a throttle, then one that is measured.
	c.WaitFor(30*time.Second, "librdkafka told of a throttle as rd-slow", func() bool {
		r := librdkafkaProduce(t, boot, "rd-slow", "rdq", 2, size)
		return len(r.Throttles) > 0 && r.StatsThrottleMax > 0
	})

	fast := librdkafkaProduce(t, boot, "rd-fast", "rdq", count, size)
	t.Logf("rd-fast: %d B in %.1f s, throttles %v", int(fast.Bytes), fast.Elapsed, fast.Throttles)
	if len(fast.Throttles) > 0 || fast.StatsThrottleMax > 0 {
		t.Fatalf("a client id without a quota was throttled: %+v", fast)
	}

	slow := librdkafkaProduce(t, boot, "rd-slow", "rdq", count, size)
	achieved := slow.Bytes / slow.Elapsed
	t.Logf("rd-slow: %d B in %.1f s (%.0f B/s under a %d B/s quota), %d throttles reported (%v ms), statistics' throttle max %v ms",
		int(slow.Bytes), slow.Elapsed, achieved, rate, len(slow.Throttles), slow.Throttles, slow.StatsThrottleMax)
	if len(slow.Throttles) < count/2 {
		t.Fatalf("librdkafka was told of %d throttles in %d requests over its client id's quota: %+v", len(slow.Throttles), count, slow)
	}
	if achieved > 3*rate {
		t.Fatalf("librdkafka produced at %.0f B/s under a %d B/s quota", achieved, rate)
	}
}
