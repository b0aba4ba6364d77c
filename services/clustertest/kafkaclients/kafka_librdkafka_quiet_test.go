package kafkaclients

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/clustertest/history"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/services/topicconfig"
)

// rdEvent is one line of the librdkafka script's member or producer mode.
type rdEvent struct {
	Ev     string  `json:"ev"`
	Topic  string  `json:"topic"`
	Code   string  `json:"code"`
	Reason string  `json:"reason"`
	Fatal  bool    `json:"fatal"`
	P      int32   `json:"p"`
	O      int64   `json:"o"`
	V      string  `json:"v"`
	Parts  [][]any `json:"parts"`
	T      float64 `json:"t"`
}

// rdProc is a librdkafka client process of the script, its events
// gathered as they come.
type rdProc struct {
	name   string
	t      *testing.T
	stdin  io.WriteCloser
	stderr syncBuffer
	done   chan struct{}
	mu     sync.Mutex
	events []rdEvent
}

func startRd(t *testing.T, name string, args ...string) *rdProc {
	t.Helper()
	cmd := exec.Command(pythonWithLibrdkafka, append([]string{"-u", librdkafkaScript}, args...)...)
	p := &rdProc{name: name, t: t, done: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev rdEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = rdEvent{Ev: "garbled", Reason: sc.Text()}
			}
			p.mu.Lock()
			p.events = append(p.events, ev)
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		p.close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if os.Getenv("LIBRDKAFKA_DEBUG") != "" {
			t.Logf("%s's log:\n%s", name, p.stderr.String())
		}
	})
	return p
}

func (p *rdProc) snapshot() []rdEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

func (p *rdProc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
}

// close closes stdin (the script then closes its client) and waits a
// while for the process to finish.
func (p *rdProc) close() {
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
}

// errors are the error_cb, consume and commit errors the application was
// told of.
func (p *rdProc) errors() []rdEvent {
	var errs []rdEvent
	for _, ev := range p.snapshot() {
		if strings.HasSuffix(ev.Ev, "error") || ev.Ev == "undelivered" {
			errs = append(errs, ev)
		}
	}
	return errs
}

// assignment is what the member holds now, as it last reported it.
func (p *rdProc) assignment() []int32 {
	var held []int32
	for _, ev := range p.snapshot() {
		if ev.Ev == "assignment" {
			held = held[:0]
			for _, tp := range ev.Parts {
				held = append(held, int32(tp[1].(float64)))
			}
		}
	}
	return held
}

// rdGroup is the members of one librdkafka group.
type rdGroup struct {
	name    string
	members []*rdProc
}

// read is what the group's members read of each partition, in order of
// offsets, failing the test on a record read twice.
func (g rdGroup) read(t *testing.T) map[int32][]string {
	t.Helper()
	seen := map[[2]int64]string{}
	for _, m := range g.members {
		for _, ev := range m.snapshot() {
			if ev.Ev != "record" {
				continue
			}
			k := [2]int64{int64(ev.P), ev.O}
			if v, dup := seen[k]; dup {
				g.logEvents(t)
				t.Fatalf("group %s read %d@%d twice (%q, %q)", g.name, ev.P, ev.O, v, ev.V)
			}
			seen[k] = ev.V
		}
	}
	out := map[int32][]string{}
	keys := slices.SortedFunc(maps.Keys(seen), func(a, b [2]int64) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	})
	for _, k := range keys {
		out[int32(k[0])] = append(out[int32(k[0])], seen[k])
	}
	return out
}

// logEvents logs what each member told, so a failure shows who read
// what when, and what it held then.
func (g rdGroup) logEvents(t *testing.T) {
	t.Helper()
	for _, m := range g.members {
		var b strings.Builder
		for _, ev := range m.snapshot() {
			fmt.Fprintf(&b, "\n  %.3f %s", ev.T, ev.Ev)
			switch {
			case ev.Ev == "record":
				fmt.Fprintf(&b, " %d@%d %q", ev.P, ev.O, ev.V)
			case ev.Parts != nil:
				fmt.Fprintf(&b, " %v", ev.Parts)
			case ev.Code != "":
				fmt.Fprintf(&b, " %s: %s (%d@%d)", ev.Code, ev.Reason, ev.P, ev.O)
			}
		}
		t.Logf("%s told:%s", m.name, b.String())
	}
}

