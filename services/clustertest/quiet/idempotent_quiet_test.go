package quiet

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// An idempotent producer across quiet moments: its state expires
// (producer.id.expiration.ms) or loses its batches to retention while it is
// idle, leaders move and restart in the gap, and then it writes again. Each
// test wants every acknowledged write in the log once, at the offset its
// acknowledgement named, in the order sent, no error reaching the
// application, a resend of the last acknowledged batch (its answer lost)
// answered with its original offsets and not written again, and the
// partition whole afterwards.

// idemWriter is an idempotent acks=all Go producer on partition 0 of topic
// and what it was told.
type idemWriter struct {
	c     *clustertest.Cluster
	topic string
	p     *client.Producer
	acked []string
}

func newIdemWriter(c *clustertest.Cluster, topic string) *idemWriter {
	c.T.Helper()
	p, err := client.NewProducer(c.Client(), client.ProducerOptions{Acks: client.AcksAll, Idempotence: client.IdempotenceOn,
		DeliveryTimeout: time.Minute})
	if err != nil {
		c.T.Fatal(err)
	}
	c.T.Cleanup(func() { _ = p.Close(context.Background()) })
	return &idemWriter{c: c, topic: topic, p: p}
}

// write produces n records one at a time, each its own batch, and checks
// that each is acknowledged at the next offset.
func (w *idemWriter) write(prefix string, n int) {
	w.c.T.Helper()
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := w.p.Produce(ctx, client.Record{Topic: w.topic, Partition: 0, ManualPartition: true, Value: []byte(v)})
		cancel()
		if err != nil {
			w.c.T.Fatalf("idempotent write %s: %v", v, err)
		}
		if want := int64(len(w.acked)); res.Offset != want {
			w.c.T.Fatalf("idempotent write %s acknowledged at offset %d, want %d", v, res.Offset, want)
		}
		w.acked = append(w.acked, v)
	}
}

// lastBatch is the partition's last batch as its leader stores it.
func lastBatch(c *clustertest.Cluster, topic string) recordbatch.Batch {
	c.T.Helper()
	leader := c.Partition(topic, 0).GetLeader()
	v, _ := c.View(leader, topic, 0)
	resp, err := c.BrokerClient(leader).Fetch(context.Background(), &brokerv1.FetchRequest{
		Topic: topic, Partition: 0, Offset: v.LogStart, MaxBytes: 1 << 20, CurrentLeaderEpoch: -1, RawBatches: true})
	if err != nil {
		c.T.Fatalf("raw fetch of %s-0 from broker %d: %v", topic, leader, err)
	}
	var last recordbatch.Batch
	for b, err := range recordbatch.All(resp.GetRecordBatches()) {
		if err != nil {
			c.T.Fatal(err)
		}
		last = b
	}
	if last == nil || !last.HasProducerID() || last.BaseSequence() == 0 {
		c.T.Fatalf("%s-0 does not end with an idempotent batch past sequence 0: %v", topic, last)
	}
	return slices.Clone(last)
}

// resend sends b again to the partition's leader, as a producer resends a
// batch whose answer it lost, and returns the offset it was acknowledged at
// or the leader's refusal.
func resend(c *clustertest.Cluster, topic string, b recordbatch.Batch) (int64, kerr.Code) {
	c.T.Helper()
	leader := c.Partition(topic, 0).GetLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.BrokerClient(leader).Produce(ctx, &brokerv1.ProduceRequest{Topic: topic, Partition: 0, Acks: -1,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: slices.Clone(b)}})
	if err != nil {
		return -1, kerr.FromStatus(err).Code
	}
	return resp.GetBaseOffset(), kerr.None
}

// checkRetryIsDuplicate resends the partition's last batch: the leader must
// answer with its original offset and write nothing.
func checkRetryIsDuplicate(c *clustertest.Cluster, topic string, acked []string) {
	c.T.Helper()
	checkResendIsDuplicate(c, topic, lastBatch(c, topic))
	checkIdemLog(c, topic, acked)
}

