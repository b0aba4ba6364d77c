package grpcserver

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	replicationv1 "tidemark.io/proto/gen/tidemark/replication/v1"
)

// quietPeerStream is a stream handler that waits for its peer's next
// request, as a leader's fetch handler waits for a follower's.
type quietPeerStream struct {
	replicationv1.UnimplementedReplicationServiceServer
	started chan struct{}
}

func (q quietPeerStream) ReplicaFetch(stream replicationv1.ReplicationService_ReplicaFetchServer) error {
	close(q.started)
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

// slowStopReplica answers after a while.
type slowStopReplica struct {
	controlv1.UnimplementedBrokerControlServiceServer
	started chan struct{}
}

func (s slowStopReplica) StopReplica(context.Context, *controlv1.StopReplicaRequest) (*controlv1.StopReplicaResponse, error) {
	close(s.started)
	time.Sleep(time.Second)
	return &controlv1.StopReplicaResponse{}, nil
}

func startDrainServer(t *testing.T, register func(*Server)) (*Server, *grpc.ClientConn) {
	t.Helper()
	s := New(Options{})
	register(s)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, conn
}

// A peer that keeps a stream open and sends nothing (a frozen follower)
// must not hold a graceful stop until its deadline: nothing is being
// served, so the connection is closed after the linger.
func TestStopDoesNotWaitForAQuietPeer(t *testing.T) {
	q := quietPeerStream{started: make(chan struct{})}
	s, conn := startDrainServer(t, func(s *Server) { replicationv1.RegisterReplicationServiceServer(s, q) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := replicationv1.NewReplicationServiceClient(conn).ReplicaFetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&replicationv1.ReplicaFetchRequest{ReplicaId: 1}); err != nil {
		t.Fatal(err)
	}
	<-q.started
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer stopCancel()
	start := time.Now()
	s.Stop(stopCtx)
	if took := time.Since(start); took > 10*time.Second || stopCtx.Err() != nil {
		t.Fatalf("Stop with a quiet peer's stream open took %v (deadline 20s): it waited for the peer", took)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the quiet peer's stream is still open after Stop")
	}
}

// A call being served holds the stop until it is answered.
func TestStopWaitsForACallInService(t *testing.T) {
	h := slowStopReplica{started: make(chan struct{})}
	s, conn := startDrainServer(t, func(s *Server) { controlv1.RegisterBrokerControlServiceServer(s, h) })
	answered := make(chan error, 1)
	go func() {
		_, err := controlv1.NewBrokerControlServiceClient(conn).StopReplica(context.Background(), &controlv1.StopReplicaRequest{})
		answered <- err
	}()
	<-h.started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s.Stop(ctx)
	if err := <-answered; err != nil {
		t.Fatalf("a call in service when the stop began: %v, want its answer", err)
	}
}
