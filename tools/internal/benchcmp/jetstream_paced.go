package benchcmp

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"tidemark.io/tools/internal/perfstat"
)

// runPaced is JetStream's side of a Paced or EndToEnd shape, with nats.go
// in this process as `tidemark perf e2e` is on tidemark's: an ordered
// consumer reads the R3 file-store stream from its end while the
// publisher sends asynchronously at s.Rate, each message carrying its send
// time; every acknowledgement and every delivery is timed.
func (j *jetStreamSide) runPaced(ctx context.Context, s Shape) Figure {
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	opts, err := j.connectOptions()
	if err != nil {
		return Figure{Err: err.Error()}
	}
	nc, err := nats.Connect(strings.Join(j.urls, ","), opts...)
	if err != nil {
		return Figure{Err: err.Error()}
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return Figure{Err: err.Error()}
	}
	subject := "bench." + s.Name
	if err := createWhilePlacementSettles(ctx, j.log, "stream "+streamOf(s), func() error {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: streamOf(s), Subjects: []string{subject},
			Replicas: 3, Storage: jetstream.FileStorage})
		return err
	}); err != nil {
		return Figure{Err: fmt.Sprintf("creating stream %s: %v", streamOf(s), err)}
	}
	cons, err := js.OrderedConsumer(ctx, streamOf(s), jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return Figure{Err: fmt.Sprintf("ordered consumer: %v", err)}
	}
	start := time.Now()
	acks, seen := perfstat.New(s.Records, start), perfstat.New(s.Records, start)
	// The warm-up, as tidemark's `perf e2e --warmup`: as many messages at
	// the same rate first, acknowledged and delivered but not measured;
	// measuredFrom (unix ns) is 0 until the measured messages begin.
	warm := int64(s.Rate * s.Warmup)
	var measuredFrom atomic.Int64
	if warm == 0 {
		measuredFrom.Store(start.UnixNano())
	}
	all := make(chan struct{})
	received := int64(0)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		data := m.Data()
		if len(data) < 8 {
			return
		}
		sent := int64(binary.BigEndian.Uint64(data))
		if from := measuredFrom.Load(); from == 0 || sent < from {
			return // a warm-up message
		}
		seen.Record(time.Since(time.Unix(0, sent)), len(data))
		if received++; received == s.Records {
			close(all)
		}
	})
	if err != nil {
		return Figure{Err: fmt.Sprintf("consume: %v", err)}
	}
	defer cc.Stop()

	base := make([]byte, max(s.Size, 8))
	for i := range base {
		base[i] = 'A' + byte(i%26)
	}
	var waiting sync.WaitGroup // the goroutines timing acknowledgements
	th := perfstat.NewThrottle(s.Rate, start)
	for sent := int64(0); sent < warm+s.Records && ctx.Err() == nil; sent++ {
		if d := th.Wait(sent, time.Now()); d > 0 {
			time.Sleep(d)
		}
		measured := sent >= warm
		// Timed from its scheduled send, as tidemark's perf e2e does: a
		// publish that waited counts for the messages behind it too.
		began := th.SendTime(sent, time.Now())
		if sent == warm && warm > 0 {
			acks.Restart(began)
			seen.Restart(began)
			measuredFrom.Store(began.UnixNano())
		}
		msg := append([]byte(nil), base...)
		binary.BigEndian.PutUint64(msg, uint64(began.UnixNano()))
		f, err := js.PublishAsync(subject, msg)
		if err != nil {
			acks.Fail(err.Error())
			continue
		}
		waiting.Add(1)
		go func() {
			defer waiting.Done()
			select {
			case <-f.Ok():
				if measured {
					acks.Record(time.Since(began), len(msg))
				}
			case err := <-f.Err():
				acks.Fail(err.Error())
			case <-ctx.Done():
				acks.Fail("timeout")
			}
		}()
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
	}
	select {
	case <-all:
	case <-ctx.Done():
	}
	waiting.Wait() // each ends on its ack, its error or ctx
	now := time.Now()
	rep := acks.Summary(now)
	if s.Mode == EndToEnd {
		rep = seen.Summary(now)
	}
	if rep.Records < s.Records && rep.FailedCount() == 0 {
		return Figure{Err: fmt.Sprintf("%d of %d messages %s before the timeout", rep.Records, s.Records,
			map[Mode]string{Paced: "acknowledged", EndToEnd: "delivered"}[s.Mode])}
	}
	return Figure{Records: rep.Records, MsgsPerSec: rep.RecordsPerSec(), P50: rep.P50, P99: rep.P99, Failed: int64(rep.FailedCount())}
}
