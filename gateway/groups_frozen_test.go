package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
)

// GET /v1/groups with one broker frozen (as under SIGSTOP, its etcd
// lease kept, so the metadata still lists it) answers, within about one
// request timeout, the groups of the brokers that answered and names the
// frozen one in unanswered, as Kafka's admin client reports
// listConsumerGroups' errors per broker. The brokers were asked one after
// the other and the frozen one failed the whole list with 504.
func TestRESTListGroupsAnswersWithoutAFrozenBroker(t *testing.T) {
	tc := startCluster(t)
	tc.CreateTopic("listed", 1, 3, nil)
	g := startGateway(t, tc, func(o *Options) {
		o.Dialer = tc.Net.Dialer("gateway")
		o.RequestTimeout, o.RetryTimeout = 2*time.Second, 3*time.Second
	})
	api := newREST(t, g)
	e := &env{tc: tc, g: g, r: api}
	// Enough groups that every broker coordinates some.
	byBroker := map[int32][]string{}
	for i := range 12 {
		group := fmt.Sprintf("listed-app-%d", i)
		succeedsSoon(t, api, http.MethodPost, "/v1/groups/"+group+"/offsets", `{"generationId": -1, "topics": [{"name": "listed",
			"partitions": [{"partition": 0, "committedOffset": 0, "committedLeaderEpoch": -1}]}]}`)
	}
	var all groupv1.ListGroupsResponse
	e.call(http.MethodGet, "/v1/groups", nil, &all)
	for _, lg := range all.GetGroups() {
		byBroker[lg.GetCoordinatorId()] = append(byBroker[lg.GetCoordinatorId()], lg.GetGroupId())
	}
	if len(all.GetGroups()) != 12 || len(all.GetUnanswered()) != 0 || len(byBroker) < 2 {
		t.Fatalf("groups before the freeze: %v", &all)
	}
	var frozen int32 // the broker coordinating the most groups
	for id, groups := range byBroker {
		if len(groups) > len(byBroker[frozen]) {
			frozen = id
		}
	}

	tc.Net.Pause(clustertest.BrokerName(frozen))
	defer tc.Net.Resume(clustertest.BrokerName(frozen))
	var listed groupv1.ListGroupsResponse
	e.call(http.MethodGet, "/v1/groups", nil, &listed)
	var want []string
	for id, groups := range byBroker {
		if id != frozen {
			want = append(want, groups...)
		}
	}
	slices.Sort(want)
	var got []string
	for _, lg := range listed.GetGroups() {
		got = append(got, lg.GetGroupId())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("groups with broker %d frozen: %v, want those of the others %v", frozen, got, want)
	}
	un := listed.GetUnanswered()
	if len(un) != 1 || un[0].GetBrokerId() != frozen || un[0].GetAddress() != tc.BrokerConfig(frozen).Listen ||
		un[0].GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
		t.Fatalf("unanswered with broker %d frozen: %v, want it alone, REQUEST_TIMED_OUT", frozen, un)
	}

	// A describe asks the groups' coordinators at once: within a deadline
	// of two request timeouts, the groups of the frozen coordinator are
	// REQUEST_TIMED_OUT and the last group, on a broker that answers, is
	// described. One after the other, the frozen coordinator's groups took
	// the whole deadline and the last group failed too.
	ids := byBroker[frozen][:min(3, len(byBroker[frozen]))]
	live := want[0]
	a := api.do(http.MethodPost, "/v1/groups:describe", fmt.Sprintf(`{"groupIds": ["%s", "%s"]}`, strings.Join(ids, `", "`), live), "Grpc-Timeout", "4S")
	if a.status != http.StatusOK {
		t.Fatalf("describe %v and %s with broker %d frozen: %d %s", ids, live, frozen, a.status, a.body)
	}
	var described groupv1.DescribeGroupsResponse
	decode(t, a.body, &described)
	rows := described.GetGroups()
	if len(rows) != len(ids)+1 {
		t.Fatalf("describe %v and %s: %v", ids, live, &described)
	}
	for i, id := range ids {
		if rows[i].GetGroupId() != id || rows[i].GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
			t.Fatalf("group %s of the frozen broker %d described as %v, want REQUEST_TIMED_OUT", id, frozen, rows[i])
		}
	}
	if last := rows[len(ids)]; last.GetGroupId() != live || last.GetErrorCode() != 0 || last.GetGroupState() != "Empty" {
		t.Fatalf("group %s of a live broker described as %v with broker %d frozen, want Empty", live, last, frozen)
	}
}

// frozenCoordinator is a broker whose group coordinator is stuck: it
// answers FindCoordinator (naming itself) and never answers OffsetFetch.
type frozenCoordinator struct {
	groupv1.UnimplementedGroupServiceServer
	addr string
}

func (f *frozenCoordinator) FindCoordinator(context.Context, *groupv1.FindCoordinatorRequest) (*groupv1.FindCoordinatorResponse, error) {
	return &groupv1.FindCoordinatorResponse{Coordinator: &commonv1.Node{Id: 1, Address: f.addr}}, nil
}

func (f *frozenCoordinator) OffsetFetch(ctx context.Context, _ *groupv1.OffsetFetchRequest) (*groupv1.OffsetFetchResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A group call its coordinator leaves unanswered is reported to the
// client (NoteAnswered): the coordinator is then the last broker the next
// FindCoordinator asks. Only FindCoordinator's own attempts were noted, so
// a frozen coordinator that was not asked to find itself stayed first and
// the next call could wait it out again.
func TestGroupCallsNoteAFrozenCoordinator(t *testing.T) {
	serve := func(f *frozenCoordinator) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		groupv1.RegisterGroupServiceServer(srv, f)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		return lis.Addr().String()
	}
	frozen := &frozenCoordinator{}
	frozen.addr = serve(frozen)
	other := serve(&frozenCoordinator{addr: frozen.addr})
	cl, err := client.New([]string{frozen.addr, other}, client.Options{RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.AnyBrokerAddrs(); !slices.Equal(got, []string{frozen.addr, other}) {
		t.Fatalf("any-broker order before: %v", got)
	}
	groups := groupService{&router{cl: cl, budget: time.Second, requestTimeout: 500 * time.Millisecond, stopping: context.Background()}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := groups.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "stuck"}); err == nil {
		t.Fatal("OffsetFetch answered by a frozen coordinator")
	}
	if got := cl.AnyBrokerAddrs(); !slices.Equal(got, []string{other, frozen.addr}) {
		t.Fatalf("any-broker order after the coordinator %s left a call unanswered: %v, want it last", frozen.addr, got)
	}
}