// checkResendIsDuplicate resends last, a batch the partition holds or held
// (retention may have deleted it since): the leader must answer with its
// original offset and write nothing.
func checkResendIsDuplicate(c *clustertest.Cluster, topic string, last recordbatch.Batch) {
	c.T.Helper()
	c.WaitFor(20*time.Second, "the leader to answer the resent batch", func() bool {
		off, code := resend(c, topic, last)
		switch {
		case code == kerr.None && off != last.BaseOffset():
			c.T.Fatalf("the resent last batch (producer %d, sequence %d) was written again at %d; first at %d",
				last.ProducerID(), last.BaseSequence(), off, last.BaseOffset())
		case code == kerr.None:
			return true
		case code.Retriable():
			return false
		}
		c.T.Fatalf("the resent last batch (producer %d, epoch %d, sequence %d, max timestamp %d, now %d) refused: %s; want its original offset %d",
			last.ProducerID(), last.ProducerEpoch(), last.BaseSequence(), last.MaxTimestamp(), time.Now().UnixMilli(), code, last.BaseOffset())
		return false
	})
}

// awaitForgotten waits until the leader no longer knows the producer of the
// partition's last batch (its state expired): a resend of that batch, which
// the leader otherwise answers as a duplicate, is UNKNOWN_PRODUCER_ID. It
// writes nothing either way.
func awaitForgotten(c *clustertest.Cluster, topic string, within time.Duration) {
	c.T.Helper()
	last := lastBatch(c, topic)
	c.WaitFor(within, "the leader to forget the idle producer", func() bool {
		off, code := resend(c, topic, last)
		if code == kerr.None && off != last.BaseOffset() {
			c.T.Fatalf("the resent last batch was written again at %d; first at %d", off, last.BaseOffset())
		}
		return code == kerr.UnknownProducerID
	})
}

// checkIdemLog wants the partition settled on every replica, each holding
// exactly acked.
func checkIdemLog(c *clustertest.Cluster, topic string, acked []string) {
	c.T.Helper()
	replicas := c.Partition(topic, 0).GetReplicas()
	c.WaitSettled(20*time.Second, topic, 0, replicas)
	if got := c.SameLogs(topic, 0, replicas...); !slices.Equal(got, acked) {
		c.T.Fatalf("%s-0 holds %q, want %q", topic, got, acked)
	}
}

// moveLeader stops the partition's leader (a controlled shutdown) and
// starts it again; it returns the new leader.
func moveLeader(c *clustertest.Cluster, topic string) int32 {
	c.T.Helper()
	old := c.Leader(topic, 0)
	if err := c.StopBroker(old); err != nil {
		c.T.Fatal(err)
	}
	c.WaitFor(20*time.Second, "another leader", func() bool {
		l := c.Partition(topic, 0).GetLeader()
		return l >= 0 && l != old && c.Leads(l, topic, 0)
	})
	c.StartBroker(old)
	c.WaitBrokerAlive(old)
	return c.Partition(topic, 0).GetLeader()
}

// An idempotent producer idle past producer.id.expiration.ms writes again:
// the leader forgot it, answers its next sequence UNKNOWN_PRODUCER_ID, and
// the producer starts a new epoch at sequence 0 without the application
// seeing an error. Then the same with the leader moved during the gap (the
// restarted broker drops the expired producer as it loads), and with the
// preferred leader elected back.
func TestIdempotentProducerResumesAfterItsStateExpired(t *testing.T) {
	if testing.Short() {
		t.Skip("idles past producer.id.expiration.ms")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: clustertest.QuickExpiry})
	const topic = "idem-expired"
	c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	w := newIdemWriter(c, topic)
	w.write("a", 4)

	awaitForgotten(c, topic, 20*time.Second)
	w.write("b", 4)
	checkRetryIsDuplicate(c, topic, w.acked)

	// The leader moves while the producer idles past its expiry.
	moveLeader(c, topic)
	awaitForgotten(c, topic, 20*time.Second)
	w.write("c", 4)
	checkRetryIsDuplicate(c, topic, w.acked)

	awaitForgotten(c, topic, 20*time.Second)
	electPreferredAndWait(c, topic)
	awaitForgotten(c, topic, 20*time.Second)
	w.write("d", 4)
	checkRetryIsDuplicate(c, topic, w.acked)
}

