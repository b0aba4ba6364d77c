package quiet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/clustertest/history"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/testenv"
)

// The Go client left idle while the cluster changes under it. Each test
// builds one producer and one consumer on their own clients, writes and
// reads a few records, lets the cluster change with nothing produced or
// read, and then expects the next write acknowledged with no error surfaced
// (within its delivery timeout), by the current leader, and the consumer to
// go on exactly after what it had read.

// quietClientTopic is the tests' topic; quietClientApp names the clients'
// end of their connections (c.Net).
const quietClientTopic, quietClientApp = "qc", "app"

// quietClient is a producer and a consumer of quietClientTopic-0 with what
// the producer had acknowledged and the consumer read.
type quietClient struct {
	c     *clustertest.Cluster
	p     *client.Producer
	cs    *client.Consumer
	acked []string // by offset
	read  int      // how many of acked the consumer returned
}

// startQuietClient creates quietClientTopic (one partition on every
// broker, preferred leader 1, acks=all writes that need two replicas) and a
// producer and consumer with short request timeouts.
func startQuietClient(t *testing.T, c *clustertest.Cluster, requestTimeout, deliveryTimeout time.Duration) *quietClient {
	t.Helper()
	return startQuietClientIn(t, c, requestTimeout, deliveryTimeout, "")
}

