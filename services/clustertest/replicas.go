package clustertest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
)

// Replicas in tests: what each broker's replica of a partition holds, and
// topics placed, moved and throttled by hand.

// ReplicaView is what one broker's replica of a partition holds: its state
// machine's view and its leader-epoch cache.
type ReplicaView struct {
	Leader        bool
	HW, LEO       int64
	LogStart      int64
	ISR           []int32
	FollowerLEO   map[int32]int64 // the leader's view; -1 until a follower fetched in this epoch
	Epochs        string
	FirstEpoch    int32
	LatestEpoch   int32
	EpochsPresent bool
}

// String is the view for failure messages.
func (v ReplicaView) String() string {
	return fmt.Sprintf("leader %t hw %d leo %d log start %d isr %v followers %v epochs %s",
		v.Leader, v.HW, v.LEO, v.LogStart, v.ISR, v.FollowerLEO, v.Epochs)
}

// View reads broker id's replica of topic-p; ok is false when the broker is
// down or does not host it.
func (c *Cluster) View(id int32, topic string, p int32) (ReplicaView, bool) {
	b := c.Broker(id)
	if b == nil {
		return ReplicaView{}, false
	}
	for _, r := range b.Replicas().Replicas() {
		if tp := r.TP(); tp.Topic != topic || tp.Partition != p {
			continue
		}
		s := r.Snapshot(time.Now())
		v := ReplicaView{Leader: r.IsLeader(), HW: s.HighWatermark, LEO: s.LogEndOffset, LogStart: r.Log().LogStartOffset(),
			ISR: s.ISR, FollowerLEO: map[int32]int64{}, FirstEpoch: -1, LatestEpoch: -1}
		for _, f := range s.Followers {
			v.FollowerLEO[f.ID] = f.LogEndOffset
		}
		entries := r.Log().EpochEntries()
		v.Epochs = fmt.Sprint(entries)
		if len(entries) > 0 {
			v.EpochsPresent = true
			v.FirstEpoch, v.LatestEpoch = entries[0].Epoch, entries[len(entries)-1].Epoch
		}
		return v, true
	}
	return ReplicaView{}, false
}

// settled reports whether a quiet partition has caught up everywhere: the
// leader's ISR holds every replica, the leader knows every follower's LEO,
// every replica's LEO and HW equal the leader's LEO, and the leader is not
// fenced from its clients. It returns what it saw for the failure message.
func (c *Cluster) settled(topic string, p int32, replicas []int32) (bool, string) {
	leader := c.Partition(topic, p).GetLeader()
	lv, ok := c.View(leader, topic, p)
	if !ok || !lv.Leader {
		return false, fmt.Sprintf("broker %d not acting as leader", leader)
	}
	seen := fmt.Sprintf("leader %d: %v", leader, lv)
	done := len(lv.ISR) == len(replicas)
	// A leader fenced from its clients (for instance registered anew and
	// waiting for the controller to confirm its roles) is not live yet.
	if b := c.Broker(leader); b != nil && b.Fenced() {
		seen += " (fenced)"
		done = false
	}
	for _, id := range replicas {
		v, ok := c.View(id, topic, p)
		if id != leader {
			seen += fmt.Sprintf("; broker %d: %v", id, v)
			if lv.FollowerLEO[id] != lv.LEO {
				done = false
			}
		}
		if !ok || v.LEO != lv.LEO || v.HW != lv.LEO {
			done = false
		}
	}
	return done, seen
}