// Replicas forget an idle producer at different moments: broker 3 keeps
// producers for an hour, the others for a second and a half. The producer
// resumes first on a leader that forgot it (a new epoch, which broker 3
// takes from it), then, idle again, on broker 3, which still knows it (its
// sequence goes on, and the others, having forgotten it, take it anew);
// then broker 3 stops and a resend of the last batch goes to one of them.
func TestIdempotentProducerWhoseReplicasExpireItApart(t *testing.T) {
	if testing.Short() {
		t.Skip("idles past producer.id.expiration.ms")
	}
	const keeper = 3
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: clustertest.QuickExpiry, Adjust: func(cfg *broker.Config) {
		if cfg.ID == keeper {
			cfg.Settings["producer.id.expiration.ms"] = "3600000"
		}
	}})
	const topic = "idem-apart"
	c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "1"})
	w := newIdemWriter(c, topic)
	w.write("a", 3)
	if c.Leader(topic, 0) == keeper {
		moveLeader(c, topic)
	}
	awaitForgotten(c, topic, 20*time.Second)
	w.write("b", 3)
	checkRetryIsDuplicate(c, topic, w.acked)

	// Idle again; then only the keeper is left to lead.
	awaitForgotten(c, topic, 20*time.Second)
	var stopped []int32
	for c.Leader(topic, 0) != keeper {
		old := c.Leader(topic, 0)
		if err := c.StopBroker(old); err != nil {
			t.Fatal(err)
		}
		stopped = append(stopped, old)
		c.WaitFor(20*time.Second, "another leader", func() bool {
			l := c.Partition(topic, 0).GetLeader()
			return l >= 0 && l != old && c.Leads(l, topic, 0)
		})
	}
	w.write("c", 3)
	for _, id := range stopped {
		c.StartBroker(id)
		c.WaitBrokerAlive(id)
	}
	checkIdemLog(c, topic, w.acked)
	if err := c.StopBroker(keeper); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(20*time.Second, "another leader", func() bool {
		l := c.Partition(topic, 0).GetLeader()
		return l >= 0 && l != keeper && c.Leads(l, topic, 0)
	})
	last := lastBatch(c, topic)
	if off, code := resend(c, topic, last); code != kerr.None || off != last.BaseOffset() {
		t.Fatalf("the last batch resent to broker %d: offset %d, %s; want its original offset %d",
			c.Leader(topic, 0), off, code, last.BaseOffset())
	}
	w.write("d", 3)
	c.StartBroker(keeper)
	c.WaitBrokerAlive(keeper)
	checkRetryIsDuplicate(c, topic, w.acked)
}

