package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/recordbatch"
)

// testOptions retries fast so that failure scripts run in milliseconds.
// Set TIDEMARK_CLIENT_DEBUG=1 to see the client's debug log.
func testOptions() client.Options {
	o := client.Options{
		RequestTimeout:  2 * time.Second,
		RetryBackoff:    5 * time.Millisecond,
		RetryBackoffMax: 40 * time.Millisecond,
		APITimeout:      5 * time.Second,
	}
	if os.Getenv("TIDEMARK_CLIENT_DEBUG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return o
}

func startCluster(t testing.TB, cfg fakebroker.Config) *fakebroker.Cluster {
	t.Helper()
	fc, err := fakebroker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	return fc
}

func newClient(t testing.TB, fc *fakebroker.Cluster) *client.Client {
	t.Helper()
	c, err := client.New(fc.BrokerAddrs()[:1], testOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newProducer(t testing.TB, c *client.Client, o client.ProducerOptions) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// outcomes collects the callbacks of records numbered 0..n-1 and fails the
// test if any record is called back twice.
type outcomes struct {
	t       testing.TB
	mu      sync.Mutex
	res     []client.Result
	errs    []error
	at      []time.Time // when each callback came
	calls   []int
	pending sync.WaitGroup
}

func newOutcomes(t testing.TB, n int) *outcomes {
	o := &outcomes{t: t, res: make([]client.Result, n), errs: make([]error, n), at: make([]time.Time, n), calls: make([]int, n)}
	o.pending.Add(n)
	return o
}

func (o *outcomes) cb(i int) func(client.Result, error) {
	return func(r client.Result, err error) {
		o.mu.Lock()
		o.calls[i]++
		twice := o.calls[i] > 1
		o.res[i], o.errs[i], o.at[i] = r, err, time.Now()
		o.mu.Unlock()
		if twice {
			o.t.Errorf("record %d called back twice", i)
			return
		}
		o.pending.Done()
	}
}

// wait waits for every callback, failing the test after d.
func (o *outcomes) wait(d time.Duration) {
	o.t.Helper()
	done := make(chan struct{})
	go func() {
		o.pending.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		o.mu.Lock()
		missing := 0
		for _, c := range o.calls {
			if c == 0 {
				missing++
			}
		}
		o.mu.Unlock()
		o.t.Fatalf("%d records never called back within %v", missing, d)
	}
}

func value(i int) []byte { return fmt.Appendf(nil, "value-%05d", i) }

// checkLog asserts that topic-partition holds exactly want values, in
// order, and that each successful result's offset points at its record.
func checkLog(t *testing.T, fc *fakebroker.Cluster, topic string, partition int32, want [][]byte) []recordbatch.Record {
	t.Helper()
	got := fc.Records(topic, partition)
	if len(got) != len(want) {
		t.Fatalf("log of %s-%d has %d records, want %d", topic, partition, len(got), len(want))
	}
	for i := range got {
		if string(got[i].Value) != string(want[i]) {
			t.Fatalf("log offset %d holds %q, want %q", i, got[i].Value, want[i])
		}
	}
	return got
}

// checkEpochBump fails the test unless the log of topic-partition was
// written under one producer id, epoch 0 and then epoch 1: the producer
// bumped its epoch once, by itself, without asking for another id.
func checkEpochBump(t *testing.T, fc *fakebroker.Cluster, topic string, partition int32) {
	t.Helper()
	if n := fc.Calls("InitProducerId"); n != 1 {
		t.Fatalf("InitProducerId called %d times, want 1 (the producer bumps its epoch itself)", n)
	}
	ids := fc.BatchIdentities(topic, partition)
	for i, id := range ids {
		if id.PID != ids[0].PID || (i > 0 && id.Epoch < ids[i-1].Epoch) || id.Epoch > 1 {
			t.Fatalf("batch identities %+v: want one producer id, epoch 0 then 1", ids)
		}
	}
	if len(ids) == 0 || ids[0].Epoch != 0 || ids[len(ids)-1].Epoch != 1 {
		t.Fatalf("batch identities %+v: want epoch 0 then 1", ids)
	}
}

func codeOf(err error) kerr.Code { return kerr.CodeOf(err) }
