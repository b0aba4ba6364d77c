package sender

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
)

// fakeClient answers control requests from a script of outcomes.
type fakeClient struct {
	mu    sync.Mutex
	calls []string
	// fail returns the error for the n-th call (1-based) of a kind, or nil.
	fail func(kind string, n int) error
	// code is put in UpdateMetadata answers.
	code commonv1.ErrorCode
	// refuseYield, when set, is a partition a YieldLeadership answer
	// lists with an error, after one it yielded.
	refuseYield *controlv1.PartitionResult
	// laiPartitions are put in LeaderAndIsr answers.
	laiPartitions []*controlv1.PartitionResult
}

func (f *fakeClient) record(kind string) error {
	f.mu.Lock()
	f.calls = append(f.calls, kind)
	n := 0
	for _, c := range f.calls {
		if c == kind {
			n++
		}
	}
	f.mu.Unlock()
	if f.fail != nil {
		return f.fail(kind, n)
	}
	return nil
}

func (f *fakeClient) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeClient) LeaderAndIsr(ctx context.Context, in *controlv1.LeaderAndIsrRequest, _ ...grpc.CallOption) (*controlv1.LeaderAndIsrResponse, error) {
	if err := f.record("LeaderAndIsr"); err != nil {
		return nil, err
	}
	return &controlv1.LeaderAndIsrResponse{Partitions: f.laiPartitions}, nil
}

func (f *fakeClient) UpdateMetadata(ctx context.Context, in *controlv1.UpdateMetadataRequest, _ ...grpc.CallOption) (*controlv1.UpdateMetadataResponse, error) {
	if err := f.record("UpdateMetadata"); err != nil {
		return nil, err
	}
	return &controlv1.UpdateMetadataResponse{ErrorCode: f.code}, nil
}

func (f *fakeClient) StopReplica(ctx context.Context, in *controlv1.StopReplicaRequest, _ ...grpc.CallOption) (*controlv1.StopReplicaResponse, error) {
	if err := f.record("StopReplica"); err != nil {
		return nil, err
	}
	return &controlv1.StopReplicaResponse{}, nil
}

func (f *fakeClient) YieldLeadership(ctx context.Context, in *controlv1.YieldLeadershipRequest, _ ...grpc.CallOption) (*controlv1.YieldLeadershipResponse, error) {
	if err := f.record("YieldLeadership"); err != nil {
		return nil, err
	}
	if f.refuseYield != nil {
		return &controlv1.YieldLeadershipResponse{Partitions: []*controlv1.PartitionResult{
			{Topic: "t", Partition: 0}, f.refuseYield}}, nil
	}
	return &controlv1.YieldLeadershipResponse{}, nil
}

func start(t *testing.T, c controlv1.BrokerControlServiceClient, onStale func(error)) *Sender {
	t.Helper()
	s := Start(Options{Client: c, Target: Target{ID: 1, Epoch: 7}, MinBackoff: time.Millisecond,
		MaxBackoff: 5 * time.Millisecond, OnStale: onStale})
	t.Cleanup(func() { s.Stop(); s.Wait() })
	return s
}

func done() chan error { return make(chan error, 1) }

func wait(t *testing.T, ch chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("request not finished")
		return nil
	}
}

func TestDeliversInOrderAndRetriesTransportErrors(t *testing.T) {
	c := &fakeClient{fail: func(kind string, n int) error {
		if kind == "LeaderAndIsr" && n <= 3 {
			return status.Error(codes.Unavailable, "connection refused")
		}
		return nil
	}}
	s := start(t, c, nil)
	d1, d2, d3 := done(), done(), done()
	s.Enqueue(Request{LeaderAndIsr: &controlv1.LeaderAndIsrRequest{}, Done: d1})
	s.Enqueue(Request{UpdateMetadata: &controlv1.UpdateMetadataRequest{}, Done: d2})
	s.Enqueue(Request{StopReplica: &controlv1.StopReplicaRequest{}, Done: d3})
	for _, d := range []chan error{d1, d2, d3} {
		if err := wait(t, d); err != nil {
			t.Fatalf("request failed: %v", err)
		}
	}
	want := []string{"LeaderAndIsr", "LeaderAndIsr", "LeaderAndIsr", "LeaderAndIsr", "UpdateMetadata", "StopReplica"}
	if got := c.seen(); len(got) != len(want) {
		t.Fatalf("calls = %v, want %v", got, want)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("calls = %v, want %v", got, want)
			}
		}
	}
}

func TestBrokerRefusalIsNotRetried(t *testing.T) {
	c := &fakeClient{fail: func(kind string, n int) error {
		if kind == "LeaderAndIsr" {
			return kerr.ToStatus(kerr.New(kerr.StaleBrokerEpoch, "newer registration")).Err()
		}
		return nil
	}}
	s := start(t, c, nil)
	d1, d2 := done(), done()
	s.Enqueue(Request{LeaderAndIsr: &controlv1.LeaderAndIsrRequest{}, Done: d1})
	s.Enqueue(Request{UpdateMetadata: &controlv1.UpdateMetadataRequest{}, Done: d2})
	if err := wait(t, d1); kerr.CodeOf(err) != kerr.StaleBrokerEpoch {
		t.Fatalf("first = %v, want STALE_BROKER_EPOCH", err)
	}
	if err := wait(t, d2); err != nil {
		t.Fatalf("second = %v", err)
	}
	if got := c.seen(); len(got) != 2 {
		t.Fatalf("calls = %v", got)
	}
}