// The segments holding an idle producer's last batches are deleted by
// retention on every replica (KIP-360: the log starts past its last write).
// The leader keeps its state, so a resend of its last batch is still a
// duplicate and its next write goes on with its sequence; then the
// leadership moves (the old leader restarts and loads the producer from its
// snapshot alone: no batch of it is left), and the batch whose answer was
// lost in that move is resent to the new leader, then to the old one again.
func TestIdempotentProducerPastItsDeletedBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for time retention")
	}
	c := clustertest.Start(t, clustertest.Options{BrokerSettings: map[string]string{"log.retention.check.interval.ms": "200", "replica.lag.time.max.ms": "1000"}})
	const topic = "idem-retained"
	c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2", "retention.ms": "1500", "segment.ms": "300"})
	replicas := c.Partition(topic, 0).GetReplicas()
	w := newIdemWriter(c, topic)
	w.write("a", 3)
	last := lastBatch(c, topic)
	awaitEmptied(c, topic, replicas, int64(len(w.acked)))
	checkResendIsDuplicate(c, topic, last)
	w.write("b", 3)
	last = lastBatch(c, topic)
	awaitEmptied(c, topic, replicas, int64(len(w.acked)))

	preferred := c.Leader(topic, 0)
	moveLeader(c, topic)
	checkResendIsDuplicate(c, topic, last)
	c.WaitSettled(20*time.Second, topic, 0, replicas)
	electPreferredAndWait(c, topic)
	if l := c.Leader(topic, 0); l != preferred {
		t.Fatalf("broker %d leads after the preferred election, want %d", l, preferred)
	}
	checkResendIsDuplicate(c, topic, last)
	w.write("c", 3)
	checkRetainedTail(c, topic, replicas, w.acked)
}

// awaitEmptied waits until retention has emptied every replica: the log
// starts at leo.
func awaitEmptied(c *clustertest.Cluster, topic string, replicas []int32, leo int64) {
	c.T.Helper()
	c.WaitFor(30*time.Second, "retention to empty every replica", func() bool {
		for _, id := range replicas {
			if v, ok := c.View(id, topic, 0); !ok || v.LogStart != leo || v.LEO != leo {
				return false
			}
		}
		return true
	})
}

// checkRetainedTail wants the partition settled with its LEO at the last
// acknowledged write, and every replica holding the same tail of acked
// (retention may have deleted the rest).
func checkRetainedTail(c *clustertest.Cluster, topic string, replicas []int32, acked []string) {
	c.T.Helper()
	c.WaitSettled(20*time.Second, topic, 0, replicas)
	if v, _ := c.View(c.Leader(topic, 0), topic, 0); v.LEO != int64(len(acked)) {
		c.T.Fatalf("%s-0 ends at %d, want %d: every write once", topic, v.LEO, len(acked))
	}
	got := c.SameLogs(topic, 0, replicas...)
	if len(got) > len(acked) || !slices.Equal(got, acked[len(acked)-len(got):]) {
		c.T.Fatalf("%s-0 holds %q, want a tail of %q", topic, got, acked)
	}
}

// The leader restarts twice in quick succession while an idempotent
// producer is idle, killed or stopped each time before the controller has
// settled the first return. The producer's state rebuilt on loading (from a
// snapshot and the log after a kill) must still know its last batch: resent
// to whichever leads, and to the twice-restarted broker once it leads
// again, it is a duplicate; the producer's next writes go on in sequence.
func TestIdempotentProducerAcrossQuickLeaderRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a leader twice")
	}
	c := clustertest.Start(t, clustertest.Options{})
	for _, kill := range []bool{true, false} {
		name := map[bool]string{true: "killed", false: "stopped"}[kill]
		t.Run(name, func(t *testing.T) {
			c.T = t
			topic := "idem-restarts-" + name
			c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
			replicas := c.Partition(topic, 0).GetReplicas()
			w := newIdemWriter(c, topic)
			w.write("a", 5)
			leader := c.Leader(topic, 0)
			for range 2 {
				if kill {
					c.CrashBroker(leader)
				} else if err := c.StopBroker(leader); err != nil {
					t.Fatal(err)
				}
				c.StartBroker(leader)
			}
			c.WaitBrokerAlive(leader)
			checkRetryIsDuplicate(c, topic, w.acked)
			c.WaitSettled(20*time.Second, topic, 0, replicas)
			electPreferredAndWait(c, topic)
			checkRetryIsDuplicate(c, topic, w.acked)
			w.write("b", 3)
			checkRetryIsDuplicate(c, topic, w.acked)
		})
	}
}

// kgoWriter is a franz-go idempotent acks=all producer (kgo's default) on
// partition 0 of topic, through the Kafka listener, and what it was told.
type kgoWriter struct {
	c     *clustertest.Cluster
	topic string
	cl    *kgo.Client
	acked []string
}

