package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker/internal/grpcapi"
	"tidemark.io/services/platform/kerr"
)

// followStream is the server side of one Follow call, with a context the
// test controls.
type followStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent int
}

func (s *followStream) Context() context.Context            { return s.ctx }
func (s *followStream) Send(*brokerv1.FollowResponse) error { s.sent++; return nil }
func (s *followStream) SetHeader(metadata.MD) error         { return nil }
func (s *followStream) SendHeader(metadata.MD) error        { return nil }
func (s *followStream) SetTrailer(metadata.MD)              {}
func (s *followStream) SendMsg(any) error                   { return nil }
func (s *followStream) RecvMsg(any) error                   { return io.EOF }

// A Follow whose deadline passes before anything is readable ends with
// DEADLINE_EXCEEDED, not with a clean end of stream: a client (the gateway)
// cannot tell a clean end from "nothing more to follow", and answered such
// a call with an unknown 500. Its first answer, with no records, comes at
// once: a REST reader of a quiet partition got no headers until a write.
func TestFollowEndsWithItsDeadlineNotCleanly(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("t", 1, 1, nil)
	h := &grpcapi.Broker{RM: c.brokers[1].Replicas()}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	s := &followStream{ctx: ctx}
	err := h.Follow(&brokerv1.FollowRequest{Topic: "t", Partition: 0, Offset: 0}, s)
	if s.sent != 1 {
		t.Fatalf("sent %d answers on an empty partition, want the first one only", s.sent)
	}
	if err == nil || errors.Is(err, io.EOF) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Follow past its deadline returned %v (code %v), want DEADLINE_EXCEEDED", err, status.Code(err))
	}
}