// settled waits until the group read exactly want (each record once),
// committed the end of every partition, and is Stable with every member
// holding a share of the partitions, each assigned once.
func (g rdGroup) settled(c *clustertest.Cluster, t *testing.T, topic string, want map[int32][]string, what string) {
	t.Helper()
	c.WaitFor(time.Minute, fmt.Sprintf("group %s to read %v %s", g.name, want, what), func() bool {
		got := g.read(t)
		for p, vs := range want {
			if !slices.Equal(got[p], vs) {
				return false
			}
		}
		return len(got) <= len(want)
	})
	adm := c.FreshAdmin()
	defer adm.Close()
	var last string // what the last look found, told if the wait fails
	defer func() {
		if t.Failed() {
			t.Logf("group %s, last seen: %s", g.name, last)
		}
	}()
	c.WaitFor(time.Minute, fmt.Sprintf("group %s to commit every partition's end %s", g.name, what), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := adm.FetchOffsets(ctx, g.name)
		last = fmt.Sprintf("commits %v (%v)", got, err)
		if err != nil || got.Error() != nil {
			return false
		}
		for p, vs := range want {
			o, _ := got.Lookup(topic, p)
			if o.At > int64(len(vs)) {
				t.Fatalf("group %s committed %d on %s-%d, past its end %d", g.name, o.At, topic, p, len(vs))
			}
			if o.At != int64(len(vs)) {
				return false
			}
		}
		return true
	})
	c.WaitFor(time.Minute, fmt.Sprintf("group %s stable, every partition assigned once %s", g.name, what), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ds, err := adm.DescribeGroups(ctx, g.name)
		d := ds[g.name]
		last = fmt.Sprintf("state %s, %d members (%v %v)", d.State, len(d.Members), err, d.Err)
		if err != nil || d.Err != nil || d.State != "Stable" || len(d.Members) != len(g.members) {
			return false
		}
		var held []int32
		for _, m := range g.members {
			held = append(held, m.assignment()...)
		}
		slices.Sort(held)
		var all []int32
		for p := range want {
			all = append(all, p)
		}
		slices.Sort(all)
		return slices.Equal(held, all)
	})
}

// rdTolerated are the errors librdkafka tells an application of when a
// broker it was connected to goes away; any other fails the tests.
var rdTolerated = []string{"_TRANSPORT", "_ALL_BROKERS_DOWN"}

func checkRdErrors(t *testing.T, procs ...*rdProc) {
	t.Helper()
	for _, p := range procs {
		for _, e := range p.errors() {
			if !slices.Contains(rdTolerated, e.Code) {
				t.Errorf("%s was told of %s: %s (%s)", p.name, e.Code, e.Reason, e.Ev)
			}
		}
	}
}

// Two librdkafka consumer groups (subscribe; one auto-committing, one
// committing each record itself), two members each, left idle while their
// coordinators are killed, one is stopped by a controlled shutdown and
// started again, the active controller fails over, the preferred
// leaders are elected back, every broker is killed and started again one
// after the other, and a partition is added to their topic. After each,
// the records produced are read by each group once, the commits are at
// the end of every partition, and each group is Stable with every member
// holding partitions.
func TestLibrdkafkaIdleGroupsAcrossCoordinatorAndClusterFaults(t *testing.T) {
	testenv.SkipIfShort(t, "librdkafka groups across broker and controller faults")
	requireLibrdkafka(t)
	librdkafkaIdleGroups(t, map[string]func(member int) string{
		"rd-auto":   func(int) string { return `{"enable.auto.commit": true, "auto.commit.interval.ms": 300}` },
		"rd-manual": func(int) string { return `{"enable.auto.commit": false}` },
	})
}

