package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/clustertest/history"
	"tidemark.io/services/platform/kerr"
)

// Producer names in the history.
const (
	idemProducer  = "idempotent-acks-all"
	plainProducer = "plain-acks-1"
)

// workload runs the producers and consumers. Writers produce only while
// the gate is open; a seeded scheduler opens it for bursts and closes it
// for idle gaps, some longer than replica.lag.time.max.ms.
type workload struct {
	r    *runner
	gate atomic.Bool

	idem, plain *client.Producer

	stopWrite, stopRead chan struct{}
	writers, readers    sync.WaitGroup
	stopWriteOnce       sync.Once
	stopReadOnce        sync.Once
	schedDone           chan struct{}

	probesRead sync.Map // probe value → struct{}: the readers consumed it (see probeServing)
	// drives numbers drive's rounds: a value is written once per run, or
	// the checker matches a read of one round's write to another's.
	drives atomic.Int64
}

// window bounds the records in flight per partition.
const window = 16

func (r *runner) startWorkload(ctx context.Context) *workload {
	w := &workload{r: r, stopWrite: make(chan struct{}), stopRead: make(chan struct{}), schedDone: make(chan struct{})}
	var err error
	common := client.ProducerOptions{DeliveryTimeout: deliveryTimeout, RequestTimeout: 5 * time.Second,
		Linger: 2 * time.Millisecond, MaxBlock: 5 * time.Second}
	idem := common
	idem.Acks, idem.Idempotence = client.AcksAll, client.IdempotenceOn
	plain := common
	plain.Acks, plain.Idempotence = client.AcksLeader, client.IdempotenceOff
	if w.idem, err = client.NewProducer(r.client, idem); err != nil {
		panic(err) // the options are constants: a mistake here is a bug
	}
	if w.plain, err = client.NewProducer(r.client, plain); err != nil {
		panic(err)
	}
	for ti, t := range r.topics {
		for p := range t.partitions {
			tp := history.TP{Topic: t.name, Partition: p}
			seed := r.o.Seed + uint64(ti*16) + uint64(p)
			w.writers.Add(1)
			go w.write(tp, t.idempotent, rand.New(rand.NewPCG(seed, 0x5eed)))
			w.readers.Add(1)
			go w.read(ctx, tp)
		}
	}
	go w.schedule(rand.New(rand.NewPCG(r.o.Seed, 0x7a11)))
	return w
}

// schedule alternates bursts and idle gaps until the writers stop.
func (w *workload) schedule(rng *rand.Rand) {
	defer close(w.schedDone)
	lag := w.r.o.LagTime
	for {
		burst := time.Duration(500+rng.IntN(4000)) * time.Millisecond
		w.gate.Store(true)
		if !w.pause(burst) {
			return
		}
		// Idle gaps from a fraction of the lag time to twice it: an idle
		// partition is where a stuck HW or a stranded follower shows.
		idle := lag/2 + time.Duration(rng.Int64N(int64(lag)*3/2))
		w.gate.Store(false)
		w.r.note("traffic idle for %s", idle.Round(time.Millisecond))
		if !w.pause(idle) {
			return
		}
	}
}

func (w *workload) pause(d time.Duration) bool {
	select {
	case <-w.stopWrite:
		return false
	case <-time.After(d):
		return true
	}
}

func (w *workload) write(tp history.TP, idempotent bool, rng *rand.Rand) {
	defer w.writers.Done()
	p, name, acks := w.plain, plainProducer, history.AcksLeader
	if idempotent {
		p, name, acks = w.idem, idemProducer, history.AcksAll
	}
	slots := make(chan struct{}, window)
	for seq := 0; ; seq++ {
		for !w.gate.Load() {
			if !w.pause(20 * time.Millisecond) {
				return
			}
		}
		select {
		case <-w.stopWrite:
			return
		case slots <- struct{}{}:
		}
		w.produce(p, name, idempotent, acks, tp, fmt.Sprintf("%s/%s/%d", tp, name, seq), func() { <-slots })
		// About 50 records a second per partition while the gate is open:
		// enough to keep batches and replication busy, few enough that
		// the linearizability check covers a minute's run.
		if !w.pause(time.Duration(5+rng.IntN(30)) * time.Millisecond) {
			return
		}
	}
}

// produce sends one record and records the attempt and its outcome.
func (w *workload) produce(p *client.Producer, name string, idempotent bool, acks int32, tp history.TP, value string, done func()) {
	w.produceSaying(p, name, idempotent, acks, tp, value, func(bool) { done() })
}

