package kafkaapi

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// fakeReassigner is the controller's reassignment calls: it records what
// is forwarded and answers each partition with answer's code (none when
// absent), or refuses the whole call with refuse; block holds the call
// until its context ends.
type fakeReassigner struct {
	adminv1.AdminServiceClient
	mu      sync.Mutex
	altered []*adminv1.ReassignablePartition
	listed  []*adminv1.ListPartitionReassignmentsRequest
	answer  map[string]kerr.Code
	ongoing []*adminv1.OngoingReassignment
	refuse  error
	block   bool
}

func (f *fakeReassigner) AlterPartitionReassignments(ctx context.Context, in *adminv1.AlterPartitionReassignmentsRequest, _ ...grpc.CallOption) (*adminv1.AlterPartitionReassignmentsResponse, error) {
	if f.block {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err() // as a gRPC client answers

	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return nil, kerr.ToStatus(f.refuse).Err()
	}
	f.altered = append(f.altered, in.GetPartitions()...)
	resp := &adminv1.AlterPartitionReassignmentsResponse{}
	for _, p := range in.GetPartitions() {
		c := f.answer[p.GetTopic()]
		resp.Results = append(resp.Results, &adminv1.ReassignmentResult{Topic: p.GetTopic(), Partition: p.GetPartition(),
			ErrorCode: commonv1.ErrorCode(c), ErrorMessage: map[bool]string{true: "refused by the controller"}[c != 0]})
	}
	return resp, nil
}

func (f *fakeReassigner) ListPartitionReassignments(ctx context.Context, in *adminv1.ListPartitionReassignmentsRequest, _ ...grpc.CallOption) (*adminv1.ListPartitionReassignmentsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return nil, kerr.ToStatus(f.refuse).Err()
	}
	f.listed = append(f.listed, in)
	named := map[string]bool{}
	for _, tp := range in.GetPartitions() {
		if tp.GetTopic() == "ghost" { // as the controller answers a topic it does not know
			return nil, kerr.ToStatus(kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", "ghost")).Err()
		}
		named[tp.GetTopic()] = true
	}
	resp := &adminv1.ListPartitionReassignmentsResponse{}
	for _, o := range f.ongoing {
		if len(named) == 0 || named[o.GetTopic()] {
			resp.Reassignments = append(resp.Reassignments, o)
		}
	}
	return resp, nil
}

func withFakeReassigner(f *fakeReassigner) *Server {
	return New(Options{Admin: func(context.Context) (adminv1.AdminServiceClient, error) { return f, nil }})
}

func alterAssignments(timeoutMs int32, topic string, targets map[int32][]int32) *kmsg.AlterPartitionAssignmentsRequest {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = timeoutMs
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	for _, p := range slices.Sorted(func(yield func(int32) bool) {
		for p := range targets {
			if !yield(p) {
				return
			}
		}
	}) {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = p, targets[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// Each partition's target is forwarded, a null one as tidemark's cancel
// (no replicas); an empty non-null list, which Kafka refuses, is refused
// here with INVALID_REPLICA_ASSIGNMENT and not forwarded (it would have
// cancelled the move). The controller's per-partition codes come back on
// their partitions.
func TestAlterPartitionReassignmentsForwardsTargetsAndCancels(t *testing.T) {
	f := &fakeReassigner{answer: map[string]kerr.Code{"ghost": kerr.UnknownTopicOrPartition}}
	s := withFakeReassigner(f)
	req := alterAssignments(1000, "t", map[int32][]int32{0: {2, 3, 4}, 1: nil, 2: {}})
	ghost := alterAssignments(0, "ghost", map[int32][]int32{0: {1}})
	req.Topics = append(req.Topics, ghost.Topics...)
	resp := s.handleAlterPartitionReassignments(context.Background(), &reqCtx{}, req).(*kmsg.AlterPartitionAssignmentsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("top-level %d", resp.ErrorCode)
	}
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			got[rt.Topic+"-"+string(rune('0'+rp.Partition))] = rp.ErrorCode
			if rp.Partition == 2 && (rp.ErrorMessage == nil || !strings.Contains(*rp.ErrorMessage, "empty")) {
				t.Errorf("t-2's message: %v", rp.ErrorMessage)
			}
		}
	}
	want := map[string]int16{"t-0": 0, "t-1": 0, "t-2": int16(kerr.InvalidReplicaAssignment), "ghost-0": int16(kerr.UnknownTopicOrPartition)}
	for k, c := range want {
		if g, ok := got[k]; !ok || g != c {
			t.Errorf("%s: code %d (answered %v), want %d", k, g, ok, c)
		}
	}
	if len(f.altered) != 3 {
		t.Fatalf("forwarded %v, want t-0, t-1 and ghost-0", f.altered)
	}
	if !slices.Equal(f.altered[0].GetReplicas(), []int32{2, 3, 4}) || f.altered[1].GetPartition() != 1 || len(f.altered[1].GetReplicas()) != 0 {
		t.Errorf("forwarded %v", f.altered)
	}
}

// A refusal of the whole call (Alter on Cluster missing, the timeout) is
// the top-level code and every partition's, as Kafka's error answer, even
// one this broker refused itself (an empty list): authorization comes first.
func TestAlterPartitionReassignmentsRefusalsAreTopLevel(t *testing.T) {
	denied := kerr.New(kerr.ClusterAuthorizationFailed, "User:alice may not alter partition reassignments")
	for _, c := range []struct {
		name string
		f    *fakeReassigner
		want kerr.Code
	}{
		{"unauthorized", &fakeReassigner{refuse: denied}, kerr.ClusterAuthorizationFailed},
		{"timeout", &fakeReassigner{block: true}, kerr.RequestTimedOut},
	} {
		s := withFakeReassigner(c.f)
		req := alterAssignments(50, "t", map[int32][]int32{0: {1, 2}, 1: nil, 2: {}})
		resp := s.handleAlterPartitionReassignments(context.Background(), &reqCtx{}, req).(*kmsg.AlterPartitionAssignmentsResponse)
		if resp.ErrorCode != int16(c.want) || resp.ErrorMessage == nil {
			t.Errorf("%s: top-level %d %v, want %d", c.name, resp.ErrorCode, resp.ErrorMessage, c.want)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("%s: answered %+v", c.name, resp.Topics)
		}
		for _, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != int16(c.want) {
				t.Errorf("%s: partition %d code %d, want %d", c.name, rp.Partition, rp.ErrorCode, c.want)
			}
		}
	}
}