func TestStaleControllerEpochStopsTheSender(t *testing.T) {
	for name, c := range map[string]*fakeClient{
		"status": {fail: func(kind string, n int) error {
			return kerr.ToStatus(kerr.New(kerr.StaleControllerEpoch, "epoch 3 < 4")).Err()
		}},
		"answer code": {code: commonv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH},
	} {
		t.Run(name, func(t *testing.T) {
			stale := make(chan error, 1)
			s := start(t, c, func(err error) { stale <- err })
			d1, d2 := done(), done()
			s.Enqueue(Request{UpdateMetadata: &controlv1.UpdateMetadataRequest{}, Done: d1})
			s.Enqueue(Request{UpdateMetadata: &controlv1.UpdateMetadataRequest{}, Done: d2})
			select {
			case err := <-stale:
				if kerr.CodeOf(err) != kerr.StaleControllerEpoch {
					t.Fatalf("OnStale got %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("OnStale not called")
			}
			if err := wait(t, d2); !errors.Is(err, ErrStopped) {
				t.Fatalf("queued request = %v, want ErrStopped", err)
			}
			wait(t, d1)
			if got := c.seen(); len(got) != 1 {
				t.Fatalf("calls after stale = %v", got)
			}
			d3 := done()
			s.Enqueue(Request{UpdateMetadata: &controlv1.UpdateMetadataRequest{}, Done: d3})
			if err := wait(t, d3); !errors.Is(err, ErrStopped) {
				t.Fatalf("enqueue after stop = %v", err)
			}
		})
	}
}

func TestStopDropsQueueAndGateHolds(t *testing.T) {
	c := &fakeClient{}
	release := make(chan struct{})
	s := Start(Options{Client: c, Target: Target{ID: 2, Epoch: 9}, Gate: func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	d1, d2 := done(), done()
	s.Enqueue(Request{LeaderAndIsr: &controlv1.LeaderAndIsrRequest{}, Done: d1})
	s.Enqueue(Request{LeaderAndIsr: &controlv1.LeaderAndIsrRequest{}, Done: d2})
	time.Sleep(20 * time.Millisecond)
	if n := len(c.seen()); n != 0 || s.Pending() != 2 {
		t.Fatalf("gate let %d calls through, pending %d", n, s.Pending())
	}
	s.Stop()
	for _, d := range []chan error{d1, d2} {
		if err := wait(t, d); !errors.Is(err, ErrStopped) {
			t.Fatalf("dropped request = %v", err)
		}
	}
	s.Wait()
	if len(c.seen()) != 0 {
		t.Fatalf("calls after stop = %v", c.seen())
	}
}

// A YieldLeadership that leaves one partition unyielded fails as a whole,
// naming it, and is not retried: the controller then moves none of them.
func TestYieldLeadershipFailsOnAnyPartitionNotYielded(t *testing.T) {
	c := &fakeClient{refuseYield: &controlv1.PartitionResult{Topic: "t", Partition: 1,
		ErrorCode: commonv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, ErrorMessage: "broker 1 leads t-1 at leader epoch 4"}}
	s := start(t, c, nil)
	d := done()
	s.Enqueue(Request{YieldLeadership: &controlv1.YieldLeadershipRequest{}, Done: d})
	err := wait(t, d)
	if kerr.CodeOf(err) != kerr.FencedLeaderEpoch || !strings.Contains(err.Error(), "t-1") {
		t.Fatalf("err = %v, want FENCED_LEADER_EPOCH naming t-1", err)
	}
	if got := c.seen(); len(got) != 1 {
		t.Fatalf("calls = %v, want one YieldLeadership", got)
	}
	c.refuseYield = nil
	d = done()
	s.Enqueue(Request{YieldLeadership: &controlv1.YieldLeadershipRequest{}, Done: d})
	if err := wait(t, d); err != nil {
		t.Fatalf("yield answered NONE everywhere failed: %v", err)
	}
}

// A partition a broker answers STALE_CONTROLLER_EPOCH holds a newer state
// than the one sent (etcd went backwards): the sender reports it and goes
// on, where a whole request answered so ends the sender (a newer
// controller exists).
func TestOlderPartitionStatesAreReportedNotStale(t *testing.T) {
	c := &fakeClient{laiPartitions: []*controlv1.PartitionResult{
		{Topic: "t", Partition: 0},
		{Topic: "t", Partition: 1, ErrorCode: commonv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH, ErrorMessage: "older"},
		{Topic: "t", Partition: 2, ErrorCode: commonv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH, ErrorMessage: "older"},
	}}
	older := make(chan int, 1)
	s := Start(Options{Client: c, Target: Target{ID: 1, Epoch: 7}, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		OnStale:      func(err error) { t.Errorf("OnStale(%v) for a partition's answer", err) },
		OnOlderState: func(n int) { older <- n }})
	t.Cleanup(func() { s.Stop(); s.Wait() })
	d1, d2 := done(), done()
	s.Enqueue(Request{LeaderAndIsr: &controlv1.LeaderAndIsrRequest{}, Done: d1})
	s.Enqueue(Request{UpdateMetadata: &controlv1.UpdateMetadataRequest{}, Done: d2})
	if err := wait(t, d1); err != nil {
		t.Fatalf("LeaderAndIsr = %v", err)
	}
	if err := wait(t, d2); err != nil {
		t.Fatalf("the request after it = %v, want delivered", err)
	}
	select {
	case n := <-older:
		if n != 2 {
			t.Fatalf("OnOlderState(%d), want 2", n)
		}
	default:
		t.Fatal("OnOlderState not called")
	}
}
