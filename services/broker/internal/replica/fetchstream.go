package replica

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
)

// fetchStream is a fetcher's long-lived ReplicaFetch stream to its leader.
// Requests and answers alternate on it, one round trip at a time, so it
// needs no lock: only the fetcher's goroutine uses it. Any failure closes
// it and the next round trip opens a new one (on the leader's current
// address, which may have changed).
type fetchStream struct {
	clock  Clock
	client replicationv1.ReplicationServiceClient
	stream replicationv1.ReplicationService_ReplicaFetchClient
	cancel context.CancelFunc
}

// errFetchInterrupted is a round trip cut short because the fetcher's
// partitions changed: its answer, if any came, is not used.
var errFetchInterrupted = errors.New("fetch round trip interrupted: the fetcher's partitions changed")

// exchange sends req and waits for its answer, at most timeout; on a
// timeout the stream is cancelled, which ends the wait. Cutting trip
// cancels the stream too (the leader's parked fetch ends at once) and the
// exchange returns errFetchInterrupted, whether or not an answer had come:
// an interrupted round trip is discarded whole. A trip cut after the
// exchange returned does not touch the stream.
func (s *fetchStream) exchange(parent context.Context, trip *fetchTrip, client replicationv1.ReplicationServiceClient, req *replicationv1.ReplicaFetchRequest, timeout time.Duration) (*replicationv1.ReplicaFetchResponse, error) {
	if s.stream != nil && !samePeer(s.client, client) {
		s.close()
	}
	if s.stream == nil {
		ctx, cancel := context.WithCancel(parent)
		st, err := client.ReplicaFetch(ctx)
		if err != nil {
			cancel()
			return nil, err
		}
		s.client, s.stream, s.cancel = client, st, cancel
	}
	var timedOut atomic.Bool
	cancel := s.cancel
	if !trip.arm(cancel) {
		// Cut before it was sent.
		s.close()
		return nil, errFetchInterrupted
	}
	t := s.clock.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
	resp, err := s.roundTrip(req)
	if !t.Stop() && timedOut.Load() {
		err = status.Errorf(codes.DeadlineExceeded, "no fetch answer from the leader within %s", timeout)
	}
	// Once disarmed the stream can no longer be cut by trip; cut: it was
	// (or is being) cancelled.
	if trip.disarm() {
		s.close()
		return nil, errFetchInterrupted
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return resp, nil
}

func (s *fetchStream) roundTrip(req *replicationv1.ReplicaFetchRequest) (*replicationv1.ReplicaFetchResponse, error) {
	if err := s.stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	// After a failed Send (io.EOF) Recv returns the stream's real error.
	resp, err := s.stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, status.Error(codes.Unavailable, "the leader closed the fetch stream")
	}
	return resp, err
}

// close ends the stream; the next exchange opens a new one.
func (s *fetchStream) close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.client, s.stream, s.cancel = nil, nil, nil
}