// The same with static members (group.instance.id) under librdkafka's
// cooperative-sticky assignor (incremental rebalances, KIP-429).
func TestLibrdkafkaIdleStaticCooperativeGroupAcrossCoordinatorAndClusterFaults(t *testing.T) {
	testenv.SkipIfShort(t, "a librdkafka group across broker and controller faults")
	requireLibrdkafka(t)
	librdkafkaIdleGroups(t, map[string]func(member int) string{
		"rd-coop": func(i int) string {
			return fmt.Sprintf(`{"enable.auto.commit": false, "partition.assignment.strategy": "cooperative-sticky", "group.instance.id": "coop-%d"}`, i)
		},
	})
}

// librdkafkaIdleGroups runs two members of each group, each with the
// settings its function gives, through the faults.
func librdkafkaIdleGroups(t *testing.T, confs map[string]func(member int) string) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.GroupSettings,
		AdjustController: clustertest.OffsetsPartitions(3), PausableControllers: true})
	const topic = "rdquiet"
	clustertest.CreateAssigned(t, c, topic, [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
	boot := strings.Join(c.KafkaAddrs(), ",")
	var groups []rdGroup
	var procs []*rdProc
	for name, conf := range confs {
		g := rdGroup{name: name}
		for i := range 2 {
			m := startRd(t, fmt.Sprintf("%s-%d", name, i), "member", boot, name, topic, conf(i))
			g.members = append(g.members, m)
			procs = append(procs, m)
		}
		groups = append(groups, g)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range procs {
			var errs []string
			for _, e := range p.errors() {
				if e.Code != "_TRANSPORT" {
					errs = append(errs, e.Ev+" "+e.Code+": "+e.Reason)
				}
			}
			evs := p.snapshot()
			t.Logf("%s: errors but lost connections %q; last events %+v", p.name, errs, evs[max(0, len(evs)-6):])
		}
	})
	prod := c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	want := map[int32][]string{0: nil, 1: nil}
	write := func(partitions ...int32) {
		t.Helper()
		for _, p := range partitions {
			v := fmt.Sprintf("p%d-%d", p, len(want[p]))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			want[p] = append(want[p], v)
		}
	}
	check := func(what string, partitions ...int32) {
		t.Helper()
		time.Sleep(8 * time.Second) // idle: longer than session.timeout.ms
		write(partitions...)
		for _, g := range groups {
			g.settled(c, t, topic, want, what)
		}
		checkRdErrors(t, procs...)
		if t.Failed() {
			t.FailNow()
		}
	}
	check("at first", 0, 1, 0, 1)

	for _, g := range groups {
		id, _ := c.CoordinatorOf(g.name)
		c.CrashBroker(id)
		c.StartBroker(id)
		c.WaitBrokerAlive(id)
	}
	c.WaitOffsetsWhole(3)
	check("after the coordinators were killed", 0, 1)

	// One broker only: with two of three down the commits would need more
	// in-sync replicas of the offsets topic than are left.
	stopped, _ := c.CoordinatorOf(groups[0].name)
	if err := c.StopBroker(stopped); err != nil {
		t.Fatalf("controlled shutdown of broker %d: %v", stopped, err)
	}
	check("with a coordinator stopped by a controlled shutdown", 0, 1)
	c.StartBroker(stopped)
	c.WaitBrokerAlive(stopped)
	c.WaitOffsetsWhole(3)
	check("with the stopped coordinator back", 0, 1)

	active, epoch := c.ActiveController()
	c.KillController(active, epoch)
	check("after the controller failed over", 0, 1)

	c.WaitOffsetsWhole(3)
	tps := []history.TP{{Topic: topic, Partition: 0}, {Topic: topic, Partition: 1}}
	for p := range int32(3) {
		tps = append(tps, history.TP{Topic: topicconfig.OffsetsTopic, Partition: p})
	}
	if err := c.ElectPreferred(tps); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(20*time.Second, "the preferred leaders", func() bool {
		for _, tp := range tps {
			pd := c.Partition(tp.Topic, tp.Partition)
			if pd.GetLeader() != pd.GetReplicas()[0] || !c.Leads(pd.GetLeader(), tp.Topic, tp.Partition) {
				return false
			}
		}
		return true
	})
	check("after the preferred leaders were elected back", 0, 1)

	for id := int32(1); id <= 3; id++ { // no wait for the ISR in between
		c.CrashBroker(id)
		c.StartBroker(id)
	}
	c.WaitOffsetsWhole(3)
	check("after every broker was restarted in quick succession", 0, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(prod).CreatePartitions(ctx, 1, topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("add a partition: %v %v", err, resp)
	}
	c.WaitFor(30*time.Second, "the new partition led with its full ISR", func() bool {
		pd := c.Partition(topic, 2)
		return len(pd.GetIsr()) == 3 && c.Leads(pd.GetLeader(), topic, 2)
	})
	prod = c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)) // knows the new partition
	want[2] = nil
	check("after a partition was added", 0, 1, 2, 2)
}

