package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/grpcserver"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/tlsconf"
	"tidemark.io/services/recordbatch"
)

// A deposed controller (older controller epoch) is refused by brokers with
// STALE_CONTROLLER_EPOCH and cannot move leadership (F22).
func TestStaleControllerEpochIsRefused(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.ctrl.createTopic("f", 1, 2, nil)
	cl := c.ctrl.client(c.brokers[1].Addr())
	ctx := context.Background()
	// A newer controller speaks first.
	if _, err := cl.UpdateMetadata(ctx, &controlv1.UpdateMetadataRequest{ControllerId: 7, ControllerEpoch: 5}); err != nil {
		t.Fatal(err)
	}
	// The old one (epoch 1) tries to make broker 2 the leader.
	resp, err := cl.LeaderAndIsr(ctx, &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1,
		Partitions: []*commonv1.PartitionState{{Topic: "f", Partition: 0, Leader: 2, LeaderEpoch: 9, Isr: []int32{2}, Replicas: []int32{1, 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	if kerr.Code(resp.GetErrorCode()) != kerr.StaleControllerEpoch {
		t.Fatalf("stale controller answered %v, want STALE_CONTROLLER_EPOCH", resp.GetErrorCode())
	}
	if r, ok := c.brokers[1].Replicas().Replica(tpOf("f", 0)); !ok || !r.IsLeader() {
		t.Fatal("a stale controller's request changed leadership")
	}
	um, _ := cl.UpdateMetadata(ctx, &controlv1.UpdateMetadataRequest{ControllerId: 100, ControllerEpoch: 4})
	if kerr.Code(um.GetErrorCode()) != kerr.StaleControllerEpoch {
		t.Fatalf("stale UpdateMetadata answered %v", um.GetErrorCode())
	}
}

// A LeaderAndIsr whose leader epoch is not newer than the replica's is
// ignored (F22): replaying an old decision cannot demote the leader.
func TestOldLeaderEpochIsIgnored(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.ctrl.createTopic("g", 1, 2, nil)
	cl := c.ctrl.client(c.brokers[1].Addr())
	_, err := cl.LeaderAndIsr(context.Background(), &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1,
		Partitions: []*commonv1.PartitionState{{Topic: "g", Partition: 0, Leader: 2, LeaderEpoch: 0, Isr: []int32{1, 2}, Replicas: []int32{1, 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := c.brokers[1].Replicas().Replica(tpOf("g", 0)); !r.IsLeader() {
		t.Fatal("a LeaderAndIsr with the same leader epoch demoted the leader")
	}
	if _, err := c.produce("g", 0, -1, "still-leader"); err != nil {
		t.Fatalf("produce after the ignored request: %v", err)
	}
}

// Produce validation names the bad field and never writes.
func TestProduceBadInput(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("v", 1, 1, map[string]string{"max.message.bytes": "2048"})
	cl := c.client(1)
	ctx := context.Background()
	cases := []struct {
		name  string
		req   *brokerv1.ProduceRequest
		code  kerr.Code
		field string
	}{
		{"acks 2", &brokerv1.ProduceRequest{Topic: "v", Acks: 2, Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("x")}}, kerr.InvalidRequiredAcks, "acks"},
		{"no topic", &brokerv1.ProduceRequest{Acks: 1, Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("x")}}, kerr.InvalidTopicException, "topic"},
		{"no payload", &brokerv1.ProduceRequest{Topic: "v", Acks: 1}, kerr.InvalidRequest, "payload"},
		{"garbage batch", &brokerv1.ProduceRequest{Topic: "v", Acks: 1, Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: []byte("not a batch at all, clearly")}}, kerr.CorruptMessage, "record_batch"},
		{"too large", &brokerv1.ProduceRequest{Topic: "v", Acks: 1, Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf(string(make([]byte, 4096)))}}, kerr.MessageTooLarge, "record_batch"},
		{"unknown partition", &brokerv1.ProduceRequest{Topic: "v", Partition: 9, Acks: 1, Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("x")}}, kerr.UnknownTopicOrPartition, ""},
	}
	for _, tc := range cases {
		_, err := cl.Produce(ctx, tc.req)
		e := kerr.FromStatus(err)
		if e == nil || e.Code != tc.code || e.Field != tc.field {
			t.Errorf("%s: got %v (field %q), want %s field %q", tc.name, err, fieldOf(e), tc.code, tc.field)
		}
	}
	if _, leo := c.replicaState(1, "v", 0); leo != 0 {
		t.Fatalf("refused produces wrote %d records", leo)
	}
}

// Fetch validation names the bad field.
func TestFetchBadInput(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("fv", 1, 1, nil)
	neg := int32(-2)
	cases := []struct {
		name  string
		req   *brokerv1.FetchRequest
		code  kerr.Code
		field string
	}{
		{"negative offset", &brokerv1.FetchRequest{Topic: "fv", Offset: -1}, kerr.OffsetOutOfRange, "offset"},
		{"max wait too long", &brokerv1.FetchRequest{Topic: "fv", MaxWaitMs: 60001}, kerr.InvalidRequest, "max_wait_ms"},
		{"negative last fetched epoch", &brokerv1.FetchRequest{Topic: "fv", LastFetchedEpoch: &neg}, kerr.InvalidRequest, "last_fetched_epoch"},
	}
	for _, tc := range cases {
		_, err := c.client(1).Fetch(context.Background(), tc.req)
		e := kerr.FromStatus(err)
		if e == nil || e.Code != tc.code || e.Field != tc.field {
			t.Errorf("%s: got %v (field %q), want %s field %q", tc.name, err, fieldOf(e), tc.code, tc.field)
		}
	}
}

func fieldOf(e *kerr.Error) string {
	if e == nil {
		return ""
	}
	return e.Field
}

// An idempotent producer's retry returns the original offsets and appends
// nothing; a sequence gap is refused (F27), over the wire.
func TestIdempotentRetryOverTheWire(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.ctrl.createTopic("idem", 1, 3, map[string]string{"min.insync.replicas": "2"})
	cl := c.client(1)
	ctx := context.Background()
	pid, err := cl.InitProducerId(ctx, &brokerv1.InitProducerIdRequest{ProducerId: -1})
	if err != nil || pid.GetProducerId() < 1 {
		t.Fatalf("InitProducerId: %v %v", pid, err)
	}
	build := func(seq int32, v string) []byte {
		var b recordbatch.Builder
		b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
		return b.Build(pid.GetProducerId(), int16(pid.GetProducerEpoch()), seq)
	}
	send := func(batch []byte) (*brokerv1.ProduceResponse, error) {
		return cl.Produce(ctx, &brokerv1.ProduceRequest{Topic: "idem", Acks: -1, Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batch}})
	}
	first, err := send(build(0, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send(build(1, "b")); err != nil {
		t.Fatal(err)
	}
	retry, err := send(build(0, "a"))
	if err != nil || !retry.GetDuplicate() || retry.GetBaseOffset() != first.GetBaseOffset() {
		t.Fatalf("retry of seq 0: %v %v, want duplicate at offset %d", retry, err, first.GetBaseOffset())
	}
	if _, err := send(build(5, "gap")); kerr.FromStatus(err).Code != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("sequence gap: %v", err)
	}
	if got := fmt.Sprint(c.sameLogs("idem", 0, 1, 2, 3)); got != "[a b]" {
		t.Fatalf("log %s, want [a b]", got)
	}
}

// InitProducerId hands a caller that names someone else's producer id a
// fresh id of its own, so it cannot fence the owner: the owner's next
// idempotent write still succeeds (Kafka's rule without a transactional id).
func TestInitProducerIdNamingAnotherIdCannotFenceIt(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("own", 1, 1, nil)
	cl := c.client(1)
	ctx := context.Background()
	owner, err := cl.InitProducerId(ctx, &brokerv1.InitProducerIdRequest{ProducerId: -1, ProducerEpoch: -1})
	if err != nil || owner.GetProducerId() < 1 || owner.GetProducerEpoch() != 0 {
		t.Fatalf("InitProducerId: %v %v", owner, err)
	}
	send := func(pid int64, epoch int32, seq int32, v string) error {
		var b recordbatch.Builder
		b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
		_, err := cl.Produce(ctx, &brokerv1.ProduceRequest{Topic: "own", Acks: -1,
			Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: b.Build(pid, int16(epoch), seq)}})
		return err
	}
	if err := send(owner.GetProducerId(), owner.GetProducerEpoch(), 0, "owner-0"); err != nil {
		t.Fatal(err)
	}
	// Another client names the owner's id and epoch and writes with
	// whatever it is given.
	other, err := cl.InitProducerId(ctx, &brokerv1.InitProducerIdRequest{ProducerId: owner.GetProducerId(), ProducerEpoch: owner.GetProducerEpoch()})
	if err != nil {
		t.Fatal(err)
	}
	if err := send(other.GetProducerId(), other.GetProducerEpoch(), 0, "other-0"); err != nil {
		t.Fatal(err)
	}
	if err := send(owner.GetProducerId(), owner.GetProducerEpoch(), 1, "owner-1"); err != nil {
		t.Fatalf("the owner was fenced by a caller naming its id: %v", err)
	}
	if other.GetProducerId() == owner.GetProducerId() || other.GetProducerEpoch() != 0 {
		t.Fatalf("a caller naming producer %d got %d epoch %d, want a fresh id at epoch 0",
			owner.GetProducerId(), other.GetProducerId(), other.GetProducerEpoch())
	}
	if got := fmt.Sprint(c.logValues(1, "own", 0)); got != "[owner-0 other-0 owner-1]" {
		t.Fatalf("log %s", got)
	}
}

// Fault injection stalls a follower: it falls out of the ISR after
// replica.lag.time.max.ms and rejoins once the stall is cleared. The API is
// refused on a broker started without it.
func TestStalledFollowerLeavesISRAndFaultAPIIsGuarded(t *testing.T) {
	c := newClusterWith(t, 3, map[string]string{"replica.lag.time.max.ms": "1000"}, true)
	c.ctrl.createTopic("s", 1, 3, map[string]string{"min.insync.replicas": "2"})
	fc := faultv1.NewFaultInjectionServiceClient(c.conn(3))
	ctx := context.Background()
	if _, err := fc.SetFetchFault(ctx, &faultv1.SetFetchFaultRequest{Fault: &faultv1.FetchFault{Topic: "s", Partition: -1, Stall: true}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.produce("s", 0, -1, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "stalled follower to leave the ISR", func() bool {
		return fmt.Sprint(c.ctrl.state("s", 0).isr) == "[1 2]"
	})
	if _, err := fc.ClearFaults(ctx, &faultv1.ClearFaultsRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "follower to rejoin", func() bool { return len(c.ctrl.state("s", 0).isr) == 3 })

	off := newCluster(t, 1, nil)
	_, err := faultv1.NewFaultInjectionServiceClient(off.conn(1)).SetFetchFault(ctx,
		&faultv1.SetFetchFaultRequest{Fault: &faultv1.FetchFault{Stall: true, Partition: -1}})
	if kerr.FromStatus(err).Code != kerr.PolicyViolation {
		t.Fatalf("fault injection on a broker without it: %v", err)
	}
	_, err = faultv1.NewFaultInjectionServiceClient(off.conn(1)).CutLink(ctx, &faultv1.CutLinkRequest{ToBrokerId: 2})
	if kerr.FromStatus(err).Code != kerr.PolicyViolation {
		t.Fatalf("a link cut on a broker without fault injection: %v", err)
	}
	if _, err := fc.CutLink(ctx, &faultv1.CutLinkRequest{ToBrokerId: 3}); kerr.FromStatus(err).Code != kerr.InvalidRequest {
		t.Fatalf("broker 3 cut from itself: %v", err)
	}
}

// KIP-392: a consumer in follower 2's rack is sent to broker 2 and reads
// there, up to broker 2's HW.
func TestFollowerFetchingByRack(t *testing.T) {
	c := newCluster(t, 3, nil)
	for id, rack := range map[int32]string{1: "r1", 2: "r2", 3: "r3"} {
		cfg := c.cfgs[id]
		cfg.Rack = rack
		c.cfgs[id] = cfg
		c.crash(id)
		c.start(id)
	}
	c.ctrl.pushRacks(map[int32]string{1: "r1", 2: "r2", 3: "r3"})
	c.ctrl.createTopic("rack", 1, 3, nil)
	for i := 0; i < 5; i++ {
		if _, err := c.produce("rack", 0, -1, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	resp, err := c.client(1).Fetch(ctx, &brokerv1.FetchRequest{Topic: "rack", Offset: 0, RackId: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetPreferredReadReplica() != 2 {
		t.Fatalf("preferred read replica %d, want 2", resp.GetPreferredReadReplica())
	}
	waitFor(t, 5*time.Second, "follower 2's HW to reach 5", func() bool { hw, _ := c.replicaState(2, "rack", 0); return hw == 5 })
	fr, err := c.client(2).Fetch(ctx, &brokerv1.FetchRequest{Topic: "rack", Offset: 0, RackId: "r2"})
	if err != nil {
		t.Fatalf("fetch from the follower: %v", err)
	}
	if len(fr.GetRecords()) != 5 || fr.GetHighWatermark() != 5 {
		t.Fatalf("follower served %d records, hw %d", len(fr.GetRecords()), fr.GetHighWatermark())
	}
	// Without a rack a consumer must use the leader.
	if _, err := c.client(2).Fetch(ctx, &brokerv1.FetchRequest{Topic: "rack", Offset: 0}); kerr.FromStatus(err).Code != kerr.NotLeaderOrFollower {
		t.Fatalf("rackless fetch from a follower: %v", err)
	}
}

// Batches of one idempotent producer that reach the leader out of order
// (five may be in flight) are put back in order, not bounced.
func TestIdempotentBatchesArrivingOutOfOrderAreReordered(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("ord", 1, 1, nil)
	cl := c.client(1)
	ctx := context.Background()
	pid, err := cl.InitProducerId(ctx, &brokerv1.InitProducerIdRequest{ProducerId: -1})
	if err != nil {
		t.Fatal(err)
	}
	build := func(seq int32, v string) []byte {
		var b recordbatch.Builder
		b.Append(recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
		return b.Build(pid.GetProducerId(), int16(pid.GetProducerEpoch()), seq)
	}
	send := func(seq int32, v string) error {
		_, err := cl.Produce(ctx, &brokerv1.ProduceRequest{Topic: "ord", Acks: 1, Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: build(seq, v)}})
		return err
	}
	// The leader knows the producer once a first batch is in (before that
	// any first sequence is accepted, as in Kafka).
	if err := send(0, "first"); err != nil {
		t.Fatal(err)
	}
	third := make(chan error, 1)
	go func() { third <- send(2, "third") }()
	time.Sleep(10 * time.Millisecond) // the later batch arrives first
	if err := send(1, "second"); err != nil {
		t.Fatal(err)
	}
	if err := <-third; err != nil {
		t.Fatalf("the early batch was refused: %v", err)
	}
	if got := fmt.Sprint(c.logValues(1, "ord", 0)); got != "[first second third]" {
		t.Fatalf("log %s, want [first second third]", got)
	}
}

// A follower's NOT_LEADER_OR_FOLLOWER names the leader's id and address.
func TestNotLeaderNamesTheLeader(t *testing.T) {
	c := newCluster(t, 2, nil)
	c.ctrl.createTopic("h", 1, 2, nil)
	_, err := c.client(2).Produce(context.Background(), &brokerv1.ProduceRequest{Topic: "h", Acks: 1,
		Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("x")}})
	e := kerr.FromStatus(err)
	if e.Code != kerr.NotLeaderOrFollower || e.Leader == nil || e.Leader.ID != 1 || e.Leader.Address != c.brokers[1].Addr() {
		t.Fatalf("answer %v leader %+v, want NOT_LEADER_OR_FOLLOWER naming broker 1 at %s", e, e.Leader, c.brokers[1].Addr())
	}
}

// A broker that registers again while it still leads partitions of its
// previous incarnation stays fenced until the controller's full
// LeaderAndIsr for the new broker epoch: an incremental one (here for a
// partition created while it was out) may reach it first and names only
// that partition, while the leaderships it does not name may have moved.
// The test plays the controller.
func TestOnlyAFullLeaderAndIsrUnfencesANewIncarnation(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	lis := listen(t)
	cfg := broker.DefaultConfig()
	cfg.TLS = tlsconf.Plain()
	cfg.ID = 1
	cfg.Listener = lis
	cfg.Listen = lis.Addr().String()
	cfg.DataDir = t.TempDir()
	cfg.Etcd.Endpoints = config.StringList{srv.Endpoint()}
	cfg.SessionTimeout = 2 * time.Second
	b, err := broker.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Crash) // a graceful stop would wait for a controller there is none of
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	key := metastore.DefaultPrefix + "/brokers/ids/" + metastore.BrokerEntity(1)
	registration := func() (epoch int64, lease clientv3.LeaseID) {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return 0, 0
		}
		return resp.Kvs[0].CreateRevision, clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	state := func(topic string, leaderEpoch int32) *commonv1.PartitionState {
		return &commonv1.PartitionState{Topic: topic, Leader: 1, LeaderEpoch: leaderEpoch, Isr: []int32{1}, Replicas: []int32{1}, ControllerEpoch: 1}
	}
	push := func(brokerEpoch int64, full bool, states ...*commonv1.PartitionState) {
		t.Helper()
		req := &controlv1.LeaderAndIsrRequest{ControllerId: 100, ControllerEpoch: 1, BrokerEpoch: brokerEpoch, Full: full,
			Partitions: states, Leaders: []*commonv1.Node{{Id: 1, Address: b.Addr()}}}
		for _, s := range states {
			req.TopicConfigs = append(req.TopicConfigs, &controlv1.TopicConfig{Topic: s.GetTopic()})
		}
		resp, err := controlv1.NewBrokerControlServiceClient(conn).LeaderAndIsr(ctx, req)
		if err != nil || resp.GetErrorCode() != 0 {
			t.Fatalf("LeaderAndIsr (broker epoch %d, full %t): %v %v", brokerEpoch, full, resp.GetErrorCode(), err)
		}
	}
	produce := func(topic string) error {
		_, err := brokerv1.NewBrokerServiceClient(conn).Produce(ctx, &brokerv1.ProduceRequest{Topic: topic, Acks: 1,
			Payload: &brokerv1.ProduceRequest_RecordBatch{RecordBatch: batchOf("x")}})
		return err
	}
	wantFenced := func(topic, when string) {
		t.Helper()
		if err := produce(topic); err == nil || kerr.FromStatus(err).Code != kerr.NotLeaderOrFollower {
			t.Fatalf("%s: produce to %s answered %v, want NOT_LEADER_OR_FOLLOWER (fenced)", when, topic, err)
		}
	}

	first, lease := registration()
	if first == 0 {
		t.Fatal("the broker is not registered")
	}
	push(first, false, state("led", 1)) // it led nothing when it registered: nothing to wait for
	if err := produce("led"); err != nil {
		t.Fatalf("produce to the leader: %v", err)
	}

	// The registration is lost (as when the controller revokes it); the
	// broker registers again and still thinks it leads led/0.
	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	var second int64
	waitFor(t, 10*time.Second, "the broker to register again", func() bool {
		second, _ = registration()
		if second <= first {
			return false
		}
		h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: grpcserver.IncarnationService(second)})
		return err == nil && h.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	wantFenced("led", "registered again")

	push(second, false, state("fresh", 1))
	wantFenced("led", "after an incremental LeaderAndIsr of the new epoch")
	wantFenced("fresh", "after an incremental LeaderAndIsr of the new epoch")

	push(second, true, state("fresh", 1), state("led", 2))
	for _, topic := range []string{"led", "fresh"} {
		if err := produce(topic); err != nil {
			t.Fatalf("produce to %s after the full LeaderAndIsr of the new epoch: %v", topic, err)
		}
	}
}

// TestProducerIDsAfterTheCounterWentBack: the controller's producer id
// counter goes back (etcd restored from an older snapshot) while the broker
// hands ids from a block fetched after it; the broker names the end of that
// block when it asks again, so no id is handed out twice.
func TestProducerIDsAfterTheCounterWentBack(t *testing.T) {
	c := newCluster(t, 1, nil)
	cl := c.client(1)
	ctx := context.Background()
	seen := map[int64]int{}
	for i := range 250 {
		resp, err := cl.InitProducerId(ctx, &brokerv1.InitProducerIdRequest{ProducerId: -1})
		if err != nil {
			t.Fatalf("InitProducerId %d: %v", i, err)
		}
		if prev, dup := seen[resp.GetProducerId()]; dup {
			t.Fatalf("producer id %d handed out twice (calls %d and %d)", resp.GetProducerId(), prev, i)
		}
		seen[resp.GetProducerId()] = i
		if i == 0 {
			c.ctrl.rewindProducerIDs()
		}
	}
}