// startQuietClientIn is startQuietClient with a consumer in rack (KIP-392).
func startQuietClientIn(t *testing.T, c *clustertest.Cluster, requestTimeout, deliveryTimeout time.Duration, rack string) *quietClient {
	t.Helper()
	clustertest.CreateAssigned(t, c, quietClientTopic, [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	o := client.Options{RequestTimeout: requestTimeout, RetryBackoffMax: 500 * time.Millisecond, Dialer: c.Net.Dialer(quietClientApp)}
	p, err := client.NewProducer(c.ClientWith(o), client.ProducerOptions{Linger: -1,
		RequestTimeout: requestTimeout, DeliveryTimeout: deliveryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	cs, err := client.NewConsumer(c.ClientWith(o), client.ConsumerOptions{Topic: quietClientTopic, Partition: 0, Rack: rack})
	if err != nil {
		t.Fatal(err)
	}
	q := &quietClient{c: c, p: p, cs: cs}
	q.write(3, deliveryTimeout)
	q.readAll(15 * time.Second)
	return q
}

// write produces n records, each acknowledged within bound without an
// error, at the next offset of the log.
func (q *quietClient) write(n int, bound time.Duration) {
	q.c.T.Helper()
	for range n {
		v := fmt.Sprintf("%s-%d", quietClientTopic, len(q.acked))
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		res, err := q.p.Produce(ctx, client.Record{Topic: quietClientTopic, Partition: 0, ManualPartition: true, Value: []byte(v)})
		cancel()
		if err != nil {
			q.c.T.Fatalf("write %s: %v", v, err)
		}
		if res.Offset != int64(len(q.acked)) {
			q.c.T.Fatalf("write %s acknowledged at offset %d, want %d", v, res.Offset, len(q.acked))
		}
		q.acked = append(q.acked, v)
	}
}

// readAll polls until the consumer returned every acknowledged record,
// each once and in order.
func (q *quietClient) readAll(bound time.Duration) {
	q.c.T.Helper()
	deadline := time.Now().Add(bound)
	for q.read < len(q.acked) {
		if time.Now().After(deadline) {
			q.c.T.Fatalf("consumer read %d of %d acknowledged records within %v (reading from broker %d)", q.read, len(q.acked), bound, q.cs.ReadReplica())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		recs, err := q.cs.Poll(ctx)
		cancel()
		if err != nil {
			q.c.T.Logf("poll: %v", err)
		}
		for _, r := range recs {
			if q.read >= len(q.acked) || string(r.Value) != q.acked[q.read] || r.Offset != int64(q.read) {
				q.c.T.Fatalf("consumer read %q at offset %d after %d records, want %q", r.Value, r.Offset, q.read, q.acked[min(q.read, len(q.acked)-1)])
			}
			q.read++
		}
	}
}

// check writes and reads again after the quiet gap, and then wants every
// acknowledged record once, at its offset, on every replica.
func (q *quietClient) check(bound time.Duration) {
	q.c.T.Helper()
	q.write(3, bound)
	q.readAll(15 * time.Second)
	replicas := q.c.Partition(quietClientTopic, 0).GetReplicas()
	q.c.WaitSettled(20*time.Second, quietClientTopic, 0, replicas)
	logs := q.c.SameLogs(quietClientTopic, 0, replicas...)
	if fmt.Sprint(logs) != fmt.Sprint(q.acked) {
		q.c.T.Fatalf("log %v, acknowledged %v", logs, q.acked)
	}
}

// Every broker restarted one after the other (each back within its
// session), the preferred leader elected back, and the active controller
// failed over, all while the producer and the consumer are idle.
func TestQuietClientAcrossRollingRestartAndFailover(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts every broker and a controller")
	}
	c := clustertest.Start(t, clustertest.Options{PausableControllers: true})
	q := startQuietClient(t, c, 3*time.Second, 30*time.Second)
	for id := int32(1); id <= 3; id++ { // no wait for the ISR in between
		c.CrashBroker(id)
		c.StartBroker(id)
	}
	c.WaitSettled(20*time.Second, quietClientTopic, 0, []int32{1, 2, 3})
	if err := c.ElectPreferred([]history.TP{{Topic: quietClientTopic, Partition: 0}}); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(10*time.Second, "broker 1 leading", func() bool { return c.Leads(1, quietClientTopic, 0) })
	active, epoch := c.ActiveController()
	c.KillController(active, epoch)
	q.check(30 * time.Second)
}

// A broker restarted on another port while the client is idle: its cached
// address is dead, and the client must learn the new one from the other
// brokers' metadata, both where the broker leads again and as the first
// address the producer tries.
func TestQuietClientBrokerBackOnANewAddress(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts a broker")
	}
	c := clustertest.Start(t, clustertest.Options{})
	q := startQuietClient(t, c, 3*time.Second, 30*time.Second)
	// Stopped gracefully (the leadership moves away and is elected back),
	// then killed and started again at once.
	for _, stop := range []func(){
		func() {
			if err := c.StopBroker(1); err != nil {
				t.Fatal(err)
			}
		},
		func() { c.CrashBroker(1) },
	} {
		stop()
		c.MoveBroker(1)
		c.StartBroker(1)
		c.WaitSettled(20*time.Second, quietClientTopic, 0, []int32{1, 2, 3})
		if err := c.ElectPreferred([]history.TP{{Topic: quietClientTopic, Partition: 0}}); err != nil {
			t.Fatal(err)
		}
		c.WaitFor(10*time.Second, "broker 1 leading", func() bool { return c.Leads(1, quietClientTopic, 0) })
		q.check(20 * time.Second)
	}
}

// Every broker down for longer than the client's request timeout while it
// is idle; a write issued meanwhile waits and is acknowledged once they are
// back, within its delivery timeout, the next writes go through, and the
// consumer resumes.
func TestQuietClientAllBrokersDownAWhile(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts every broker")
	}
	c := clustertest.Start(t, clustertest.Options{})
	q := startQuietClient(t, c, 2*time.Second, 40*time.Second)
	for id := int32(1); id <= 3; id++ {
		c.CrashBroker(id)
	}
	type outcome struct {
		res client.Result
		err error
	}
	done := make(chan outcome, 1)
	v := fmt.Sprintf("%s-%d", quietClientTopic, len(q.acked))
	q.p.ProduceAsync(client.Record{Topic: quietClientTopic, Partition: 0, ManualPartition: true, Value: []byte(v)},
		func(res client.Result, err error) { done <- outcome{res, err} })
	// Longer than the request timeout, and a consumer poll that fails.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, _ = q.cs.Poll(ctx)
	<-ctx.Done()
	cancel()
	for id := int32(1); id <= 3; id++ {
		c.StartBroker(id)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("write while every broker was down: %v", o.err)
	}
	if o.res.Offset != int64(len(q.acked)) {
		t.Fatalf("write %s acknowledged at offset %d, want %d", v, o.res.Offset, len(q.acked))
	}
	q.acked = append(q.acked, v)
	q.check(20 * time.Second)
}

// Every connection of the idle clients closed under them (as a server
// closing idle connections would, or a NAT forgetting them): the next
// write and poll go through on new ones, with no error and no duplicate.
func TestQuietClientConnectionsClosedWhileIdle(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := clustertest.Start(t, clustertest.Options{})
	q := startQuietClient(t, c, 3*time.Second, 30*time.Second)
	for id := int32(1); id <= 3; id++ {
		c.Net.Partition(quietClientApp, clustertest.BrokerName(id))
	}
	c.Net.HealAll()
	q.check(20 * time.Second)
}

// Every broker down for longer than a write's delivery timeout while the
// producer is idle: the write fails with a retriable error, and once the
// brokers are back the next writes are acknowledged at the next offsets (the
// producer is not left waiting for the failed one), and the consumer
// resumes.
func TestQuietClientAllBrokersDownPastTheDeliveryTimeout(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts every broker")
	}
	c := clustertest.Start(t, clustertest.Options{})
	q := startQuietClient(t, c, time.Second, 4*time.Second)
	for id := int32(1); id <= 3; id++ {
		c.CrashBroker(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := q.p.Produce(ctx, client.Record{Topic: quietClientTopic, Partition: 0, ManualPartition: true, Value: []byte("lost")})
	cancel()
	if err == nil || !kerr.CodeOf(err).Retriable() {
		t.Fatalf("write while every broker was down past its delivery timeout: %v, want a retriable error", err)
	}
	for id := int32(1); id <= 3; id++ {
		c.StartBroker(id)
	}
	q.check(20 * time.Second)
}

// A rack-aware consumer reading from a follower (KIP-392) while it is idle:
// the follower killed and started again at once, on a new address; then
// the leader killed too. The consumer reads on from the leader or a
// replica with no record skipped or repeated.
func TestQuietClientReadReplicaRestarted(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: restarts brokers")
	}
	c := clustertest.Start(t, clustertest.Options{Racks: []string{"a", "b", "c"}})
	q := startQuietClientIn(t, c, 3*time.Second, 30*time.Second, "c")
	q.write(2, 10*time.Second)
	q.readAll(15 * time.Second)
	if r := q.cs.ReadReplica(); r != 3 {
		t.Fatalf("consumer in rack c reads from broker %d, want its follower 3", r)
	}
	c.CrashBroker(3)
	c.MoveBroker(3)
	c.StartBroker(3)
	c.WaitSettled(20*time.Second, quietClientTopic, 0, []int32{1, 2, 3}) // the leader prefers it again
	q.check(20 * time.Second)
	c.CrashBroker(1)
	c.StartBroker(1)
	q.check(30 * time.Second)
	t.Logf("consumer reads from broker %d", q.cs.ReadReplica())
}