// A broker refusing Metadata because its lease is unconfirmed or lost (its
// etcd link cut) answers a named topic LEADER_NOT_AVAILABLE with no
// partitions, as Kafka answers a topic whose partitions it does not know
// yet: every client retries it, and librdkafka ignores it. Before, it
// answered BROKER_NOT_AVAILABLE, which librdkafka takes for a permanent
// topic error: a consumer whose periodic metadata refresh reached that
// broker dropped the topic's partitions, told the application "desired
// partition is no longer available", and a group member rejoined.
func TestLibrdkafkaConsumerUnmovedByAFencedBrokersMetadata(t *testing.T) {
	testenv.SkipIfShort(t, "a librdkafka consumer while a broker is fenced")
	requireLibrdkafka(t)
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	const topic = "rdfenced"
	clustertest.CreateAssigned(t, c, topic, [][]int32{{1, 2}}, nil)
	prod := c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	write := func(v string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	read := func(m *rdProc, want ...string) {
		t.Helper()
		c.WaitFor(30*time.Second, fmt.Sprintf("librdkafka to read %v", want), func() bool {
			var got []string
			for _, ev := range m.snapshot() {
				if ev.Ev == "record" {
					got = append(got, ev.V)
				}
			}
			return slices.Equal(got, want)
		})
	}
	write("before")
	// Bootstrapped from broker 3 alone, which leads nothing: its
	// connection there carries metadata refreshes only.
	addr3 := c.KafkaAddrs()[2]
	m := startRd(t, "assigned", "member", addr3, "rd-fenced", topic,
		`{"assign": [0], "topic.metadata.refresh.interval.ms": 200, "enable.auto.commit": false}`)
	read(m, "before")

	c.EtcdLink(3).Pause()
	t.Cleanup(c.EtcdLink(3).Resume)
	c.WaitFor(20*time.Second, "broker 3 fenced", func() bool { return c.Broker(3).Fenced() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr3))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	// The fence is checked at each request: ask until it refuses.
	var mt []kmsg.MetadataResponseTopic
	c.WaitFor(20*time.Second, "the fenced broker to refuse Metadata", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatalf("Metadata from the fenced broker: %v", err)
		}
		mt = resp.(*kmsg.MetadataResponse).Topics
		return len(mt) != 1 || mt[0].ErrorCode != 0
	})
	if len(mt) != 1 || kerr.Code(mt[0].ErrorCode) != kerr.LeaderNotAvailable || len(mt[0].Partitions) != 0 {
		t.Errorf("the fenced broker answered %+v, want LEADER_NOT_AVAILABLE with no partitions", mt)
	}
	// Many metadata refreshes, some to broker 3, while the consumer idles.
	time.Sleep(4 * time.Second)
	write("while fenced")
	read(m, "before", "while fenced")
	checkRdErrors(t, m)
}

