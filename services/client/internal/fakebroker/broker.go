package fakebroker

import (
	"context"
	"slices"
	"sync"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/paging"
	"tidemark.io/services/recordbatch"
)

// brokerService is one broker's BrokerService.
type brokerService struct {
	brokerv1.UnimplementedBrokerServiceServer
	c *Cluster
	n *node
}

var _ brokerv1.BrokerServiceServer = (*brokerService)(nil)

// faultErr is the error a fault answers with, with the leader hint a
// broker would add.
func (s *brokerService) faultErr(f *Fault, topicName string, partition int32) error {
	e := kerr.New(f.Code, "injected by the test on broker %d", s.n.id)
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if f.NoHint || s.c.noHints {
		return e
	}
	if p, err := s.c.partLocked(topicName, partition); err == nil && p.leader > 0 {
		switch f.Code {
		case kerr.NotLeaderOrFollower, kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch:
			e.Leader = &kerr.LeaderHint{ID: p.leader, Address: s.c.brokers[p.leader-1].addr, LeaderEpoch: p.epoch}
		}
	}
	return e
}

func (s *brokerService) Produce(ctx context.Context, req *brokerv1.ProduceRequest) (*brokerv1.ProduceResponse, error) {
	c := s.c
	tn, pn := req.GetTopic(), req.GetPartition()
	c.mu.Lock()
	p, err := c.partLocked(tn, pn)
	if err == nil {
		p.inflight++
		p.maxInflight = max(p.maxInflight, p.inflight)
	}
	c.mu.Unlock()
	if p != nil {
		defer func() {
			c.mu.Lock()
			p.inflight--
			c.mu.Unlock()
		}()
	}
	f := c.intercept(ctx, s.n, "Produce", tn, pn)
	if err != nil {
		return nil, err
	}
	if f != nil && !f.AfterAppend && f.Code != kerr.None {
		return nil, s.faultErr(f, tn, pn)
	}
	switch req.GetAcks() {
	case 0, 1, -1:
	default:
		return nil, kerr.BadField(kerr.InvalidRequiredAcks, "acks", "%d is not 0, 1 or -1", req.GetAcks())
	}
	data := req.GetRecordBatch()
	if data == nil {
		return nil, kerr.BadField(kerr.InvalidRequest, "record_batch", "the fake takes record batches only")
	}
	if err := recordbatch.Validate(data); err != nil {
		return nil, err
	}
	b := recordbatch.Batch(data)

	c.mu.Lock()
	if p.leader != s.n.id {
		e := c.notLeaderLocked(s.n, tn, pn, p, false)
		c.mu.Unlock()
		return nil, e
	}
	dup, err := p.checkProducer(b)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	resp := &brokerv1.ProduceResponse{LogAppendTime: time.Now().UnixMilli(), LogStartOffset: p.logStart, LeaderEpoch: p.epoch}
	if dup != nil {
		resp.BaseOffset, resp.LastOffset, resp.Duplicate, resp.LeaderEpoch = dup.baseOffset, dup.lastOff, true, dup.epoch
	} else {
		stored := p.appendLocked(data)
		c.batchSizes = append(c.batchSizes, len(data))
		resp.BaseOffset, resp.LastOffset = stored.BaseOffset(), stored.LastOffset()
	}
	c.mu.Unlock()
	appended(ctx)
	if f != nil && f.Wait > 0 {
		t := time.NewTimer(f.Wait)
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-f.Until:
		}
		t.Stop()
	}
	if f != nil && f.Code != kerr.None {
		return nil, s.faultErr(f, tn, pn)
	}
	if req.GetAcks() == 0 {
		resp.BaseOffset, resp.LastOffset = -1, -1
	}
	return resp, nil
}

