package broker_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/broker"
)

// A Kafka Fetch's max_bytes is lowered to fetch.max.bytes, as Kafka does
// and as the gRPC fetch does: the whole answer holds at most that plus one
// batch. Before, only each partition was held to it, and a fetch asking
// 2 GiB over many partitions was answered with all they had.
func TestKafkaFetchMaxBytesIsLoweredToFetchMaxBytes(t *testing.T) {
	const limit, value = 65536, 40_000
	c := newClusterFn(t, 1, map[string]string{"fetch.max.bytes": "65536"}, func(cfg *broker.Config) { cfg.KafkaListen = "127.0.0.1:0" })
	c.ctrl.createTopic("f", 8, 1, nil)
	for p := range int32(8) {
		if _, err := c.produce("f", p, 1, strings.Repeat("v", value)); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers[1].KafkaAddr()), fetchByName())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, math.MaxInt32, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "f"
	for p := range int32(8) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, 1<<20, -1
		rt.Partitions = append(rt.Partitions, fp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	total, with := 0, 0
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		for _, p := range t.Partitions {
			if len(p.RecordBatches) > 0 {
				total += len(p.RecordBatches)
				with++
			}
		}
	}
	if with == 0 || total > limit+value+1024 {
		t.Fatalf("answered %d bytes from %d partitions, want at most fetch.max.bytes %d and one batch", total, with, limit)
	}
}

// Fetch sessions (KIP-227): tidemark keeps none and answers every full
// fetch with session id 0, which tells a client to go on sessionless. A
// full fetch (epoch 0, or -1 to close) naming a session id is answered as
// Kafka's FetchManager does: the session is closed (there is none) and
// the records come back; only an incremental fetch (epoch > 0), which
// needs a session, gets FETCH_SESSION_ID_NOT_FOUND. Before, a full fetch
// with a nonzero id was refused too, so a client that held a session from
// another broker at the same address could not read until it reset.
func TestKafkaFetchSessionIDsAreAnsweredAsKafkaDoes(t *testing.T) {
	c := newClusterFn(t, 1, nil, func(cfg *broker.Config) { cfg.KafkaListen = "127.0.0.1:0" })
	c.ctrl.createTopic("s", 1, 1, nil)
	if _, err := c.produce("s", 0, 1, "v"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers[1].KafkaAddr()), fetchByName())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fetch := func(sessionID, epoch int32) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.SessionID, req.SessionEpoch = -1, 1<<20, sessionID, epoch
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "s"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
		rt.Partitions = []kmsg.FetchRequestTopicPartition{fp}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse)
	}
	for _, tc := range []struct {
		name             string
		sessionID, epoch int32
		wantCode         int16
		wantRecords      bool
	}{
		{"sessionless", 0, -1, 0, true},
		{"new session", 0, 0, 0, true},
		{"full fetch naming a session", 42, 0, 0, true},
		{"closing a session", 42, -1, 0, true},
		{"incremental on an unknown session", 42, 3, 70, false},
	} {
		resp := fetch(tc.sessionID, tc.epoch)
		got := len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 && len(resp.Topics[0].Partitions[0].RecordBatches) > 0
		if resp.ErrorCode != tc.wantCode || got != tc.wantRecords || resp.SessionID != 0 {
			t.Errorf("%s (session %d, epoch %d): code %d, records %v, session %d; want code %d, records %v, session 0",
				tc.name, tc.sessionID, tc.epoch, resp.ErrorCode, got, resp.SessionID, tc.wantCode, tc.wantRecords)
		}
	}
}