// produce sends each value to partition of the producer process and
// waits until each is delivered, returning the offsets it was told.
func (p *rdProc) produce(c *clustertest.Cluster, partition int32, values ...string) []int64 {
	c.T.Helper()
	for _, v := range values {
		p.send(fmt.Sprintf("%d %s", partition, v))
	}
	return p.delivered(c, values)
}

// burst has the producer process send n records prefix-0... to partition
// at once (pipelined, batched) and returns the offsets it was told.
func (p *rdProc) burst(c *clustertest.Cluster, partition int32, n int, prefix string) ([]string, []int64) {
	c.T.Helper()
	var values []string
	for i := range n {
		values = append(values, fmt.Sprintf("%s-%d", prefix, i))
	}
	p.send(fmt.Sprintf("burst %d %d %s", partition, n, prefix))
	return values, p.delivered(c, values)
}

// delivered waits until each of values is delivered, failing on a
// delivery error, and returns their offsets.
func (p *rdProc) delivered(c *clustertest.Cluster, values []string) []int64 {
	c.T.Helper()
	var offsets []int64
	c.WaitFor(90*time.Second, fmt.Sprintf("%s to deliver %v", p.name, values), func() bool {
		offsets = offsets[:0]
		for _, v := range values {
			i := slices.IndexFunc(p.snapshot(), func(ev rdEvent) bool {
				return (ev.Ev == "delivered" || ev.Ev == "delivery_error" || ev.Ev == "undelivered") && ev.V == v
			})
			if i < 0 {
				return false
			}
			ev := p.snapshot()[i]
			if ev.Ev != "delivered" {
				c.T.Fatalf("%s: %s %s: %s %s", p.name, v, ev.Ev, ev.Code, ev.Reason)
			}
			offsets = append(offsets, ev.O)
		}
		return true
	})
	return offsets
}