// An idle follow answers at once, then with no records every keep-alive
// period, so a reader (and a proxy between) sees the stream is alive.
func TestAnIdleFollowIsKeptAlive(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("t", 1, 1, nil)
	h := &grpcapi.Broker{RM: c.brokers[1].Replicas(), FollowKeepAlive: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s := &followStream{ctx: ctx}
	_ = h.Follow(&brokerv1.FollowRequest{Topic: "t", Partition: 0, Offset: 0}, s)
	if s.sent < 4 {
		t.Fatalf("an idle follow sent %d answers in 1 s with a 100 ms keep-alive, want one at once and one about every 100 ms", s.sent)
	}
}

// electUnclean makes id the leader with an ISR of itself alone, as an
// unclean election does, and pushes it.
func (s *standin) electUnclean(topic string, part int32, id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[tp{topic, part}]
	p.leader, p.isr = id, []int32{id}
	p.leaderEpoch++
	p.partitionEpoch++
	s.pushLocked(tp{topic, part})
}

// A rack's reader follows a follower that an unclean election truncates
// while its stream is open. The stream checks the epoch of what it has
// sent on every read, so it answers with the divergence and ends with
// OFFSET_OUT_OF_RANGE; it must not stream the new leader's records from
// the reader's offset on as if they followed what it read.
func TestFollowOnAFollowerTruncatedUnderTheStream(t *testing.T) {
	c := newCluster(t, 3, nil)
	racks := map[int32]string{1: "r1", 2: "r2", 3: "r3"}
	for id, rack := range racks {
		cfg := c.cfgs[id]
		cfg.Rack = rack
		c.cfgs[id] = cfg
		c.crash(id)
		c.start(id)
	}
	c.ctrl.pushRacks(racks)
	c.ctrl.createTopic("f", 1, 3, nil) // replicas [1 2 3], led by 1
	if _, err := c.produce("f", 0, -1, "a0"); err != nil {
		t.Fatal(err)
	}
	c.sameLogs("f", 0, 1, 2, 3)
	c.crash(3)
	c.ctrl.brokerDown(3)
	for i := 1; i <= 5; i++ {
		if _, err := c.produce("f", 0, -1, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "follower 2's HW at 6", func() bool { hw, _ := c.replicaState(2, "f", 0); return hw == 6 })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := c.client(2).Follow(ctx, &brokerv1.FollowRequest{Topic: "f", Offset: 0, RackId: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	for read := 0; read < 6; {
		m, err := stream.Recv()
		if err != nil || m.GetFetch().GetPreferredReadReplica() >= 0 {
			t.Fatalf("following broker 2 before the election: %v %v", m, err)
		}
		read += len(m.GetFetch().GetRecords())
	}

	// Broker 3, which has only a0, is elected uncleanly; broker 2
	// truncates to 1 and takes the new leader's b1.. .
	c.crash(1)
	c.start(3)
	c.ctrl.electUnclean("f", 0, 3)
	for i := 1; i <= 7; i++ {
		if _, err := c.produce("f", 0, 1, fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := stream.Recv()
	if d := m.GetFetch().GetDivergingEpoch(); err != nil || d == nil || d.GetEndOffset() != 1 || len(m.GetFetch().GetRecords()) != 0 {
		t.Fatalf("the stream on the truncated follower sent %v, %v; want the divergence at offset 1 and no records", m, err)
	}
	if _, err := stream.Recv(); kerr.FromStatus(err).Code != kerr.OffsetOutOfRange {
		t.Fatalf("after the divergence the stream ended with %v, want OFFSET_OUT_OF_RANGE", err)
	}
}

// idleFollowerAboutToBeTruncated is broker 2, rack r2, following broker 1
// with a0..a5 (a0 in the first leader epoch) while broker 3, down, has
// only a0; the partition "f" then stays idle. It answers the leader epoch
// of a5. Brokers serve /metrics and Kafka's protocol too.
func idleFollowerAboutToBeTruncated(t *testing.T) (*cluster, int32) {
	c := newCluster(t, 3, nil)
	racks := map[int32]string{1: "r1", 2: "r2", 3: "r3"}
	for id, rack := range racks {
		cfg := c.cfgs[id]
		cfg.Rack = rack
		cfg.Telemetry.MetricsListen = "127.0.0.1:0" // a parked fetch is seen there
		cfg.KafkaListen = "127.0.0.1:0"
		c.cfgs[id] = cfg
		c.crash(id)
		c.start(id)
	}
	c.ctrl.pushRacks(racks)
	c.ctrl.createTopic("f", 1, 3, nil) // replicas [1 2 3], led by 1
	if _, err := c.produce("f", 0, -1, "a0"); err != nil {
		t.Fatal(err)
	}
	c.sameLogs("f", 0, 1, 2, 3)
	c.crash(3)
	c.ctrl.brokerDown(3)
	for i := 1; i <= 5; i++ {
		if _, err := c.produce("f", 0, -1, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "follower 2's HW at 6", func() bool { hw, _ := c.replicaState(2, "f", 0); return hw == 6 })
	read, err := c.client(2).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: "f", Offset: 0, RackId: "r2"})
	if err != nil || len(read.GetRecords()) != 6 || read.GetNextOffset() != 6 {
		t.Fatalf("reading broker 2 before the election: %v %v", read, err)
	}
	return c, read.GetRecords()[5].GetLeaderEpoch()
}

// electUncleanWhileAFetchIsParked waits for a consumer fetch parked on
// broker 2, then elects broker 3, which has only a0, uncleanly: broker 2
// truncates to 1. Nothing is written after.
func electUncleanWhileAFetchIsParked(t *testing.T, c *cluster) {
	waitFor(t, 5*time.Second, "the fetch parked on broker 2", func() bool {
		return metricValue(t, scrape(t, c.brokers[2].MetricsAddr()), `tidemark_broker_purgatory_size{purgatory="fetch"}`) == 1
	})
	c.crash(1)
	c.start(3)
	c.ctrl.electUnclean("f", 0, 3)
}

// A rack's consumer parked on an idle follower (a long poll, nothing new)
// while an unclean election truncates that follower below its offset. No
// write follows, so only the truncation can wake it, and no record of the
// new leader's epoch reaches the follower: once it has cut its log to the
// new leader's answer, the fetch answers the divergence at once, not at
// its max wait, so the consumer goes back to where the logs part rather
// than reset by policy. The call's deadline is far below the max wait.
func TestAParkedFetchOnAnIdleFollowerLearnsOfItsTruncation(t *testing.T) {
	c, lastEpoch := idleFollowerAboutToBeTruncated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	type answer struct {
		resp *brokerv1.FetchResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := c.client(2).Fetch(ctx, &brokerv1.FetchRequest{Topic: "f", Offset: 6, RackId: "r2", MinBytes: 1,
			MaxWaitMs: 60000, LastFetchedEpoch: &lastEpoch})
		done <- answer{resp, err}
	}()
	electUncleanWhileAFetchIsParked(t, c)
	a := <-done
	if d := a.resp.GetDivergingEpoch(); a.err != nil || d == nil || d.GetEndOffset() != 1 || len(a.resp.GetRecords()) != 0 {
		t.Fatalf("the parked fetch on the truncated follower answered %v, %v; want the divergence at offset 1 and no records", a.resp, a.err)
	}
}

// The same through the Kafka listener: a Fetch v12 naming its rack and
// its last fetched epoch (KIP-320), with no current leader epoch.
func TestAParkedKafkaFetchOnAnIdleFollowerLearnsOfItsTruncation(t *testing.T) {
	c, lastEpoch := idleFollowerAboutToBeTruncated(t)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch, req.Rack = -1, 60000, 1, 1<<20, -1, "r2"
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LastFetchedEpoch = 0, 6, 1<<20, -1, lastEpoch
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.Partitions = "f", []kmsg.FetchRequestTopicPartition{p}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	type answer struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan answer, 1)
	kb := c.kafka(2)
	go func() {
		resp, err := kb.Request(ctx, req)
		done <- answer{resp, err}
	}()
	electUncleanWhileAFetchIsParked(t, c)
	a := <-done
	if a.err != nil {
		t.Fatalf("the parked Kafka fetch on the truncated follower: %v", a.err)
	}
	part := a.resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if part.ErrorCode != 0 || part.DivergingEpoch.EndOffset != 1 || len(part.RecordBatches) != 0 {
		t.Fatalf("the parked Kafka fetch answered error %d, diverging %+v, %d bytes; want the divergence at offset 1 and no records",
			part.ErrorCode, part.DivergingEpoch, len(part.RecordBatches))
	}
}

// The same for a rack's Follow stream: it reads a0..a5 from the follower,
// which an unclean election then truncates on a partition that stays
// quiet. The stream answers the divergence, then OFFSET_OUT_OF_RANGE; it
// used to end with a bare OFFSET_OUT_OF_RANGE (the epoch it read last
// unknown to the follower's cut log), and the reader reset by policy.
func TestFollowOnAnIdleFollowerTruncatedUnderTheStream(t *testing.T) {
	c, _ := idleFollowerAboutToBeTruncated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := c.client(2).Follow(ctx, &brokerv1.FollowRequest{Topic: "f", Offset: 0, RackId: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	for read := 0; read < 6; {
		m, err := stream.Recv()
		if err != nil || m.GetFetch().GetPreferredReadReplica() >= 0 {
			t.Fatalf("following broker 2 before the election: %v %v", m, err)
		}
		read += len(m.GetFetch().GetRecords())
	}
	electUncleanWhileAFetchIsParked(t, c)
	m, err := stream.Recv()
	if d := m.GetFetch().GetDivergingEpoch(); err != nil || d == nil || d.GetEndOffset() != 1 || len(m.GetFetch().GetRecords()) != 0 {
		t.Fatalf("the stream on the truncated idle follower sent %v, %v; want the divergence at offset 1 and no records", m, err)
	}
	if _, err := stream.Recv(); kerr.FromStatus(err).Code != kerr.OffsetOutOfRange {
		t.Fatalf("after the divergence the stream ended with %v, want OFFSET_OUT_OF_RANGE", err)
	}
}
