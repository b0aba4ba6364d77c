package groups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
)

// The Go client's ListGroups (the console's Groups view, the CLI's groups
// list) asks the brokers at once: with every broker but one frozen (as
// under SIGSTOP, their etcd leases kept, so the metadata still lists
// them), a call whose deadline is shorter than one request timeout gets
// the groups of the broker that answers and a *client.ListGroupsError
// naming each frozen broker. The brokers were asked one after the other in
// id order: the first frozen one held the call to its deadline and the
// answering broker, last, was never asked.
func TestClientListGroupsAnswersWithoutFrozenBrokers(t *testing.T) {
	c := startGroupCluster(t)
	c.CreateTopic("t", 1, 1, nil)
	for i := range 12 {
		group := fmt.Sprintf("app-%d", i)
		if _, err := clustertest.Call(clustertest.Groups{C: c}, group, func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetCommitResponse, error) {
			return api.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: group, GenerationId: -1,
				Topics: []*groupv1.OffsetCommitTopic{{Name: "t", Partitions: []*groupv1.OffsetCommitPartition{{CommittedOffset: 0}}}}})
		}); err != nil {
			t.Fatal(err)
		}
	}
	cl := c.ClientWith(client.Options{RequestTimeout: 5 * time.Second, Dialer: c.Net.Dialer("lister")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all, err := cl.ListGroups(ctx)
	if err != nil || len(all) != 12 {
		t.Fatalf("groups before the freeze: %d, %v", len(all), err)
	}
	byBroker := map[int32][]string{}
	for _, g := range all {
		byBroker[g.GetCoordinatorId()] = append(byBroker[g.GetCoordinatorId()], g.GetGroupId())
	}
	// The answering broker is the highest id coordinating groups: asked
	// in id order, it came after the frozen ones.
	live := slices.Max(slices.Collect(maps.Keys(byBroker)))
	var frozen []int32
	for _, id := range c.BrokerIDs() {
		if id != live {
			frozen = append(frozen, id)
			c.Net.Pause(clustertest.BrokerName(id))
			defer c.Net.Resume(clustertest.BrokerName(id))
		}
	}
	slices.Sort(frozen)
	if frozen[0] > live {
		t.Fatalf("broker %d, the lowest id, coordinates every group: %v", live, byBroker)
	}
	// A first call lets the client see the frozen brokers unanswered, so
	// the metadata the next call starts with comes from the live one.
	_, _ = cl.ListGroups(ctx)

	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	listed, err := cl.ListGroups(short)
	var got []string
	for _, g := range listed {
		got = append(got, g.GetGroupId())
	}
	want := slices.Sorted(slices.Values(byBroker[live]))
	if !slices.Equal(got, want) {
		t.Fatalf("groups with brokers %v frozen: %v (%v), want those of broker %d: %v", frozen, got, err, live, want)
	}
	var lerr *client.ListGroupsError
	if !errors.As(err, &lerr) {
		t.Fatalf("error with brokers %v frozen: %v, want a ListGroupsError", frozen, err)
	}
	var unanswered []int32
	for _, u := range lerr.Unanswered {
		unanswered = append(unanswered, u.GetBrokerId())
		// Timed out, or, when the first call's keepalive closed the frozen
		// broker's connection, a new one that could not even be set up.
		code := u.GetErrorCode()
		if u.GetAddress() != c.BrokerConfig(u.GetBrokerId()).Listen ||
			(code != commonv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT && code != commonv1.ErrorCode_ERROR_CODE_NETWORK_EXCEPTION) {
			t.Errorf("unanswered broker %v, want its address and REQUEST_TIMED_OUT or NETWORK_EXCEPTION", u)
		}
	}
	if !slices.Equal(unanswered, frozen) {
		t.Fatalf("unanswered brokers %v, want the frozen %v", unanswered, frozen)
	}
}