func newKgoWriter(c *clustertest.Cluster, topic string) *kgoWriter {
	c.T.Helper()
	c.KafkaCreate(kadm.NewClient(c.KafkaClient()), topic, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	return &kgoWriter{c: c, topic: topic, cl: c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))}
}

// write produces n records one at a time and checks that each is
// acknowledged at the next offset.
func (w *kgoWriter) write(prefix string, n int) {
	w.c.T.Helper()
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := w.cl.ProduceSync(ctx, &kgo.Record{Topic: w.topic, Partition: 0, Value: []byte(v)}).First()
		cancel()
		if err != nil {
			w.c.T.Fatalf("kgo idempotent write %s: %v", v, err)
		}
		if want := int64(len(w.acked)); r.Offset != want {
			w.c.T.Fatalf("kgo idempotent write %s acknowledged at offset %d, want %d", v, r.Offset, want)
		}
		w.acked = append(w.acked, v)
	}
}

// A franz-go idempotent producer idle past producer.id.expiration.ms writes
// again through the Kafka listener: the leader answers UNKNOWN_PRODUCER_ID
// and kgo starts over at sequence 0 without failing the write; then the
// same with the leader moved during the gap.
func TestKafkaIdempotentProducerResumesAfterItsStateExpired(t *testing.T) {
	if testing.Short() {
		t.Skip("idles past producer.id.expiration.ms")
	}
	c := clustertest.Start(t, clustertest.Options{Kafka: true, BrokerSettings: clustertest.QuickExpiry})
	w := newKgoWriter(c, "kgo-idem-expired")
	w.write("a", 4)
	awaitForgotten(c, w.topic, 20*time.Second)
	w.write("b", 4)
	checkRetryIsDuplicate(c, w.topic, w.acked)

	moveLeader(c, w.topic)
	awaitForgotten(c, w.topic, 20*time.Second)
	w.write("c", 4)
	checkRetryIsDuplicate(c, w.topic, w.acked)
}

// A franz-go idempotent producer's leader is killed twice in quick
// succession while the producer idles: a resend of its last batch is a
// duplicate on whichever leads and on the restarted broker once it leads
// again, and kgo's next writes go on in sequence.
func TestKafkaIdempotentProducerAcrossQuickLeaderRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a leader twice")
	}
	c := clustertest.Start(t, clustertest.Options{Kafka: true})
	w := newKgoWriter(c, "kgo-idem-restarts")
	replicas := c.Partition(w.topic, 0).GetReplicas()
	w.write("a", 4)
	leader := c.Leader(w.topic, 0)
	for range 2 {
		c.CrashBroker(leader)
		c.StartBroker(leader)
	}
	c.WaitBrokerAlive(leader)
	checkRetryIsDuplicate(c, w.topic, w.acked)
	w.write("b", 2)
	c.WaitSettled(20*time.Second, w.topic, 0, replicas)
	electPreferredAndWait(c, w.topic)
	checkRetryIsDuplicate(c, w.topic, w.acked)
	w.write("c", 4)
	checkRetryIsDuplicate(c, w.topic, w.acked)
}

// answerDropper is a Go client's dialer whose connections, while stalled,
// deliver no answer: requests reach the broker, their answers wait unread.
type answerDropper struct {
	mu      sync.Mutex
	stalled bool
	wake    chan struct{}
	conns   []net.Conn
}

func (d *answerDropper) dial(ctx context.Context, addr string) (net.Conn, error) {
	cn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conns = append(d.conns, cn)
	return stallingConn{Conn: cn, d: d}, nil
}

// stall holds back every answer from now on.
func (d *answerDropper) stall() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stalled, d.wake = true, make(chan struct{})
}

