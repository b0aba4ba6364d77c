package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/platform/kerr"
)

// handleInitProducerID hands an idempotent producer a fresh id through the
// gRPC handler (ids come from controller-allocated blocks). A transactional
// id is refused: tidemark has no transaction coordinator.
func (s *Server) handleInitProducerID(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = int16(kerr.InvalidRequest) // no transaction coordinator; the answer has no message field
		return resp
	}
	greq := &brokerv1.InitProducerIdRequest{ProducerId: req.ProducerID, ProducerEpoch: int32(req.ProducerEpoch)}
	if err := s.authorize(ctx, brokerv1.BrokerService_InitProducerId_FullMethodName, greq); err != nil {
		resp.ErrorCode = code(err)
		return resp
	}
	gresp, err := s.opts.Broker.InitProducerId(ctx, greq)
	if err != nil {
		resp.ErrorCode = code(err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = gresp.GetProducerId(), int16(gresp.GetProducerEpoch())
	return resp
}
