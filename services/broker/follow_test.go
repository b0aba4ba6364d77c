package broker_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker/internal/grpcapi"
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
// a call with an unknown 500.
func TestFollowEndsWithItsDeadlineNotCleanly(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.ctrl.createTopic("t", 1, 1, nil)
	h := &grpcapi.Broker{RM: c.brokers[1].Replicas()}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	s := &followStream{ctx: ctx}
	err := h.Follow(&brokerv1.FollowRequest{Topic: "t", Partition: 0, Offset: 0}, s)
	if s.sent != 0 {
		t.Fatalf("sent %d answers on an empty partition", s.sent)
	}
	if err == nil || errors.Is(err, io.EOF) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Follow past its deadline returned %v (code %v), want DEADLINE_EXCEEDED", err, status.Code(err))
	}
}
