package gateway

import (
	"context"
	"time"

	"google.golang.org/grpc"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

// brokerService is the BrokerServiceClient behind the REST routes: partition
// calls go to the partition's leader wherever it is now (router), Metadata
// and InitProducerId to any broker. REST users never name a broker.
// brokerService routes BrokerService calls: follows (streams that may
// idle for hours) through their own router and connections.
type brokerService struct {
	r, follows *router
	streams    *streamSlots
}

var _ brokerv1.BrokerServiceClient = brokerService{}

// Produce retries on the new leader when the leader moved. Without
// producer_id a retried request may be written twice, as with Kafka's
// producer without idempotence; with producer_id, producer_epoch and
// base_sequence the leader answers a retry as a duplicate.
func (b brokerService) Produce(ctx context.Context, req *brokerv1.ProduceRequest, opts ...grpc.CallOption) (*brokerv1.ProduceResponse, error) {
	wait := time.Duration(0)
	if req.GetAcks() == -1 {
		wait = time.Duration(req.GetTimeoutMs()) * time.Millisecond
		if wait <= 0 {
			wait = 30 * time.Second // the broker's default for timeout_ms 0
		}
	}
	var resp *brokerv1.ProduceResponse
	err := b.r.onLeader(ctx, req.GetTopic(), req.GetPartition(), func(bc brokerv1.BrokerServiceClient) error {
		actx, cancel := context.WithTimeout(ctx, b.r.requestTimeout+wait)
		defer cancel()
		var err error
		resp, err = bc.Produce(actx, req, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// ProduceStream has no REST route: the stream is a broker's, for clients
// that talk to brokers directly; REST produces one request at a time.
func (b brokerService) ProduceStream(context.Context, ...grpc.CallOption) (brokerv1.BrokerService_ProduceStreamClient, error) {
	return nil, kerr.New(kerr.UnsupportedVersion, "the gateway has no produce stream: produce with POST /v1/topics/{topic}/partitions/{partition}/records, or stream to a broker")
}

// errRackOverREST refuses rack_id on a REST read: a leader answers a
// reader in another broker's rack with that broker to read from (KIP-392),
// which a REST caller cannot choose; the fetch came back empty and the
// follow stream ended with no error.
var errRackOverREST = kerr.BadField(kerr.InvalidRequest, "rack_id",
	"is not supported over REST: the gateway reads from each partition's leader; leave it out, or read from the broker with a client")

func (b brokerService) Fetch(ctx context.Context, req *brokerv1.FetchRequest, opts ...grpc.CallOption) (*brokerv1.FetchResponse, error) {
	if req.GetRackId() != "" {
		return nil, errRackOverREST
	}
	wait := time.Duration(max(req.GetMaxWaitMs(), 0)) * time.Millisecond
	var resp *brokerv1.FetchResponse
	err := b.r.onLeader(ctx, req.GetTopic(), req.GetPartition(), func(bc brokerv1.BrokerServiceClient) error {
		actx, cancel := context.WithTimeout(ctx, b.r.requestTimeout+wait)
		defer cancel()
		var err error
		resp, err = bc.Fetch(actx, req, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (b brokerService) Follow(ctx context.Context, req *brokerv1.FollowRequest, _ ...grpc.CallOption) (brokerv1.BrokerService_FollowClient, error) {
	if req.GetRackId() != "" {
		return nil, errRackOverREST
	}
	if err := checkPartitionName(req.GetTopic(), req.GetPartition()); err != nil {
		return nil, err // before a stream slot is taken
	}
	if err := b.streams.acquire(ctx, "records:follow"); err != nil {
		return nil, err
	}
	return b.follows.follow(ctx, req)
}

func (b brokerService) ListOffsets(ctx context.Context, req *brokerv1.ListOffsetsRequest, opts ...grpc.CallOption) (*brokerv1.ListOffsetsResponse, error) {
	var resp *brokerv1.ListOffsetsResponse
	err := b.r.onLeader(ctx, req.GetTopic(), req.GetPartition(), func(bc brokerv1.BrokerServiceClient) error {
		actx, cancel := context.WithTimeout(ctx, b.r.requestTimeout)
		defer cancel()
		var err error
		resp, err = bc.ListOffsets(actx, req, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// DeleteRecords goes to the partition's leader, which answers once the
// followers' log starts are there: the call may take its whole timeout.
func (b brokerService) DeleteRecords(ctx context.Context, req *brokerv1.DeleteRecordsRequest, opts ...grpc.CallOption) (*brokerv1.DeleteRecordsResponse, error) {
	wait := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if wait <= 0 {
		wait = 30 * time.Second // the broker's default for timeout_ms 0
	}
	var resp *brokerv1.DeleteRecordsResponse
	err := b.r.onLeader(ctx, req.GetTopic(), req.GetPartition(), func(bc brokerv1.BrokerServiceClient) error {
		actx, cancel := context.WithTimeout(ctx, b.r.requestTimeout+wait)
		defer cancel()
		var err error
		resp, err = bc.DeleteRecords(actx, req, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Metadata of all topics comes a page at a time (restPageSize); named
// topics are all answered.
func (b brokerService) Metadata(ctx context.Context, req *brokerv1.MetadataRequest, _ ...grpc.CallOption) (*brokerv1.MetadataResponse, error) {
	named := len(req.GetTopics()) > 0
	pg, err := restPage(named, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	if named {
		return b.r.cl.Metadata(ctx, req.GetTopics()...)
	}
	return b.r.cl.MetadataPage(ctx, int32(pg.Size), req.GetPageToken())
}

func (b brokerService) InitProducerId(ctx context.Context, req *brokerv1.InitProducerIdRequest, opts ...grpc.CallOption) (*brokerv1.InitProducerIdResponse, error) {
	var resp *brokerv1.InitProducerIdResponse
	err := b.r.onAny(ctx, func(actx context.Context, bc brokerv1.BrokerServiceClient) error {
		var err error
		resp, err = bc.InitProducerId(actx, req, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
