package clustertest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/testenv"
)

// TestRandomFaultsKeepEveryAckedWrite is a seeded nemesis run: while an
// idempotent acks=all producer writes to three partitions (RF 3,
// min.insync.replicas 2), faults are injected at random for a while: kill -9
// or graceful stop of a broker and its restart, a broker cut off from the
// other brokers or its links stalled, the active controller stopped and
// restarted. Mostly one broker is impaired at a time, sometimes two (then
// acks=all writes wait below min.insync.replicas); safety must hold
// whatever the faults are. Then
// everything heals and, once the ISRs are whole again, every partition must
// hold identical logs on all three replicas, and every acknowledged record
// must be in them at the offset its acknowledgement named, in the order it
// was sent. TIDEMARK_CHAOS_SEED replays a run; TIDEMARK_CHAOS_SECONDS
// lengthens it (default 12).
func TestRandomFaultsKeepEveryAckedWrite(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: a nemesis run takes half a minute")
	}
	seed := chaosSeed(t, uint64(time.Now().UnixNano()))
	length := chaosLength(t, 12*time.Second)
	t.Logf("nemesis seed %d (TIDEMARK_CHAOS_SEED=%d replays it), %s of faults", seed, seed, length)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	const partitions = 3
	c := Start(t, Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	c.CreateTopic("chaos", partitions, 3, map[string]string{"min.insync.replicas": "2"})
	w := startAckLog(t, c, partitions)

	n := &nemesis{c: c, rng: rng, t: t}
	deadline := time.Now().Add(length)
	for time.Now().Before(deadline) {
		n.step()
		time.Sleep(time.Duration(300+rng.IntN(1700)) * time.Millisecond)
	}
	n.healAll()
	t.Logf("faults: %s", strings.Join(n.done, ", "))

	// Writes must flow again once everything is healed.
	before := w.count()
	c.WaitFor(30*time.Second, "writes after healing", func() bool { return w.count() >= before+30 })
	acked, failed := w.finish()
	c.WaitFor(30*time.Second, "every ISR whole again", func() bool {
		for p := int32(0); p < partitions; p++ {
			if len(c.Partition("chaos", p).GetIsr()) != 3 {
				return false
			}
		}
		return true
	})
	total := 0
	for p := int32(0); p < partitions; p++ {
		log := c.SameLogs("chaos", p, 1, 2, 3)
		checkAcked(t, p, acked[p], log)
		total += len(acked[p])
	}
	t.Logf("%d writes acknowledged, %d failed (not acknowledged, allowed), all acknowledged present in order", total, failed)
	if total == 0 {
		t.Fatal("no write was acknowledged")
	}
}

// ack is one acknowledged record: its send order and the offset the
// acknowledgement named.
type ack struct {
	seq    int
	offset int64
	value  string
}

// ackLog runs one idempotent producer per partition order, writing
// p<partition>-<seq> values without pause, and keeps what was acknowledged.
type ackLog struct {
	t      *testing.T
	p      *client.Producer
	mu     sync.Mutex
	acked  map[int32][]ack
	failed int
	stop   chan struct{}
	done   sync.WaitGroup
}

func startAckLog(t *testing.T, c *Cluster, partitions int32) *ackLog {
	cl := c.Client()
	p, err := client.NewProducer(cl, client.ProducerOptions{Acks: client.AcksAll, DeliveryTimeout: 45 * time.Second, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w := &ackLog{t: t, p: p, acked: map[int32][]ack{}, stop: make(chan struct{})}
	// A bounded window of records in flight per partition keeps the run
	// from queueing more than the cluster can take during a fault.
	for part := int32(0); part < partitions; part++ {
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			window := make(chan struct{}, 64)
			for seq := 0; ; seq++ {
				select {
				case <-w.stop:
					return
				case window <- struct{}{}:
				}
				v := fmt.Sprintf("p%d-%d", part, seq)
				p.ProduceAsync(client.Record{Topic: "chaos", Partition: part, ManualPartition: true, Value: []byte(v)},
					func(res client.Result, err error) {
						<-window
						w.mu.Lock()
						defer w.mu.Unlock()
						if err != nil {
							w.failed++
							return
						}
						w.acked[part] = append(w.acked[part], ack{seq: seq, offset: res.Offset, value: v})
					})
			}
		}()
	}
	return w
}

func (w *ackLog) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.acked {
		n += len(a)
	}
	return n
}

