package clustertest

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// Consumer groups in tests: the group API over gRPC and the Go client's
// group members.

// GroupSettings keep the group timings short for tests: sessions from
// 100ms, no initial rebalance delay.
var GroupSettings = map[string]string{
	"group.min.session.timeout.ms":     "100",
	"group.initial.rebalance.delay.ms": "0",
}

// OffsetsPartitions sets the controller's offsets.topic.num.partitions.
func OffsetsPartitions(n int32) func(*controller.Config) {
	return func(cfg *controller.Config) { cfg.OffsetsTopicNumPartitions = n }
}

// Groups is a test's handle on the group API: it finds the coordinator
// and goes to it, retrying while the coordinator moves or loads.
type Groups struct {
	C *Cluster
}

func (g Groups) on(id int32) groupv1.GroupServiceClient {
	return groupv1.NewGroupServiceClient(g.C.conn(g.C.brokerCfg[id].Listen))
}

// any returns the group API on some running broker.
func (g Groups) any() groupv1.GroupServiceClient {
	for id := range g.C.brokerCfg {
		if g.C.Broker(id) != nil {
			return g.on(id)
		}
	}
	g.C.T.Fatal("no broker is running")
	return nil
}

// coordinator finds the group's coordinator, retrying while there is none.
func (g Groups) coordinator(group string) int32 {
	g.C.T.Helper()
	var id int32 = -1
	g.C.WaitFor(30*time.Second, "a coordinator for "+group, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := g.any().FindCoordinator(ctx, &groupv1.FindCoordinatorRequest{Key: group})
		if err != nil {
			return false
		}
		id = resp.GetCoordinator().GetId()
		return g.C.Broker(id) != nil
	})
	return id
}

// Call runs fn against the group's coordinator until it answers something
// other than a coordinator-moving error.
func Call[T any](g Groups, group string, fn func(ctx context.Context, api groupv1.GroupServiceClient) (T, error)) (T, error) {
	g.C.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		id := g.coordinator(group)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		v, err := fn(ctx, g.on(id))
		cancel()
		if err == nil {
			return v, nil
		}
		switch kerr.FromStatus(err).Code {
		case kerr.NotCoordinator, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable, kerr.NetworkException:
			if time.Now().Before(deadline) {
				time.Sleep(25 * time.Millisecond)
				continue
			}
		}
		return v, kerr.FromStatus(err)
	}
}

// groupClient is a client of its own (its connections die with it) that
// retries fast.
func (c *Cluster) groupClient() *client.Client {
	c.T.Helper()
	return c.groupClientVia("")
}

// groupClientVia is groupClient dialling through the network simulator
// as node name (so that a paused broker stalls it too); "" dials directly.
func (c *Cluster) groupClientVia(name string) *client.Client {
	c.T.Helper()
	o := client.Options{RequestTimeout: 3 * time.Second,
		RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond, APITimeout: 20 * time.Second}
	if os.Getenv("TIDEMARK_CLIENT_DEBUG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if name != "" {
		o.Dialer = c.Net.Dialer(name)
	}
	return c.ClientWith(o)
}

// GroupOpts are the options of test members: short sessions, small
// fetches (one produced batch each), earliest.
func GroupOpts(group string, topics ...string) client.GroupOptions {
	return client.GroupOptions{
		GroupID: group, Topics: topics, ClientID: "clustertest",
		SessionTimeout: 1500 * time.Millisecond, HeartbeatInterval: 150 * time.Millisecond,
		RebalanceTimeout: 4 * time.Second, AutoOffsetReset: "earliest",
		MaxBytes: 1, MaxWait: 100 * time.Millisecond, AutoCommitInterval: 200 * time.Millisecond,
	}
}

// Member is a GroupConsumer polled on a goroutine, recording every offset
// it is handed per partition.
type Member struct {
	t    *testing.T
	gc   *client.GroupConsumer
	stop chan struct{}
	done chan struct{}
	// hold, while locked by a test, keeps the member from calling Poll (a
	// stuck record handler).
	hold sync.Mutex

	mu   sync.Mutex
	got  map[client.TopicPartition][]int64
	lost int
	err  error
}

// StartMember starts a member polling with options o on a client of its
// own; it is killed when the test ends.
func (c *Cluster) StartMember(o client.GroupOptions) *Member {
	c.T.Helper()
	return c.startMemberOn(c.groupClient(), o)
}

// startMemberOn is StartMember on a client of the test's own.
func (c *Cluster) startMemberOn(cl *client.Client, o client.GroupOptions) *Member {
	c.T.Helper()
	m := &Member{t: c.T.(*testing.T), stop: make(chan struct{}), done: make(chan struct{}), got: map[client.TopicPartition][]int64{}}
	o.OnPartitionsLost = func(context.Context, []client.TopicPartition) {
		m.mu.Lock()
		m.lost++
		m.mu.Unlock()
	}
	gc, err := client.NewGroupConsumer(cl, o)
	if err != nil {
		c.T.Fatal(err)
	}
	m.gc = gc
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			m.hold.Lock()
			m.hold.Unlock() //nolint:staticcheck // a gate, not a critical section
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			recs, err := gc.Poll(ctx)
			cancel()
			m.mu.Lock()
			for _, r := range recs {
				tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
				m.got[tp] = append(m.got[tp], r.Offset)
			}
			if err != nil {
				m.err = err
			}
			m.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	c.T.Cleanup(m.kill)
	return m
}

// kill stops the member as kill -9 would: no commit, no LeaveGroup.
func (m *Member) kill() {
	select {
	case <-m.stop:
		return
	default:
	}
	close(m.stop)
	<-m.done
	m.gc.Abandon()
}

// Offsets are the offsets of tp the member was handed, in order.
func (m *Member) Offsets(tp client.TopicPartition) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got[tp])
}

// Failure is the error that ended the member's polling, if any.
func (m *Member) Failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// CoordinatorOf is the coordinator of group and a GroupService client on it.
func (c *Cluster) CoordinatorOf(group string) (int32, groupv1.GroupServiceClient) {
	c.T.Helper()
	var id int32 = -1
	c.WaitFor(20*time.Second, "the coordinator of "+group, func() bool {
		for bid := range c.brokerCfg {
			if c.Broker(bid) == nil {
				continue
			}
			resp, err := groupv1.NewGroupServiceClient(c.conn(c.brokerCfg[bid].Listen)).FindCoordinator(context.Background(),
				&groupv1.FindCoordinatorRequest{Key: group})
			if err == nil && c.Broker(resp.GetCoordinator().GetId()) != nil {
				id = resp.GetCoordinator().GetId()
				return true
			}
		}
		return false
	})
	return id, groupv1.NewGroupServiceClient(c.conn(c.brokerCfg[id].Listen))
}

// WaitOffsetsWhole waits until every partition of the offsets topic has a
// leader serving it and its full ISR.
func (c *Cluster) WaitOffsetsWhole(partitions int32) {
	c.T.Helper()
	c.WaitFor(time.Minute, "every offsets partition led with its full ISR", func() bool {
		for p := range partitions {
			pd := c.Partition(topicconfig.OffsetsTopic, p)
			if len(pd.GetIsr()) != 3 || !c.Leads(pd.GetLeader(), topicconfig.OffsetsTopic, p) {
				return false
			}
		}
		return true
	})
}
