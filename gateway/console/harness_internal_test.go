package console

// A scripted controller for the console's internal tests: its WatchCluster sends what
// the test queues on msgs (nil ends the stream with UNAVAILABLE, as a
// controller that went away), DescribeTopics answers topics.

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

type fakeCtl struct {
	adminv1.UnimplementedAdminServiceServer
	msgs    chan *adminv1.WatchClusterResponse
	mu      sync.Mutex
	topics  []*adminv1.TopicDescription
	streams int
}

func (f *fakeCtl) DescribeCluster(context.Context, *adminv1.DescribeClusterRequest) (*adminv1.DescribeClusterResponse, error) {
	return fakeCluster(), nil
}

func (f *fakeCtl) DescribeTopics(context.Context, *adminv1.DescribeTopicsRequest) (*adminv1.DescribeTopicsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &adminv1.DescribeTopicsResponse{Topics: f.topics}, nil
}

func (f *fakeCtl) WatchCluster(_ *adminv1.WatchClusterRequest, st adminv1.AdminService_WatchClusterServer) error {
	f.mu.Lock()
	f.streams++
	f.mu.Unlock()
	for {
		select {
		case m := <-f.msgs:
			if m == nil {
				return status.Error(codes.Unavailable, "controller went away (test)")
			}
			if err := st.Send(m); err != nil {
				return err
			}
		case <-st.Context().Done():
			return nil
		}
	}
}

// fakeBrokerAddr is broker 1's address in fakeCluster.
var fakeBrokerAddr = "127.0.0.1:2"

func fakeCluster() *adminv1.DescribeClusterResponse {
	return &adminv1.DescribeClusterResponse{ClusterId: "scripted",
		Controller: &commonv1.Node{Id: 100, Address: "127.0.0.1:1"}, ControllerEpoch: 1,
		Brokers: []*adminv1.BrokerInfo{{Node: &commonv1.Node{Id: 1, Address: fakeBrokerAddr}, Alive: true, BrokerEpoch: 7}}}
}

// watchMsg is a WatchCluster message of one partition t-0 with events.
func watchMsg(topic string, hw int64, evs ...*controlv1.ClusterEvent) *adminv1.WatchClusterResponse {
	return &adminv1.WatchClusterResponse{Time: time.Now().UnixMilli(), Cluster: fakeCluster(),
		Partitions: []*adminv1.PartitionView{{Topic: topic, Partition: 0, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, Isr: []int32{1},
			MinInsyncReplicas: 1, HighWatermark: hw, HighWatermarkKnown: true,
			ReplicaViews: []*adminv1.ReplicaView{{BrokerId: 1, Alive: true, InIsr: true, Leader: true, LogEndOffset: hw, HighWatermark: hw, Reported: true}}}},
		Events: evs}
}

// startFakeCtl serves a scripted controller and a console over it.
func startFakeCtl(t *testing.T, o Options) (*fakeCtl, *Console, *httptest.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCtl{msgs: make(chan *adminv1.WatchClusterResponse, 64)}
	srv := grpc.NewServer()
	adminv1.RegisterAdminServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	o.Controllers = []string{lis.Addr().String()}
	o.ClientOptions.RetryBackoff, o.ClientOptions.RetryBackoffMax = 20*time.Millisecond, 50*time.Millisecond
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(c)
	t.Cleanup(func() { _ = c.Close(); hs.Close() })
	return f, c, hs
}

type rawEvent struct {
	name string
	data string
}

// openEvents reads /console/events into a channel.
func openEvents(t *testing.T, base string) <-chan rawEvent {
	t.Helper()
	out, _ := openEventsVia(t, http.DefaultClient, base)
	return out
}

// openEventsVia reads /console/events through cl into a channel, closed
// when the stream ends; streamErr then says why (nil: a clean end).
func openEventsVia(t *testing.T, cl *http.Client, base string) (out <-chan rawEvent, streamErr func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/console/events", nil)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan rawEvent, 4096)
	var readErr error
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		var ev rawEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ch <- ev
				}
				ev = rawEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
		readErr = sc.Err() // before close(ch), which publishes it
	}()
	return ch, func() error { return readErr }
}