// Null topics ask for every move in flight (no partitions forwarded);
// named ones are forwarded; each move's replicas, adding and removing come
// back by topic. Refusals are the top-level code.
func TestListPartitionReassignmentsForwardsAndGroups(t *testing.T) {
	f := &fakeReassigner{ongoing: []*adminv1.OngoingReassignment{
		{Topic: "a", Partition: 0, Replicas: []int32{2, 3, 4, 1}, AddingReplicas: []int32{4}, RemovingReplicas: []int32{1}},
		{Topic: "a", Partition: 2, Replicas: []int32{1, 2, 3}, AddingReplicas: []int32{3}},
		{Topic: "b", Partition: 1, Replicas: []int32{1, 2}, RemovingReplicas: []int32{2}},
	}}
	s := withFakeReassigner(f)
	all := kmsg.NewPtrListPartitionReassignmentsRequest()
	resp := s.handleListPartitionReassignments(context.Background(), &reqCtx{}, all).(*kmsg.ListPartitionReassignmentsResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 2 || len(resp.Topics[1].Partitions) != 1 {
		t.Fatalf("answered %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if resp.Topics[0].Topic != "a" || !slices.Equal(p.Replicas, []int32{2, 3, 4, 1}) || !slices.Equal(p.AddingReplicas, []int32{4}) || !slices.Equal(p.RemovingReplicas, []int32{1}) {
		t.Errorf("a-0: %+v", p)
	}
	if q := resp.Topics[0].Partitions[1]; q.RemovingReplicas == nil || len(q.RemovingReplicas) != 0 {
		t.Errorf("a-2's removing replicas: %v, want an empty array", q.RemovingReplicas)
	}
	if len(f.listed) != 1 || len(f.listed[0].GetPartitions()) != 0 {
		t.Fatalf("forwarded %v for null topics", f.listed)
	}

	named := kmsg.NewPtrListPartitionReassignmentsRequest()
	rt := kmsg.NewListPartitionReassignmentsRequestTopic()
	rt.Topic, rt.Partitions = "a", []int32{0, 1}
	named.Topics = append(named.Topics, rt)
	s.handleListPartitionReassignments(context.Background(), &reqCtx{}, named)
	if len(f.listed) != 2 || len(f.listed[1].GetPartitions()) != 2 || f.listed[1].GetPartitions()[1].GetPartition() != 1 {
		t.Fatalf("forwarded %v for a-0, a-1", f.listed)
	}

	// A topic the controller does not know is left out, as Kafka's
	// controller does, not a refusal of the whole list.
	f.listed = nil
	withGhost := kmsg.NewPtrListPartitionReassignmentsRequest()
	for _, name := range []string{"ghost", "b"} {
		rt := kmsg.NewListPartitionReassignmentsRequestTopic()
		rt.Topic, rt.Partitions = name, []int32{0, 1}
		withGhost.Topics = append(withGhost.Topics, rt)
	}
	resp = s.handleListPartitionReassignments(context.Background(), &reqCtx{}, withGhost).(*kmsg.ListPartitionReassignmentsResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Topic != "b" || len(resp.Topics[0].Partitions) != 1 {
		t.Errorf("listing ghost and b: %d %+v", resp.ErrorCode, resp.Topics)
	}

	f.refuse = kerr.New(kerr.ClusterAuthorizationFailed, "User:alice may not list partition reassignments")
	resp = s.handleListPartitionReassignments(context.Background(), &reqCtx{}, all).(*kmsg.ListPartitionReassignmentsResponse)
	if resp.ErrorCode != int16(kerr.ClusterAuthorizationFailed) || len(resp.Topics) != 0 {
		t.Errorf("refused: %d %+v", resp.ErrorCode, resp.Topics)
	}
}

// ApiVersions advertises both at v0.
func TestReassignmentAPIsAdvertised(t *testing.T) {
	s := withFakeReassigner(&fakeReassigner{})
	resp := kmsg.NewPtrApiVersionsResponse()
	s.fillApiVersions(resp)
	found := 0
	for _, k := range resp.ApiKeys {
		if (k.ApiKey == 45 || k.ApiKey == 46) && k.MinVersion == 0 && k.MaxVersion == 0 {
			found++
		}
	}
	if found != 2 {
		t.Errorf("ApiVersions: %+v", resp.ApiKeys)
	}
}