// drop closes every connection, losing the answers held back, and lets
// new connections answer.
func (d *answerDropper) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cn := range d.conns {
		_ = cn.Close()
	}
	d.conns = nil
	if d.stalled {
		d.stalled = false
		close(d.wake)
	}
}

type stallingConn struct {
	net.Conn
	d *answerDropper
}

func (c stallingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	// What arrives while stalled, even for a read begun before, is lost.
	c.d.mu.Lock()
	stalled, wake := c.d.stalled, c.d.wake
	c.d.mu.Unlock()
	if stalled {
		<-wake
		return 0, net.ErrClosed
	}
	return n, err
}

// An idempotent producer's write of a record replayed from yesterday (its
// CreateTime 25 hours old, past producer.id.expiration.ms) reaches the
// leader and is appended, but its answer is lost, and the leader's expiry
// pass runs before the producer's resend arrives. Expiry counted from the
// batch's timestamp, so the leader had forgotten the producer, answered the
// resend UNKNOWN_PRODUCER_ID, and the producer wrote the record again under
// a new epoch and was told the second offset. It counts from the append
// now: the resend is a duplicate, acknowledged at the first offset.
func TestResendOfAnOldRecordWhoseAnswerWasLostIsNotWrittenTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("holds back a broker's answers")
	}
	c := clustertest.Start(t, clustertest.Options{Brokers: 1})
	const topic = "idem-lost-answer"
	c.CreateTopic(topic, 1, 1, nil)
	var d answerDropper
	p, err := client.NewProducer(c.ClientWith(client.Options{Dialer: d.dial}), client.ProducerOptions{Acks: client.AcksAll,
		Idempotence: client.IdempotenceOn, DeliveryTimeout: time.Minute, RequestTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	write := func(v string, ts time.Time) (client.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		return p.Produce(ctx, client.Record{Topic: topic, Partition: 0, ManualPartition: true, Value: []byte(v), Timestamp: ts})
	}
	if _, err := write("first", time.Time{}); err != nil {
		t.Fatal(err)
	}
	d.stall()
	type outcome struct {
		res client.Result
		err error
	}
	lost := make(chan outcome, 1)
	go func() {
		res, err := write("replayed", time.Now().Add(-25*time.Hour))
		lost <- outcome{res, err}
	}()
	c.WaitFor(20*time.Second, "the write to be appended", func() bool {
		v, ok := c.View(1, topic, 0)
		return ok && v.LEO == 2
	})
	// The expiry pass, as every log.retention.check.interval.ms runs it.
	for _, r := range c.Broker(1).Replicas().Replicas() {
		if r.TP().Topic == topic {
			if n := r.Log().(interface{ ExpireProducers() int }).ExpireProducers(); n != 0 {
				t.Logf("the expiry pass forgot %d producers", n)
			}
		}
	}
	d.drop() // the producer resends on a new connection
	o := <-lost
	if o.err != nil || o.res.Offset != 1 {
		t.Fatalf("the write whose answer was lost: offset %d, %v; want offset 1", o.res.Offset, o.err)
	}
	if res, err := write("next", time.Time{}); err != nil || res.Offset != 2 {
		t.Fatalf("the next write: offset %d, %v; want offset 2", res.Offset, err)
	}
	if got := c.Values(1, topic, 0); !slices.Equal(got, []string{"first", "replayed", "next"}) {
		t.Fatalf("the log holds %q, want every write once", got)
	}
}

// An idempotent producer's write reaches the leader and is appended, its
// answer is lost, and the leader forgets the producer
// (producer.id.expiration.ms) before the resend arrives: the resend is
// UNKNOWN_PRODUCER_ID. The producer started a new epoch and sent the batch
// again, which wrote it twice. The batch may be in the log and the log
// still holds the producer's last acknowledged write, so it is looked for
// there: found, it is acknowledged at its offset; the next write goes on
// under a new epoch.
func TestLostAnswerThenForgottenProducerIsNotWrittenTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("holds back a broker's answers past producer.id.expiration.ms")
	}
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, BrokerSettings: clustertest.QuickExpiry})
	const topic = "idem-lost-forgotten"
	c.CreateTopic(topic, 1, 1, nil)
	write, o := writeWithLostAnswer(c, topic, func() { awaitForgotten(c, topic, 20*time.Second) })
	if o.err != nil || o.res.Offset != 1 {
		t.Fatalf("the write whose answer was lost: offset %d, %v; want offset 1, where it is", o.res.Offset, o.err)
	}
	if res, err := write("next"); err != nil || res.Offset != 2 {
		t.Fatalf("the next write: offset %d, %v; want offset 2", res.Offset, err)
	}
	if got := c.Values(1, topic, 0); !slices.Equal(got, []string{"first", "lost", "next"}) {
		t.Fatalf("the log holds %q, want every write once", got)
	}
}

