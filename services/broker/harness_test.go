package broker_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/broker/internal/replica"
	"tidemark.io/services/clustertest/netsim"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/tlsconf"
	"tidemark.io/services/recordbatch"
)

// cluster is n real brokers on loopback, with real logs on disk, driven by
// the stand-in controller, their links to each other through a network
// simulator.
type cluster struct {
	t       testing.TB
	net     *netsim.Network
	ctrl    *standin
	brokers map[int32]*broker.Broker
	cfgs    map[int32]broker.Config
	conns   map[int32]*grpc.ClientConn
}

func newCluster(t testing.TB, n int, settings map[string]string) *cluster {
	t.Helper()
	return newClusterWith(t, n, settings, false)
}

// newClusterWith also chooses whether the brokers serve fault injection.
func newClusterWith(t testing.TB, n int, settings map[string]string, faults bool) *cluster {
	t.Helper()
	return newClusterFn(t, n, settings, func(cfg *broker.Config) { cfg.FaultInjection = faults })
}

// newClusterFn lets a test adjust each broker's config before it starts.
func newClusterFn(t testing.TB, n int, settings map[string]string, adjust func(*broker.Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, net: netsim.New(), ctrl: newStandin(t), brokers: map[int32]*broker.Broker{},
		cfgs: map[int32]broker.Config{}, conns: map[int32]*grpc.ClientConn{}}
	for id := int32(1); id <= int32(n); id++ {
		cfg := broker.DefaultConfig()
		cfg.TLS = tlsconf.Plain()
		cfg.ID = id
		lis := listen(t)
		cfg.Listen = lis.Addr().String()
		cfg.DataDir = t.TempDir()
		cfg.Etcd.Endpoints = nil
		cfg.Settings = maps.Clone(settings)
		cfg.Dialer = c.net.Dialer(name(id))
		adjust(&cfg)
		c.net.Name(cfg.Listen, name(id))
		c.cfgs[id] = cfg
		if cfg.Listen != lis.Addr().String() { // adjust moved it
			lis.Close()
			c.start(id)
			continue
		}
		c.startOn(id, lis)
	}
	t.Cleanup(func() {
		for id, b := range c.brokers {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = b.Stop(ctx)
			cancel()
			delete(c.brokers, id)
		}
		for _, conn := range c.conns {
			conn.Close()
		}
	})
	return c
}

func name(id int32) string { return "broker-" + strconv.Itoa(int(id)) }

// listen holds a free loopback port below the ephemeral range for a
// broker's first start, which serves on the open listener (no window for
// another process to take the port); a restart binds the address again,
// which the range keeps free of outbound connections (see
// platform/loopback).
func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := loopback.Listen()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// startOn starts broker id the first time, on its held listener.
func (c *cluster) startOn(id int32, lis net.Listener) {
	c.t.Helper()
	cfg := c.cfgs[id]
	cfg.Listener = lis
	b, err := broker.Start(context.Background(), cfg, nil)
	if err != nil {
		c.t.Fatalf("start broker %d: %v", id, err)
	}
	c.brokers[id] = b
	c.ctrl.addBroker(id, b.Addr())
}

// start (re)starts broker id on its address and data dir, then tells the
// stand-in controller it is live.
func (c *cluster) start(id int32) {
	c.t.Helper()
	var b *broker.Broker
	var err error
	for i := 0; i < 50; i++ { // the port may linger briefly after a crash
		b, err = broker.Start(context.Background(), c.cfgs[id], nil)
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start broker %d: %v", id, err)
	}
	c.brokers[id] = b
	c.ctrl.addBroker(id, b.Addr())
}

// crash kills broker id without any shutdown work.
func (c *cluster) crash(id int32) {
	c.brokers[id].Crash()
	delete(c.brokers, id)
}

func (c *cluster) conn(id int32) *grpc.ClientConn {
	conn, ok := c.conns[id]
	if !ok {
		var err error
		conn, err = grpc.NewClient(c.cfgs[id].Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.t.Fatal(err)
		}
		c.conns[id] = conn
	}
	return conn
}

func (c *cluster) client(id int32) brokerv1.BrokerServiceClient {
	return brokerv1.NewBrokerServiceClient(c.conn(id))
}

func tpOf(topic string, part int32) replica.TP { return replica.TP{Topic: topic, Partition: part} }

func batchOf(values ...string) []byte {
	var b recordbatch.Builder
	for _, v := range values {
		b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
	}
	return b.Build(recordbatch.NoProducerID, recordbatch.NoProducerEpoch, recordbatch.NoSequence)
}

// produce sends one record to the partition's current leader (as the
// stand-in controller knows it), once.
func (c *cluster) produce(topic string, part int32, acks int32, value string) (int64, error) {
	leader := c.ctrl.state(topic, part).leader
	if leader < 0 {
		return 0, kerr.New(kerr.LeaderNotAvailable, "no leader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.client(leader).Produce(ctx, &brokerv1.ProduceRequest{Topic: topic, Partition: part, Acks: acks, TimeoutMs: 5000,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf(value)}})
	if err != nil {
		return 0, kerr.FromStatus(err)
	}
	return resp.GetBaseOffset(), nil
}

// logValues reads a replica's whole log (not bounded by the HW) directly.
func (c *cluster) logValues(id int32, topic string, part int32) []string {
	c.t.Helper()
	vals, err := c.brokers[id].ReadLog(topic, part)
	if err != nil {
		c.t.Fatalf("read broker %d: %v", id, err)
	}
	return vals
}

// consume reads what a consumer sees on the leader: records below the HW.
func (c *cluster) consume(topic string, part int32) []string {
	c.t.Helper()
	leader := c.ctrl.state(topic, part).leader
	var out []string
	for off := int64(0); ; {
		resp, err := c.client(leader).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: topic, Partition: part, Offset: off})
		if err != nil {
			c.t.Fatalf("fetch from %d: %v", leader, err)
		}
		if len(resp.GetRecords()) == 0 {
			return out
		}
		for _, r := range resp.GetRecords() {
			out = append(out, string(r.GetValue()))
		}
		off = resp.GetNextOffset()
	}
}

func (c *cluster) replicaState(id int32, topic string, part int32) (hw, leo int64) {
	r, ok := c.brokers[id].Replicas().Replica(replica.TP{Topic: topic, Partition: part})
	if !ok {
		return -1, -1
	}
	s := r.Snapshot(time.Now())
	return s.HighWatermark, s.LogEndOffset
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sameLogs asserts that every live replica holds exactly the same records.
func (c *cluster) sameLogs(topic string, part int32, ids ...int32) []string {
	c.t.Helper()
	var want []string
	waitFor(c.t, 10*time.Second, "replicas to converge", func() bool {
		want = c.logValues(ids[0], topic, part)
		for _, id := range ids[1:] {
			if fmt.Sprint(c.logValues(id, topic, part)) != fmt.Sprint(want) {
				return false
			}
		}
		return true
	})
	return want
}
