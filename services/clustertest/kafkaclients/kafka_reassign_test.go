package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
)

// kafkaWriter produces to partition 0 of a topic with franz-go's
// idempotent acks=all producer, one record at a time, until stopped or
// 20000 records, and keeps what was acknowledged at which offset.
type kafkaWriter struct {
	mu     sync.Mutex
	acked  map[int64]string
	failed []error
	stop   chan struct{}
	done   chan struct{}
}

func startKafkaWriter(t *testing.T, c *clustertest.Cluster, topic string) *kafkaWriter {
	cl := c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	w := &kafkaWriter{acked: map[int64]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := range 20000 {
			select {
			case <-w.stop:
				return
			default:
			}
			v := fmt.Sprintf("k%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)}).First()
			cancel()
			w.mu.Lock()
			if err != nil {
				w.failed = append(w.failed, fmt.Errorf("%s: %w", v, err))
			} else {
				w.acked[r.Offset] = v
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *kafkaWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *kafkaWriter) finish(t *testing.T) map[int64]string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.failed) > 0 {
		t.Errorf("%d writes failed, first: %v", len(w.failed), w.failed[0])
	}
	return w.acked
}

// kafkaListAll is ListPartitionReassignments with null topics: every move
// in flight.
func kafkaListAll(t *testing.T, cl *kgo.Client) *kmsg.ListPartitionReassignmentsResponse {
	t.Helper()
	resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(clustertest.CtxFor(t, 20*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A partition moves from brokers 1,2,3 to 2,3,4 through the Kafka API
// (kadm's AlterPartitionAssignments) while an idempotent acks=all Kafka
// producer writes to it: no write fails or is lost, the replicas and ISR
// end as the target, broker 1 (the leader) hands over and drops its copy,
// HW = LEO everywhere, and after a quiet gap longer than
// replica.lag.time.max.ms the leader and full ISR stay.
func TestKafkaReassignWhileProducing(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 4, Kafka: true, BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	clustertest.CreateAssigned(t, c, "kmove", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)

	w := startKafkaWriter(t, c, "kmove")
	c.WaitFor(20*time.Second, "writes before the move", func() bool { return w.count() >= 100 })
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("kmove", 0, []int32{2, 3, 4})
	res, err := adm.AlterPartitionAssignments(clustertest.CtxFor(t, 30*time.Second), req)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("reassign kmove-0: %v", err)
	}
	want := []int32{2, 3, 4}
	c.WaitFor(30*time.Second, "kmove-0 on 2,3,4", func() bool { return clustertest.SettledOn(c, "kmove", 0, want) })
	ongoing, err := adm.ListPartitionReassignments(clustertest.CtxFor(t, 20*time.Second), kadm.TopicsSet{"kmove": {0: {}}})
	if err != nil || len(ongoing.Sorted()) != 0 {
		t.Errorf("still listed after the move: %v %v", ongoing, err)
	}
	before := w.count()
	c.WaitFor(20*time.Second, "writes after the move", func() bool { return w.count() >= before+100 })
	acked := w.finish(t)

	if l := c.Partition("kmove", 0).GetLeader(); l == 1 {
		t.Errorf("kmove-0 is still led by broker 1")
	}
	clustertest.CheckWholeAndLive(t, c, "kmove", 0, want, acked)
	clustertest.Gone(t, c, 1, "kmove", 0)

	leader := c.Partition("kmove", 0).GetLeader()
	time.Sleep(2500 * time.Millisecond) // quiet: longer than the lag time
	md, err := adm.Metadata(clustertest.CtxFor(t, 10*time.Second), "kmove")
	if err != nil {
		t.Fatal(err)
	}
	pd := md.Topics["kmove"].Partitions[0]
	if !clustertest.SettledOn(c, "kmove", 0, want) || pd.Leader != leader || !slices.Equal(pd.Replicas, want) ||
		!slices.Equal(slices.Sorted(slices.Values(pd.ISR)), want) {
		t.Errorf("kmove-0 after a quiet gap: Kafka metadata %+v, controller %v", pd, c.Partition("kmove", 0))
	}
	clustertest.CheckWholeAndLive(t, c, "kmove", 0, want, acked)
}

// A move held in flight by a follower throttle is listed with Kafka's
// replica sets (replicas = target then origin, adding = target − origin,
// removing = origin − target), with null topics and by name; Kafka's
// per-partition refusals come back; a null target cancels it.
func TestKafkaReassignmentListErrorsAndCancel(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 4, Kafka: true, BrokerSettings: map[string]string{"replica.fetch.max.bytes": "1024"}})
	clustertest.CreateAssigned(t, c, "kx", [][]int32{{1, 2, 3}}, nil)
	clustertest.CreateAssigned(t, c, "ky", [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
	for i := range 400 {
		if _, err := c.Produce(context.Background(), "kx", 0, -1, fmt.Sprintf("value-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// 200 bytes/s into broker 4 for kx-0: the copy takes minutes.
	clustertest.Throttle(t, c, "kx", "4", "follower.replication.throttled.rate", "200", "follower.replication.throttled.replicas", "0:4")
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("kx", 0, []int32{2, 3, 4})
	if res, err := adm.AlterPartitionAssignments(clustertest.CtxFor(t, 30*time.Second), req); err != nil || res.Error() != nil {
		t.Fatalf("reassign kx-0: %v %v", err, res.Error())
	}

	all := kafkaListAll(t, cl)
	if all.ErrorCode != 0 || len(all.Topics) != 1 || all.Topics[0].Topic != "kx" || len(all.Topics[0].Partitions) != 1 {
		t.Fatalf("listing all: %+v", all)
	}
	p := all.Topics[0].Partitions[0]
	if !slices.Equal(p.Replicas, []int32{2, 3, 4, 1}) || !slices.Equal(p.AddingReplicas, []int32{4}) || !slices.Equal(p.RemovingReplicas, []int32{1}) {
		t.Errorf("kx-0 listed as replicas %v adding %v removing %v, want 2,3,4,1 / 4 / 1", p.Replicas, p.AddingReplicas, p.RemovingReplicas)
	}
	named, err := adm.ListPartitionReassignments(clustertest.CtxFor(t, 20*time.Second), kadm.TopicsSet{"kx": {0: {}}, "ky": {0: {}, 1: {}}, "ghost": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if s := named.Sorted(); len(s) != 1 || s[0].Topic != "kx" || !slices.Equal(s[0].AddingReplicas, []int32{4}) {
		t.Errorf("listing kx-0, ky-0, ky-1 and ghost-0 (unknown, left out as by Kafka): %+v", s)
	}

	// Refusals, one partition each (kadm's request is by partition).
	for _, c := range []struct {
		topic   string
		target  []int32
		want    error
		comment string
	}{
		{"ghost", []int32{1, 2}, fkerr.UnknownTopicOrPartition, "unknown topic"},
		{"ky", []int32{1, 1, 2}, fkerr.InvalidReplicaAssignment, "a broker twice"},
		{"ky", []int32{1, 2, 9}, fkerr.InvalidReplicaAssignment, "an unknown broker"},
		{"ky", []int32{}, fkerr.InvalidReplicaAssignment, "an empty list"},
		{"ky", nil, fkerr.NoReassignmentInProgress, "a cancel of no move"},
	} {
		var bad kadm.AlterPartitionAssignmentsReq
		bad.Assign(c.topic, 0, c.target)
		res, err := adm.AlterPartitionAssignments(clustertest.CtxFor(t, 20*time.Second), bad)
		if err != nil {
			t.Fatalf("%s: %v", c.comment, err)
		}
		if got := res[c.topic][0]; !errors.Is(got.Err, c.want) || got.ErrMessage == "" {
			t.Errorf("%s: %v (%q), want %v", c.comment, got.Err, got.ErrMessage, c.want)
		}
	}
	if !clustertest.SettledOn(c, "ky", 0, []int32{1, 2, 3}) {
		t.Errorf("refused requests changed ky-0: %v", c.Partition("ky", 0))
	}
	// A partition twice in one request: the second is INVALID_REQUEST.
	twice := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "ky"
	for range 2 {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Replicas = []int32{2, 3, 4}
		rt.Partitions = append(rt.Partitions, rp)
	}
	twice.Topics = append(twice.Topics, rt)
	tresp, err := twice.RequestWith(clustertest.CtxFor(t, 20*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if ps := tresp.Topics[0].Partitions; tresp.ErrorCode != 0 || len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != fkerr.InvalidRequest.Code {
		t.Errorf("ky-0 twice: %+v", tresp)
	}
	c.WaitFor(20*time.Second, "ky-0 on 2,3,4", func() bool { return clustertest.SettledOn(c, "ky", 0, []int32{2, 3, 4}) })

	var cancel kadm.AlterPartitionAssignmentsReq
	cancel.CancelAssign("kx", 0)
	if res, err := adm.AlterPartitionAssignments(clustertest.CtxFor(t, 30*time.Second), cancel); err != nil || res.Error() != nil {
		t.Fatalf("cancel kx-0: %v %v", err, res.Error())
	}
	c.WaitFor(10*time.Second, "kx-0 back on 2,3,1", func() bool { return clustertest.SettledOn(c, "kx", 0, []int32{2, 3, 1}) })
	if all := kafkaListAll(t, cl); all.ErrorCode != 0 || len(all.Topics) != 0 {
		t.Errorf("listed after the cancel: %+v", all)
	}
}

// Kafka's authorization: AlterPartitionReassignments needs Alter on the
// Cluster, ListPartitionReassignments Describe on it; without, the whole
// request is CLUSTER_AUTHORIZATION_FAILED and nothing moves.
func TestKafkaReassignmentAuthorization(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("allow User:bob Describe Cluster\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t, clustertest.Options{Secure: true, Kafka: true,
		Adjust:           func(cfg *broker.Config) { cfg.Authz.ACLFile = acl },
		AdjustController: func(cfg *controller.Config) { cfg.Authz.ACLFile = acl },
	})
	as := c.KafkaClientsAs("alice", "bob")
	c.KafkaCreate(kadm.NewClient(as("admin")), "guarded", 1, 3, nil)
	current := c.Partition("guarded", 0).GetReplicas()
	var target []int32
	for id := int32(1); id <= 3; id++ {
		target = append([]int32{id}, target...)
	}

	for _, user := range []string{"alice", "bob"} {
		adm := kadm.NewClient(as(user))
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign("guarded", 0, target)
		_, err := adm.AlterPartitionAssignments(clustertest.CtxFor(t, 20*time.Second), req)
		if !errors.Is(err, fkerr.ClusterAuthorizationFailed) {
			t.Errorf("%s altering: %v, want CLUSTER_AUTHORIZATION_FAILED", user, err)
		}
		_, err = adm.ListPartitionReassignments(clustertest.CtxFor(t, 20*time.Second), kadm.TopicsSet{"guarded": {0: {}}})
		if user == "alice" && !errors.Is(err, fkerr.ClusterAuthorizationFailed) {
			t.Errorf("alice listing: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
		}
		if user == "bob" && err != nil {
			t.Errorf("bob (Describe on Cluster) listing: %v", err)
		}
	}
	if got := c.Partition("guarded", 0).GetReplicas(); !slices.Equal(got, current) {
		t.Errorf("guarded-0's replicas %v after refused requests, were %v", got, current)
	}
}