// The same, but retention also deleted the producer's writes, the last
// acknowledged one and the one whose answer was lost, before the resend:
// the log starts past the last acknowledged offset, which is how Kafka's
// client knows retention took the producer's state, and the write is
// resent under a new epoch and acknowledged. (Kafka's rule; it held before
// too.)
func TestLostAnswerThenRetainedAwayProducerIsResent(t *testing.T) {
	if testing.Short() {
		t.Skip("holds back a broker's answers past retention and producer.id.expiration.ms")
	}
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, BrokerSettings: clustertest.QuickExpiry})
	const topic = "idem-lost-retained"
	c.CreateTopic(topic, 1, 1, map[string]string{"retention.ms": "1500", "segment.ms": "300"})
	write, o := writeWithLostAnswer(c, topic, func() {
		last := lastBatch(c, topic)
		awaitEmptied(c, topic, []int32{1}, 2)
		c.WaitFor(20*time.Second, "the leader to forget the idle producer", func() bool {
			_, code := resend(c, topic, last)
			return code == kerr.UnknownProducerID
		})
	})
	if o.err != nil || o.res.Offset != 2 {
		t.Fatalf("the write whose answer was lost: offset %d, %v; want it resent at offset 2", o.res.Offset, o.err)
	}
	if res, err := write("next"); err != nil || res.Offset != 3 {
		t.Fatalf("the next write: offset %d, %v; want offset 3", res.Offset, err)
	}
}

// lostAnswer is the outcome of a write whose first answer was lost.
type lostAnswer struct {
	res client.Result
	err error
}

// writeWithLostAnswer makes an idempotent producer on partition 0 of topic
// (on a one-broker cluster) and writes "first"; then writes "lost", holding
// its answer back until it is appended and meanwhile has run, and returns
// the producer's write and the outcome of "lost", which the producer resent
// on a new connection.
func writeWithLostAnswer(c *clustertest.Cluster, topic string, meanwhile func()) (func(string) (client.Result, error), lostAnswer) {
	c.T.Helper()
	var d answerDropper
	p, err := client.NewProducer(c.ClientWith(client.Options{Dialer: d.dial}), client.ProducerOptions{Acks: client.AcksAll,
		Idempotence: client.IdempotenceOn, DeliveryTimeout: time.Minute, RequestTimeout: 20 * time.Second})
	if err != nil {
		c.T.Fatal(err)
	}
	c.T.Cleanup(func() { _ = p.Close(context.Background()) })
	write := func(v string) (client.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		return p.Produce(ctx, client.Record{Topic: topic, Partition: 0, ManualPartition: true, Value: []byte(v)})
	}
	if _, err := write("first"); err != nil {
		c.T.Fatal(err)
	}
	d.stall()
	lost := make(chan lostAnswer, 1)
	go func() {
		res, err := write("lost")
		lost <- lostAnswer{res, err}
	}()
	c.WaitFor(20*time.Second, "the write to be appended", func() bool {
		v, ok := c.View(1, topic, 0)
		return ok && v.LEO == 2
	})
	meanwhile()
	d.drop()
	return write, <-lost
}