// A librdkafka idempotent acks=all producer idle past
// producer.id.expiration.ms, then again across a kill of its leader (and
// the leader's return), writes on: each record delivered once, at the
// next offset, no fatal error (OutOfOrderSequence) and no error but a
// lost connection told to the application; every replica holds the
// records once, in order.
func TestLibrdkafkaIdempotentProducerIdleAcrossExpiryAndALeaderKill(t *testing.T) {
	testenv.SkipIfShort(t, "a librdkafka idempotent producer across expiry and a leader kill")
	requireLibrdkafka(t)
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.QuickExpiry})
	const topic = "rdidem"
	clustertest.CreateAssigned(t, c, topic, [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	boot := strings.Join(c.KafkaAddrs(), ",")
	p := startRd(t, "idempotent", "producer", boot, topic,
		`{"enable.idempotence": true, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000}`)
	var acked []string
	write := func(prefix string, n int) {
		t.Helper()
		var vs []string
		for i := range n {
			vs = append(vs, fmt.Sprintf("%s-%d", prefix, i))
		}
		offsets := p.produce(c, 0, vs...)
		for i, o := range offsets {
			if o != int64(len(acked)) {
				t.Fatalf("%s delivered at offset %d, want %d (delivered before: %v)", vs[i], o, len(acked), acked)
			}
			acked = append(acked, vs[i])
		}
	}
	write("first", 3)
	time.Sleep(4 * time.Second) // past producer.id.expiration.ms on every replica
	write("after-expiry", 3)

	time.Sleep(4 * time.Second)
	leader := c.Leader(topic, 0)
	c.CrashBroker(leader)
	write("leader-killed", 3)
	c.StartBroker(leader)
	c.WaitFor(30*time.Second, "the full ISR again", func() bool { return len(c.Partition(topic, 0).GetIsr()) == 3 })
	time.Sleep(4 * time.Second)
	write("leader-back", 3)
	checkRdErrors(t, p)
	c.WaitHWAtLEO(topic, 0, 1, 2, 3)
	if logs := c.SameLogs(topic, 0, 1, 2, 3); !slices.Equal(logs, acked) {
		t.Fatalf("log %v, delivered %v", logs, acked)
	}
}

// Every client's connections idle past connections.max.idle.ms (1 s here)
// while nothing is produced: the brokers close them, and each client,
// librdkafka's group member and idempotent producer, franz-go's and
// sarama's producers, writes and reads on without an error reaching the
// application beyond librdkafka's note of a closed connection.
func TestKafkaClientsAcrossIdleConnectionCloses(t *testing.T) {
	testenv.SkipIfShort(t, "Kafka clients idle past connections.max.idle.ms")
	requireLibrdkafka(t)
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3),
		Adjust: func(cfg *broker.Config) {
			cfg.KafkaLimits.IdleTimeout = time.Second
			cfg.Telemetry.MetricsListen = "127.0.0.1:0"
		}})
	const topic = "rdidle"
	clustertest.CreateAssigned(t, c, topic, [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
	boot := strings.Join(c.KafkaAddrs(), ",")
	g := rdGroup{name: "rd-idle"}
	// librdkafka doubles a connection's reconnect backoff at every connect
	// within reconnect.backoff.max.ms (10 s) of the last: with the
	// coordinator connection closed between each two heartbeats it
	// reached 7 s, past the 6 s session, and the member lost its
	// partitions with a commit unsent (the next owner read that record
	// again). A client of brokers closing idle connections this soon caps
	// its backoff below its session.
	for i := range 2 {
		g.members = append(g.members, startRd(t, fmt.Sprintf("idle-member-%d", i), "member", boot, g.name, topic,
			`{"enable.auto.commit": false, "heartbeat.interval.ms": 2000, "fetch.wait.max.ms": 3000, "reconnect.backoff.max.ms": 1000}`))
	}
	rdp := startRd(t, "idle-producer", "producer", boot, topic, `{"enable.idempotence": true, "message.timeout.ms": 30000}`)
	kgoProd := c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ConnIdleTimeout(10*time.Minute))
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	sp, err := sarama.NewSyncProducer(c.KafkaAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()

	want := map[int32][]string{0: nil, 1: nil}
	for round := range 3 {
		for p := range int32(2) {
			v := fmt.Sprintf("rd-%d-%d", round, p)
			offs := rdp.produce(c, p, v)
			if offs[0] != int64(len(want[p])) {
				t.Fatalf("librdkafka: %s at offset %d, want %d", v, offs[0], len(want[p]))
			}
			want[p] = append(want[p], v)
			v = fmt.Sprintf("kgo-%d-%d", round, p)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			r, err := kgoProd.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).First()
			cancel()
			if err != nil || r.Offset != int64(len(want[p])) {
				t.Fatalf("franz-go: %s: %v, want offset %d", v, err, len(want[p]))
			}
			want[p] = append(want[p], v)
			v = fmt.Sprintf("sarama-%d-%d", round, p)
			_, off, err := sp.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder(v)})
			if err != nil || off != int64(len(want[p])) {
				t.Fatalf("sarama: %s at %d: %v, want offset %d", v, off, err, len(want[p]))
			}
			want[p] = append(want[p], v)
		}
		g.settled(c, t, topic, want, fmt.Sprintf("in round %d", round))
		time.Sleep(3500 * time.Millisecond) // idle: several connections.max.idle.ms
	}
	var closed float64
	for id := int32(1); id <= 3; id++ {
		closed += c.Metric(id, `tidemark_kafka_connections_closed_total{reason="idle"}`)
	}
	t.Logf("%v idle connections closed", closed)
	if closed == 0 {
		t.Fatal("no connection was closed for idleness")
	}
	for _, p := range append([]*rdProc{rdp}, g.members...) {
		for _, e := range p.errors() {
			t.Logf("%s was told of %s: %s", p.name, e.Code, e.Reason)
		}
	}
	checkRdErrors(t, append([]*rdProc{rdp}, g.members...)...)
}