// ProduceStream serves produce streams as tidemark's broker does: each
// request is appended (or refused) before the next is read, and answered
// with its correlation id when done; a request's error is its answer.
func (s *brokerService) ProduceStream(stream brokerv1.BrokerService_ProduceStreamServer) error {
	ctx := stream.Context()
	if f := s.c.intercept(ctx, s.n, "ProduceStream", "", -1); f != nil && f.Code != kerr.None {
		return kerr.New(f.Code, "injected by the test on broker %d: the produce stream ends", s.n.id)
	}
	var sendMu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		m, err := stream.Recv()
		if err != nil {
			return nil
		}
		gate := make(chan struct{})
		var once sync.Once
		open := func() { once.Do(func() { close(gate) }) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.Produce(context.WithValue(ctx, appendedKey{}, open), m.GetRequest())
			open()
			out := &brokerv1.ProduceStreamResponse{CorrelationId: m.GetCorrelationId(), Response: resp}
			if err != nil {
				out.Response, out.Error = nil, kerr.Detail(kerr.FromStatus(kerr.ToStatus(err).Err()))
			}
			sendMu.Lock()
			_ = stream.Send(out)
			sendMu.Unlock()
		}()
		select {
		case <-gate:
		case <-ctx.Done():
			return nil
		}
	}
}

type appendedKey struct{}

// appended opens a produce stream's gate once a request is in the log.
func appended(ctx context.Context) {
	if fn, ok := ctx.Value(appendedKey{}).(func()); ok {
		fn()
	}
}