// finish stops sending, waits for every outstanding record's outcome and
// returns the acknowledged records per partition.
func (w *ackLog) finish() (map[int32][]ack, int) {
	close(w.stop)
	w.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.p.Close(ctx); err != nil {
		w.t.Errorf("closing the producer: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.failed
}

// checkAcked checks one partition's acknowledged records against its log:
// each at the offset its acknowledgement named, and offsets rising with
// the send order (the idempotent producer keeps order across retries).
func checkAcked(t *testing.T, p int32, acked []ack, log []string) {
	t.Helper()
	slices.SortFunc(acked, func(a, b ack) int { return a.seq - b.seq })
	last := int64(-1)
	for _, a := range acked {
		if a.offset < 0 || a.offset >= int64(len(log)) {
			t.Fatalf("partition %d: %s acknowledged at offset %d, but the log has %d records", p, a.value, a.offset, len(log))
		}
		if log[a.offset] != a.value {
			t.Fatalf("partition %d: %s acknowledged at offset %d, which holds %s", p, a.value, a.offset, log[a.offset])
		}
		if a.offset <= last {
			t.Fatalf("partition %d: %s (sent after a record acknowledged at %d) acknowledged at %d: order broken", p, a.value, last, a.offset)
		}
		last = a.offset
	}
	dups := 0
	seen := map[string]bool{}
	for _, v := range log {
		if seen[v] {
			dups++
		}
		seen[v] = true
	}
	if dups > 0 {
		t.Errorf("partition %d: %d records written twice by an idempotent producer", p, dups)
	}
}

// nemesis injects one fault or repair per step. Usually at most one broker
// is impaired; now and then a second one is too, which takes partitions
// below min.insync.replicas (writes wait, nothing acknowledged may be lost).
type nemesis struct {
	c   *Cluster
	rng *rand.Rand
	t   *testing.T

	impaired map[int32]string // broker -> how: crashed, stopped, isolated, paused
	ctrlDown int32            // a stopped controller, 0 when none
	done     []string
}

func (n *nemesis) note(s string) {
	n.done = append(n.done, s)
	n.t.Logf("nemesis: %s", s)
}

func (n *nemesis) step() {
	if n.impaired == nil {
		n.impaired = map[int32]string{}
	}
	switch {
	case len(n.impaired) > 0 && n.rng.IntN(2) == 0:
		ids := slices.Sorted(maps.Keys(n.impaired))
		n.repairBroker(ids[n.rng.IntN(len(ids))])
	case n.ctrlDown != 0 && n.rng.IntN(2) == 0:
		n.c.StartController(n.ctrlDown)
		n.note(fmt.Sprintf("controller %d restarted", n.ctrlDown))
		n.ctrlDown = 0
	case n.ctrlDown == 0 && n.rng.IntN(5) == 0:
		if id, _ := n.c.ActiveController(); id > 0 {
			n.c.StopController(id)
			n.ctrlDown = id
			n.note(fmt.Sprintf("active controller %d stopped", id))
		}
	case len(n.impaired) == 0 || (len(n.impaired) == 1 && n.rng.IntN(4) == 0):
		var healthy []int32
		for id := int32(1); id <= 3; id++ {
			if _, ok := n.impaired[id]; !ok {
				healthy = append(healthy, id)
			}
		}
		n.impair(healthy[n.rng.IntN(len(healthy))])
	}
}

func (n *nemesis) impair(id int32) {
	name := BrokerName(id)
	var how string
	switch n.rng.IntN(5) {
	case 4:
		// KIP-101's window: a follower restarts (and truncates), then the
		// leader dies before the follower has fetched again.
		leader := n.c.Partition("chaos", 0).GetLeader()
		if _, hurt := n.impaired[leader]; hurt || leader <= 0 || leader == id || !n.c.Leads(leader, "chaos", 0) {
			return
		}
		n.c.CrashBroker(id)
		n.c.StartBroker(id)
		n.c.CrashBroker(leader)
		n.impaired[leader] = "crashed"
		n.note(fmt.Sprintf("broker %d restarted, then leader %d crashed at once", id, leader))
		return
	case 0:
		n.c.CrashBroker(id)
		how = "crashed"
	case 1:
		if err := n.c.StopBroker(id); err != nil {
			n.t.Logf("graceful stop of broker %d: %v", id, err)
		}
		how = "stopped"
	case 2:
		for o := int32(1); o <= 3; o++ {
			if o != id {
				n.c.Net.Partition(name, BrokerName(o))
			}
		}
		how = "isolated"
	case 3:
		n.c.Net.Pause(name)
		how = "paused"
	}
	n.impaired[id] = how
	n.note(fmt.Sprintf("broker %d %s", id, how))
}

func (n *nemesis) repairBroker(id int32) {
	how := n.impaired[id]
	switch how {
	case "crashed", "stopped":
		n.c.StartBroker(id)
	case "isolated":
		for o := int32(1); o <= 3; o++ {
			if _, cut := n.impaired[o]; o != id && !(cut && n.impaired[o] == "isolated") {
				n.c.Net.Heal(BrokerName(id), BrokerName(o))
			}
		}
	case "paused":
		n.c.Net.Resume(BrokerName(id))
	}
	delete(n.impaired, id)
	n.note(fmt.Sprintf("broker %d back (was %s)", id, how))
}

func (n *nemesis) healAll() {
	for _, id := range slices.Sorted(maps.Keys(n.impaired)) {
		n.repairBroker(id)
	}
	if n.ctrlDown != 0 {
		n.c.StartController(n.ctrlDown)
		n.note(fmt.Sprintf("controller %d restarted", n.ctrlDown))
		n.ctrlDown = 0
	}
	n.c.Net.HealAll()
}
