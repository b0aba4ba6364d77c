package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/client/internal/fakebroker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/platform/kerr"
)

// A record without a topic can never be written: the producer should say
// so at once rather than wait max.block.ms for metadata of topic "".
func TestRecordWithoutTopicFailsAtOnce(t *testing.T) {
	fc := startCluster(t, fakebroker.Config{})
	fc.CreateTopic("t", 1)
	c := newClient(t, fc)
	p := newProducer(t, c, client.ProducerOptions{MaxBlock: 5 * time.Second})
	start := time.Now()
	_, err := p.Produce(testCtx(t, 10*time.Second), client.Record{Value: []byte("v")})
	el := time.Since(start)
	t.Logf("after %v: %v (code %v)", el, err, codeOf(err))
	if err == nil || el > time.Second {
		t.Fatalf("a record without a topic: after %v: %v", el, err)
	}
}

// A producer, consumer or group consumer asked for without a client is
// refused with INVALID_CONFIG naming it; each constructor panicked on the
// nil client while reading its options.
func TestConstructorsWithoutAClientAreRefused(t *testing.T) {
	for name, build := range map[string]func() error{
		"NewProducer": func() error { _, err := client.NewProducer(nil, client.ProducerOptions{}); return err },
		"NewConsumer": func() error { _, err := client.NewConsumer(nil, client.ConsumerOptions{Topic: "t"}); return err },
		"NewGroupConsumer": func() error {
			_, err := client.NewGroupConsumer(nil, client.GroupOptions{GroupID: "g", Topics: []string{"t"}})
			return err
		},
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			err = build()
		}()
		var ke *kerr.Error
		if !errors.As(err, &ke) || ke.Code != kerr.InvalidConfig || ke.Field != "client" {
			t.Errorf("%s(nil, ...): %v, want INVALID_CONFIG naming client", name, err)
		}
	}
}

// A topic name Kafka's rule forbids can never exist, and the brokers'
// metadata says so (INVALID_TOPIC_EXCEPTION): a write, a read or a
// partition call naming one fails at once with that code, as Kafka's
// client fails it. The client took the answer for a topic not created
// yet, and each call waited out max.block.ms or its deadline, then said
// UNKNOWN_TOPIC_OR_PARTITION.
func TestCallsOnATopicNameThatCannotExistFailAtOnce(t *testing.T) {
	tc := clustertest.Start(t, clustertest.Options{})
	c := tc.ClientWith(client.Options{APITimeout: 5 * time.Second})
	p := newProducer(t, c, client.ProducerOptions{MaxBlock: 5 * time.Second})
	for _, name := range []string{"a b", strings.Repeat("x", 250)} {
		calls := map[string]func(ctx context.Context) error{
			"Produce": func(ctx context.Context) error {
				_, err := p.Produce(ctx, client.Record{Topic: name, Value: []byte("v")})
				return err
			},
			"ListOffsets": func(ctx context.Context) error {
				_, err := c.ListOffsets(ctx, name, 0, client.Latest())
				return err
			},
			"DeleteRecords": func(ctx context.Context) error {
				_, err := c.DeleteRecords(ctx, name, 0, 0)
				return err
			},
			"Consumer.Poll": func(ctx context.Context) error {
				cs, err := client.NewConsumer(c, client.ConsumerOptions{Topic: name})
				if err != nil {
					return err
				}
				_, err = cs.Poll(ctx)
				return err
			},
		}
		for call, run := range calls {
			start := time.Now()
			err := run(testCtx(t, 5*time.Second))
			if el := time.Since(start); codeOf(err) != kerr.InvalidTopicException || el > 2*time.Second {
				t.Errorf("%s of %.20q: after %v: %v (code %v), want INVALID_TOPIC_EXCEPTION at once", call, name, el.Round(time.Millisecond), err, codeOf(err))
			}
		}
	}
}