func (s *brokerService) Fetch(ctx context.Context, req *brokerv1.FetchRequest) (*brokerv1.FetchResponse, error) {
	c := s.c
	tn, pn := req.GetTopic(), req.GetPartition()
	if f := c.intercept(ctx, s.n, "Fetch", tn, pn); f != nil {
		return nil, s.faultErr(f, tn, pn)
	}
	maxBytes := int(req.GetMaxBytes())
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	wait := time.NewTimer(time.Duration(req.GetMaxWaitMs()) * time.Millisecond)
	defer wait.Stop()
	for {
		c.mu.Lock()
		p, err := c.partLocked(tn, pn)
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
		if !slices.Contains(p.replicas, s.n.id) && p.leader != s.n.id {
			e := c.notLeaderLocked(s.n, tn, pn, p, false)
			c.mu.Unlock()
			return nil, e
		}
		if e := c.checkEpochLocked(s.n, tn, pn, p, req.GetCurrentLeaderEpoch()); e != nil {
			c.mu.Unlock()
			return nil, e
		}
		off := req.GetOffset()
		if req.LastFetchedEpoch != nil {
			if d := p.divergingLocked(off, req.GetLastFetchedEpoch()); d != nil {
				resp := &brokerv1.FetchResponse{HighWatermark: p.hw, LogStartOffset: p.logStart, LogEndOffset: p.leo, NextOffset: off, DivergingEpoch: d}
				c.mu.Unlock()
				return resp, nil
			}
		}
		if off < p.logStart || off > p.leo {
			e := kerr.New(kerr.OffsetOutOfRange, "offset %d is outside [%d, %d]", off, p.logStart, p.leo)
			c.mu.Unlock()
			return nil, e
		}
		data := p.readLocked(off, maxBytes)
		if len(data) > 0 {
			resp := &brokerv1.FetchResponse{
				HighWatermark: p.hw, LogStartOffset: p.logStart, LogEndOffset: p.leo,
				PreferredReadReplica: c.preferredLocked(s.n, p, req.GetRackId()),
				RecordBatches:        data, NextOffset: recordbatch.Batch(lastBatch(data)).NextOffset(),
			}
			c.mu.Unlock()
			return resp, nil
		}
		changed := p.changed
		empty := &brokerv1.FetchResponse{
			HighWatermark: p.hw, LogStartOffset: p.logStart, LogEndOffset: p.leo, NextOffset: off,
			PreferredReadReplica: c.preferredLocked(s.n, p, req.GetRackId()),
		}
		c.mu.Unlock()
		select {
		case <-changed:
		case <-wait.C:
			return empty, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func lastBatch(data []byte) []byte {
	var last []byte
	for b, err := range recordbatch.All(data) {
		if err == nil {
			last = b
		}
	}
	return last
}

// checkEpochLocked applies the fetch's current leader epoch check.
func (c *Cluster) checkEpochLocked(n *node, tn string, pn int32, p *partition, epoch int32) error {
	switch {
	case epoch < 0 || epoch == p.epoch:
		return nil
	case epoch < p.epoch:
		e := kerr.New(kerr.FencedLeaderEpoch, "leader epoch %d is older than %d", epoch, p.epoch)
		if !c.noHints {
			e.Leader = &kerr.LeaderHint{ID: p.leader, Address: c.brokers[p.leader-1].addr, LeaderEpoch: p.epoch}
		}
		return e
	default:
		return kerr.New(kerr.UnknownLeaderEpoch, "leader epoch %d is newer than %d on broker %d", epoch, p.epoch, n.id)
	}
}

// preferredLocked is KIP-392's choice on the leader: a live replica in the
// consumer's rack, unless the leader is in it; -1 for none.
func (c *Cluster) preferredLocked(n *node, p *partition, rack string) int32 {
	if rack == "" || p.leader != n.id || n.rack == rack {
		return -1
	}
	for _, id := range p.replicas {
		if b := c.brokers[id-1]; b.rack == rack && !b.down {
			return id
		}
	}
	return -1
}

func (s *brokerService) ListOffsets(ctx context.Context, req *brokerv1.ListOffsetsRequest) (*brokerv1.ListOffsetsResponse, error) {
	c := s.c
	tn, pn := req.GetTopic(), req.GetPartition()
	if f := c.intercept(ctx, s.n, "ListOffsets", tn, pn); f != nil {
		return nil, s.faultErr(f, tn, pn)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.partLocked(tn, pn)
	if err != nil {
		return nil, err
	}
	if p.leader != s.n.id {
		return nil, c.notLeaderLocked(s.n, tn, pn, p, false)
	}
	resp := &brokerv1.ListOffsetsResponse{LeaderEpoch: p.epoch, Timestamp: -1}
	switch req.GetSpec() {
	case brokerv1.OffsetSpec_OFFSET_SPEC_EARLIEST:
		resp.Offset = p.logStart
	case brokerv1.OffsetSpec_OFFSET_SPEC_LATEST:
		resp.Offset = p.hw
	case brokerv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP:
		resp.Offset, resp.Timestamp = p.offsetForTime(req.GetTimestamp())
	default:
		return nil, kerr.BadField(kerr.InvalidRequest, "spec", "unknown offset spec %v", req.GetSpec())
	}
	return resp, nil
}

func (s *brokerService) Metadata(ctx context.Context, req *brokerv1.MetadataRequest) (*brokerv1.MetadataResponse, error) {
	c := s.c
	if f := c.intercept(ctx, s.n, "Metadata", "", -1); f != nil {
		return nil, s.faultErr(f, "", -1)
	}
	// All topics come in pages, as a broker serves them.
	pg, err := paging.ParseUnlessNamed(len(req.GetTopics()) > 0, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &brokerv1.MetadataResponse{ClusterId: "fake", Controller: &commonv1.Node{Id: -1}}
	for _, b := range c.brokers {
		if !b.down {
			resp.Brokers = append(resp.Brokers, &commonv1.Node{Id: b.id, Address: b.addr, Rack: b.rack})
		}
	}
	names := req.GetTopics()
	if len(names) == 0 {
		for n := range c.topics {
			names = append(names, n)
		}
		slices.Sort(names)
		names = pg.From(names)
	}
	cur := paging.NewCursor(ctx, pg)
	for _, name := range names {
		if !cur.Take(name) {
			break
		}
		tm := &brokerv1.TopicMetadata{Name: name}
		t, ok := c.topics[name]
		if !ok {
			tm.ErrorCode = commonv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		} else {
			tm.TopicId = t.id
			for i, p := range t.parts {
				tm.Partitions = append(tm.Partitions, &brokerv1.PartitionMetadata{
					Partition: int32(i), Leader: p.leader, LeaderEpoch: p.epoch,
					Replicas: slices.Clone(p.replicas), Isr: slices.Clone(p.replicas),
				})
			}
		}
		resp.Topics = append(resp.Topics, tm)
	}
	resp.NextPageToken = cur.Next()
	return resp, nil
}

func (s *brokerService) InitProducerId(ctx context.Context, req *brokerv1.InitProducerIdRequest) (*brokerv1.InitProducerIdResponse, error) {
	c := s.c
	if f := c.intercept(ctx, s.n, "InitProducerId", "", -1); f != nil {
		return nil, s.faultErr(f, "", -1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A fresh id whatever the request names, as a broker answers.
	pid := c.nextPID
	c.nextPID++
	return &brokerv1.InitProducerIdResponse{ProducerId: pid, ProducerEpoch: 0}, nil
}