// A librdkafka idempotent producer (five requests in flight) sends bursts
// of batches after idling past producer.id.expiration.ms, with its
// leader stopped by a controlled shutdown in one gap and killed in the
// next: every record is delivered once, at consecutive offsets in the
// order sent, with no fatal error (OutOfOrderSequence) told to the
// application.
func TestLibrdkafkaIdempotentBurstsAfterExpiryAndLeaderMoves(t *testing.T) {
	testenv.SkipIfShort(t, "a librdkafka idempotent producer across expiry and leader moves")
	requireLibrdkafka(t)
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.QuickExpiry})
	const topic = "rdburst"
	clustertest.CreateAssigned(t, c, topic, [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	boot := strings.Join(c.KafkaAddrs(), ",")
	p := startRd(t, "bursts", "producer", boot, topic,
		`{"enable.idempotence": true, "max.in.flight": 5, "linger.ms": 2, "batch.num.messages": 20, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000}`)
	var acked []string
	burst := func(prefix string) {
		t.Helper()
		vs, offsets := p.burst(c, 0, 200, prefix)
		for i, o := range offsets {
			if o != int64(len(acked)) {
				t.Fatalf("%s delivered at offset %d, want %d", vs[i], o, len(acked))
			}
			acked = append(acked, vs[i])
		}
	}
	burst("first")
	time.Sleep(4 * time.Second) // past producer.id.expiration.ms
	burst("expired")
	if err := c.StopBroker(c.Leader(topic, 0)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	burst("after-shutdown")
	for id := int32(1); id <= 3; id++ {
		if c.Broker(id) == nil {
			c.StartBroker(id)
		}
	}
	c.WaitFor(30*time.Second, "the full ISR again", func() bool { return len(c.Partition(topic, 0).GetIsr()) == 3 })
	time.Sleep(4 * time.Second)
	leader := c.Leader(topic, 0)
	c.CrashBroker(leader)
	burst("leader-killed")
	c.StartBroker(leader)
	c.WaitFor(30*time.Second, "the full ISR again", func() bool { return len(c.Partition(topic, 0).GetIsr()) == 3 })
	checkRdErrors(t, p)
	c.WaitHWAtLEO(topic, 0, 1, 2, 3)
	if logs := c.SameLogs(topic, 0, 1, 2, 3); !slices.Equal(logs, acked) {
		t.Fatalf("the replicas hold %d records, %d delivered (first difference at %d)", len(logs), len(acked), firstDiff(logs, acked))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A librdkafka consumer that read a partition to its end stays idle while
// time retention empties it on every replica and leadership moves twice
// (a kill, then the preferred leader elected back): librdkafka validates
// its position with the new leaders (OffsetForLeaderEpoch, KIP-320) on a
// log that holds no record of the epoch it read, and must read on from
// where it was: the next records once, no reset and no error.
func TestLibrdkafkaConsumerAcrossAnEmptiedLogAndLeaderMoves(t *testing.T) {
	testenv.SkipIfShort(t, "a librdkafka consumer across retention and leader moves")
	requireLibrdkafka(t)
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: map[string]string{"log.retention.check.interval.ms": "200"}})
	const topic = "rdaged"
	clustertest.CreateAssigned(t, c, topic, [][]int32{{1, 2, 3}}, map[string]string{"retention.ms": "2000", "segment.ms": "500"})
	prod := c.KafkaClient(kgo.ProducerLinger(0))
	var written []string
	write := func(prefix string) {
		t.Helper()
		for i := range 3 {
			v := fmt.Sprintf("%s-%d", prefix, i)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			written = append(written, v)
		}
	}
	m := startRd(t, "aged", "member", strings.Join(c.KafkaAddrs(), ","), "rd-aged", topic,
		`{"assign": [0], "enable.auto.commit": false, "topic.metadata.refresh.interval.ms": 1000}`)
	read := func() {
		t.Helper()
		c.WaitFor(30*time.Second, "librdkafka to read every record once", func() bool {
			var got []string
			for _, ev := range m.snapshot() {
				if ev.Ev == "record" {
					got = append(got, ev.V)
				}
			}
			if len(got) > len(written) || !slices.Equal(got, written[:len(got)]) {
				t.Fatalf("librdkafka read %v, written %v", got, written)
			}
			return len(got) == len(written)
		})
	}
	write("old")
	read()
	c.WaitFor(30*time.Second, "retention to empty every replica", func() bool {
		for id := int32(1); id <= 3; id++ {
			if v, ok := c.View(id, topic, 0); !ok || v.LogStart != 3 {
				return false
			}
		}
		return true
	})
	leader := c.Leader(topic, 0)
	c.CrashBroker(leader)
	c.StartBroker(leader)
	c.WaitFor(30*time.Second, "the full ISR", func() bool { return len(c.Partition(topic, 0).GetIsr()) == 3 })
	time.Sleep(3 * time.Second)
	write("after-kill")
	read()
	if err := c.ElectPreferred([]history.TP{{Topic: topic, Partition: 0}}); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(20*time.Second, "broker 1 leading", func() bool { return c.Leads(1, topic, 0) })
	c.WaitFor(30*time.Second, "retention to empty every replica again", func() bool {
		for id := int32(1); id <= 3; id++ {
			if v, ok := c.View(id, topic, 0); !ok || v.LogStart != 6 {
				return false
			}
		}
		return true
	})
	time.Sleep(3 * time.Second)
	write("after-election")
	read()
	checkRdErrors(t, m)
}

// A librdkafka group member subscribed to a pattern (it asks for every
// topic's metadata) stays idle while a matching topic is created, a
// partition is added to it and a broker is killed and started again:
// every record written afterwards is read once, and the member holds
// every partition of the matching topics.
func TestLibrdkafkaPatternSubscriberAcrossNewTopicsWhileIdle(t *testing.T) {
	testenv.SkipIfShort(t, "a librdkafka pattern subscriber across new topics")
	requireLibrdkafka(t)
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3)})
	clustertest.CreateAssigned(t, c, "rdre-a", [][]int32{{1, 2, 3}}, nil)
	m := startRd(t, "pattern", "member", strings.Join(c.KafkaAddrs(), ","), "rd-pattern", "^rdre-.*",
		`{"enable.auto.commit": false, "topic.metadata.refresh.interval.ms": 1000}`)
	written := map[string]bool{}
	write := func(topic string, p int32) {
		t.Helper()
		prod := c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
		v := fmt.Sprintf("%s-%d-%d", topic, p, len(written))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		written[v] = true
	}
	readAll := func(what string, held int) {
		t.Helper()
		c.WaitFor(time.Minute, "every record read once and every partition held "+what, func() bool {
			seen := map[string]bool{}
			for _, ev := range m.snapshot() {
				if ev.Ev != "record" {
					continue
				}
				if seen[ev.V] || !written[ev.V] {
					t.Fatalf("%s: read %s again or unwritten (read %v)", what, ev.V, seen)
				}
				seen[ev.V] = true
			}
			var parts int
			for _, ev := range m.snapshot() {
				if ev.Ev == "assignment" {
					parts = len(ev.Parts)
				}
			}
			return len(seen) == len(written) && parts == held
		})
	}
	write("rdre-a", 0)
	readAll("at first", 1)
	clustertest.CreateAssigned(t, c, "rdre-b", [][]int32{{2, 3, 1}}, nil)
	time.Sleep(4 * time.Second) // idle
	write("rdre-b", 0)
	write("rdre-a", 0)
	readAll("after a matching topic was created", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(c.KafkaClient()).CreatePartitions(ctx, 1, "rdre-b"); err != nil || resp["rdre-b"].Err != nil {
		t.Fatalf("add a partition: %v %v", err, resp)
	}
	c.CrashBroker(2)
	c.StartBroker(2)
	c.WaitFor(30*time.Second, "full ISRs", func() bool {
		return len(c.Partition("rdre-b", 1).GetIsr()) == 3 && len(c.Partition("rdre-b", 0).GetIsr()) == 3
	})
	time.Sleep(4 * time.Second) // idle
	write("rdre-b", 1)
	write("rdre-b", 0)
	write("rdre-a", 0)
	readAll("after a partition was added and a broker restarted", 3)
	checkRdErrors(t, m)
}