// WaitSettled waits for settled without a single write to the partition:
// the liveness of a quiet partition.
func (c *Cluster) WaitSettled(timeout time.Duration, topic string, p int32, replicas []int32) {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := c.settled(topic, p, replicas)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("after %s without writes, %s-%d has not settled (full ISR, HW = LEO on every replica): %s", timeout, topic, p, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Metric reads one sample from broker id's /metrics (its metrics listener
// must be on), by its name and labels as printed; 0 when absent.
func (c *Cluster) Metric(id int32, name string) float64 {
	c.T.Helper()
	resp, err := http.Get("http://" + c.Broker(id).MetricsAddr() + "/metrics")
	if err != nil {
		c.T.Fatalf("metrics of broker %d: %v", id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.T.Fatalf("metrics of broker %d: %v", id, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				c.T.Fatalf("metrics of broker %d: %q: %v", id, line, err)
			}
			return n
		}
	}
	return 0
}

// CreateAssigned creates a topic with an explicit assignment and waits for
// its leaders.
func CreateAssigned(t testing.TB, c *Cluster, name string, asg [][]int32, configs map[string]string) {
	t.Helper()
	spec := &adminv1.TopicSpec{Name: name, Configs: configs}
	for p, reps := range asg {
		spec.Assignments = append(spec.Assignments, &adminv1.ReplicaAssignment{Partition: int32(p), Replicas: reps})
	}
	resp, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResults()[0]; r.GetErrorCode() != 0 {
		t.Fatalf("create %s: %s", name, r.GetErrorMessage())
	}
	c.WaitFor(10*time.Second, "leaders of "+name, func() bool {
		for p := range asg {
			if !c.Leads(c.Partition(name, int32(p)).GetLeader(), name, int32(p)) {
				return false
			}
		}
		return true
	})
}

// settledWhy reports whether a partition's replicas and ISR are exactly
// want (ISR in any order), with no move in flight and its leader acting,
// and what it saw.
func settledWhy(c *Cluster, topic string, p int32, want []int32) (bool, string) {
	resp, err := c.Admin().DescribeTopics(context.Background(), &adminv1.DescribeTopicsRequest{Topics: []string{topic}})
	if err != nil || len(resp.GetTopics()) != 1 {
		return false, fmt.Sprintf("describing %s: %v", topic, err)
	}
	pd := &adminv1.PartitionDescription{Leader: -1}
	for _, d := range resp.GetTopics()[0].GetPartitions() {
		if d.GetPartition() == p {
			pd = d
		}
	}
	isr := slices.Sorted(slices.Values(pd.GetIsr()))
	sorted := slices.Sorted(slices.Values(want))
	leads := c.Leads(pd.GetLeader(), topic, p)
	ok := slices.Equal(pd.GetReplicas(), want) && slices.Equal(isr, sorted) && len(pd.GetAddingReplicas()) == 0 &&
		len(pd.GetRemovingReplicas()) == 0 && leads
	return ok, fmt.Sprintf("controller's view %v; broker %d leads it in its own view: %v", pd, pd.GetLeader(), leads)
}

// SettledOn is settledWhy's verdict.
func SettledOn(c *Cluster, topic string, p int32, want []int32) bool {
	ok, _ := settledWhy(c, topic, p, want)
	return ok
}

// CheckWholeAndLive checks that every replica of the partition holds the
// same log, with each acknowledged value at its offset, and has HW = LEO.
func CheckWholeAndLive(t *testing.T, c *Cluster, topic string, p int32, replicas []int32, acked map[int64]string) {
	t.Helper()
	c.WaitFor(15*time.Second, fmt.Sprintf("HW = LEO on %v of %s-%d", replicas, topic, p), func() bool {
		for _, id := range replicas {
			hw, leo, ok := c.Broker(id).ReplicaOffsets(topic, p)
			if !ok || hw != leo {
				return false
			}
		}
		return true
	})
	log := c.SameLogs(topic, p, replicas...)
	for off, v := range acked {
		if off >= int64(len(log)) || log[off] != v {
			got := "nothing"
			if off < int64(len(log)) {
				got = log[off]
			}
			t.Errorf("%s-%d: acknowledged %q at offset %d, the log holds %s", topic, p, v, off, got)
		}
	}
	seen := map[string]bool{}
	for _, v := range log {
		if seen[v] {
			t.Errorf("%s-%d: %q is in the log twice", topic, p, v)
		}
		seen[v] = true
	}
}

// Gone checks that broker id no longer hosts the partition and that its
// directory left the broker's data dir.
func Gone(t *testing.T, c *Cluster, id int32, topic string, p int32) {
	t.Helper()
	dir := filepath.Join(c.BrokerConfig(id).DataDir, fmt.Sprintf("%s-%d", topic, p))
	c.WaitFor(10*time.Second, fmt.Sprintf("broker %d to delete %s-%d", id, topic, p), func() bool {
		_, _, hosted := c.Broker(id).ReplicaOffsets(topic, p)
		_, err := os.Stat(dir)
		return !hosted && os.IsNotExist(err)
	})
}

// Throttle sets a broker's throttle rate and a topic's throttled replicas.
func Throttle(t testing.TB, c *Cluster, topic, brokerID, rateKey, rate, listKey, list string) {
	t.Helper()
	resp, err := c.Admin().AlterConfigs(context.Background(), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{
		{Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: brokerID},
			Ops: []*adminv1.ConfigOp{{Name: rateKey, Value: rate, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}},
		{Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: topic},
			Ops: []*adminv1.ConfigOp{{Name: listKey, Value: list, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.GetResults() {
		if r.GetErrorCode() != 0 {
			t.Fatalf("alter configs: %s", r.GetErrorMessage())
		}
	}
}

// AssertAllPresent fails the test unless every acknowledged value is in
// log.
func AssertAllPresent(t testing.TB, acked, log []string) {
	t.Helper()
	have := map[string]bool{}
	for _, v := range log {
		have[v] = true
	}
	for _, v := range acked {
		if !have[v] {
			t.Fatalf("acknowledged record %s is missing from the log", v)
		}
	}
}

// Reassign asks for targets (nil: cancel) and fails on any refusal.
func Reassign(t testing.TB, c *Cluster, topic string, targets map[int32][]int32) {
	t.Helper()
	req := &adminv1.AlterPartitionReassignmentsRequest{}
	for _, p := range slices.Sorted(maps.Keys(targets)) {
		req.Partitions = append(req.Partitions, &adminv1.ReassignablePartition{Topic: topic, Partition: p, Replicas: targets[p]})
	}
	resp, err := c.Admin().AlterPartitionReassignments(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.GetResults() {
		if r.GetErrorCode() != 0 {
			t.Fatalf("reassign %s-%d: %s %s", r.GetTopic(), r.GetPartition(), r.GetErrorCode(), r.GetErrorMessage())
		}
	}
}

// ProduceAcked writes n values v0, v1, ... to partition 0 of topic with
// acks=all, one at a time, and returns them by offset.
func ProduceAcked(t *testing.T, c *Cluster, topic string, n int) map[int64]string {
	t.Helper()
	acked := map[int64]string{}
	for i := range n {
		v := fmt.Sprintf("v%d", i)
		off, err := c.Produce(context.Background(), topic, 0, -1, v)
		if err != nil {
			t.Fatal(err)
		}
		acked[off] = v
	}
	return acked
}

// DescribeAll waits for the active controller to describe topic and
// returns its partitions by number.
func (c *Cluster) DescribeAll(topic string, timeout time.Duration) map[int32]*adminv1.PartitionDescription {
	c.T.Helper()
	var out map[int32]*adminv1.PartitionDescription
	c.WaitFor(timeout, "the active controller to describe "+topic, func() bool {
		resp, err := c.Admin().DescribeTopics(context.Background(), &adminv1.DescribeTopicsRequest{Topics: []string{topic}})
		if err != nil || len(resp.GetTopics()) == 0 {
			return false
		}
		out = map[int32]*adminv1.PartitionDescription{}
		for _, pd := range resp.GetTopics()[0].GetPartitions() {
			out[pd.GetPartition()] = pd
		}
		return true
	})
	return out
}

// BrokerEpochs are the live brokers' epochs as the active controller has them.
func (c *Cluster) BrokerEpochs() map[int32]int64 {
	resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
	if err != nil {
		return nil
	}
	out := map[int32]int64{}
	for _, b := range resp.GetBrokers() {
		if b.GetAlive() {
			out[b.GetNode().GetId()] = b.GetBrokerEpoch()
		}
	}
	return out
}

// SortedIDs is a sorted copy of ids.
func SortedIDs(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// Consume reads the partition from the leader as a consumer does (up to the
// HW), from offset.
func (c *Cluster) Consume(topic string, p int32, offset int64) []string {
	c.T.Helper()
	leader := c.Partition(topic, p).GetLeader()
	resp, err := c.BrokerClient(leader).Fetch(context.Background(), &brokerv1.FetchRequest{
		Topic: topic, Partition: p, Offset: offset, CurrentLeaderEpoch: -1})
	if err != nil {
		c.T.Fatalf("consumer fetch from broker %d: %v", leader, err)
	}
	var out []string
	for _, r := range resp.GetRecords() {
		out = append(out, string(r.GetValue()))
	}
	return out
}