// produceSaying is produce whose done hears whether the write was
// acknowledged.
func (w *workload) produceSaying(p *client.Producer, name string, idempotent bool, acks int32, tp history.TP, value string, done func(acked bool)) {
	rec := w.r.rec
	id := rec.Start(name, idempotent, tp, acks, value)
	p.ProduceAsync(client.Record{Topic: tp.Topic, Partition: tp.Partition, ManualPartition: true, Value: []byte(value)},
		func(res client.Result, err error) {
			defer func() { done(err == nil) }()
			switch code := kerr.CodeOf(err); {
			case err == nil:
				rec.Acked(id, res.Offset)
				w.r.epochs.set(id, res.LeaderEpoch)
			case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
				code == kerr.RequestTimedOut, code == kerr.NetworkException, code == kerr.UnknownServerError:
				// No answer: the record may or may not have been appended.
				rec.Unknown(id, err.Error())
			default:
				rec.Failed(id, code.String())
			}
		})
}

// produceSome writes n records to tp with the plain producer outside the
// schedule (the nemesis uses it to make a stalled follower fall behind).
func (w *workload) produceSome(tp history.TP, n int, tag string) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		w.produce(w.plain, plainProducer, false, history.AcksLeader, tp, fmt.Sprintf("%s/%s/%s-%d", tp, plainProducer, tag, i), wg.Done)
	}
	wg.Wait()
}

// drive writes tp with the plain producer, gate or no gate, until stop
// (the isolated-leader step keeps writes coming while its leader is cut);
// acked (one slot) hears of each acknowledgement.
func (w *workload) drive(tp history.TP, stop <-chan struct{}, acked chan<- struct{}) {
	slots := make(chan struct{}, window)
	round := w.drives.Add(1)
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-w.stopWrite:
			return
		case slots <- struct{}{}:
		}
		w.produceSaying(w.plain, plainProducer, false, history.AcksLeader, tp, fmt.Sprintf("%s/%s/fence%d-%d", tp, plainProducer, round, seq), func(ok bool) {
			<-slots
			if ok {
				select {
				case acked <- struct{}{}:
				default:
				}
			}
		})
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// read consumes one partition from offset 0 up to the HW until stopped.
// Session numbers change whenever the runner moves the position itself
// (out of range after retention or an unclean election).
func (w *workload) read(ctx context.Context, tp history.TP) {
	defer w.readers.Done()
	name := "reader-" + tp.String()
	session := int64(1)
	cs, err := client.NewConsumer(w.r.client, client.ConsumerOptions{Topic: tp.Topic, Partition: tp.Partition,
		MaxWait: 300 * time.Millisecond, RequestTimeout: 5 * time.Second})
	if err != nil {
		w.r.note("%s: %v", name, err)
		return
	}
	defer cs.Close()
	for {
		select {
		case <-w.stopRead:
			return
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		recs, err := cs.Poll(pctx)
		cancel()
		for _, rc := range recs {
			v := string(rc.Value)
			w.r.rec.Consumed(name, session, tp, rc.Offset, v)
			if isProbe(v) {
				w.probesRead.Store(v, struct{}{})
			}
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if kerr.CodeOf(err) == kerr.OffsetOutOfRange {
			lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			lo, lerr := w.r.client.ListOffsets(lctx, tp.Topic, tp.Partition, client.Earliest())
			cancel()
			if lerr == nil {
				from := cs.Position()
				cs.SetPosition(lo.Offset)
				session++
				w.r.note("%s: offset %d out of range, reading on from the log start %d (session %d)", name, from, lo.Offset, session)
			}
		}
		if !w.pauseRead(100 * time.Millisecond) {
			return
		}
	}
}

// probeRead reports whether a reader consumed the probe's value.
func (w *workload) probeRead(value string) bool {
	_, ok := w.probesRead.Load(value)
	return ok
}

func (w *workload) pauseRead(d time.Duration) bool {
	select {
	case <-w.stopRead:
		return false
	case <-time.After(d):
		return true
	}
}

// stopProducing stops the writers and closes the producers, which waits
// for every record's outcome (bounded by the delivery timeout).
func (w *workload) stopProducing() {
	w.stopWriteOnce.Do(func() {
		close(w.stopWrite)
		w.gate.Store(false)
		w.writers.Wait()
		<-w.schedDone
		ctx, cancel := context.WithTimeout(context.Background(), producerCloseBound)
		defer cancel()
		var wg sync.WaitGroup
		for _, p := range []*client.Producer{w.idem, w.plain} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.Close(ctx); err != nil {
					w.r.note("closing a producer: %v", err)
				}
			}()
		}
		wg.Wait()
	})
}

func (w *workload) stopReading() {
	w.stopReadOnce.Do(func() {
		close(w.stopRead)
		w.readers.Wait()
	})
}

// abort ends everything at once (a failed or interrupted run).
func (w *workload) abort() {
	w.stopProducing()
	w.stopReading()
}
