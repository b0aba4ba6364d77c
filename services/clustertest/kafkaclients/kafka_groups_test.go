package kafkaclients

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
)

// groupConsumer is a kgo group member of group reading topic from the
// start, committing only what the test commits.
func groupConsumer(c *clustertest.Cluster, group, topic string) *kgo.Client {
	c.T.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(30*time.Second),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		c.T.Fatal(err)
	}
	return cl
}

// pollUntil polls cl until it holds n records in all, at most max a poll.
func pollUntil(t *testing.T, cl *kgo.Client, have []*kgo.Record, n int) []*kgo.Record {
	t.Helper()
	ctx := clustertest.CtxFor(t, 60*time.Second)
	for len(have) < n {
		fs := cl.PollRecords(ctx, n-len(have))
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d of %d records before the deadline", len(have), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		have = append(have, fs.Records()...)
	}
	return have
}

// Kafka's own group consumer over the Kafka listener: a kgo member reads
// half a topic and commits it, leaves; a second member of the group
// resumes exactly at the committed offsets, nothing skipped or read twice.
// kadm lists, describes and deletes the group, and tidemark's gRPC
// GroupService sees the same group and member: one coordinator, two doors.
func TestKafkaGroupConsumerResumesAtCommit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3)})
	cl := c.KafkaClient(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "kg", 3, 3, nil)
	const n = 60
	want := map[string]bool{}
	for i := range n {
		v := fmt.Sprintf("r%03d", i)
		want[v] = true
		clustertest.ProduceSync(t, cl, "kg", v)
	}

	first := groupConsumer(c, "readers", "kg")
	got := pollUntil(t, first, nil, n/2)
	if err := first.CommitRecords(clustertest.CtxFor(t, 30*time.Second), got...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	next := map[int32]int64{} // per partition: the offset after the last one read
	for _, r := range got {
		if r.Offset+1 > next[r.Partition] {
			next[r.Partition] = r.Offset + 1
		}
	}
	committed, err := adm.FetchOffsets(clustertest.CtxFor(t, 30*time.Second), "readers")
	if err != nil || committed.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, committed.Error())
	}
	for p, at := range next {
		o, ok := committed.Lookup("kg", p)
		if !ok || o.At != at {
			t.Fatalf("kg-%d committed %+v, want %d", p, o, at)
		}
	}
	first.Close() // leaves the group

	second := groupConsumer(c, "readers", "kg")
	defer second.Close()
	rest := pollUntil(t, second, nil, n-len(got))
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	resumed := map[int32]bool{}
	for _, r := range rest {
		if seen[string(r.Value)] {
			t.Fatalf("%s (kg-%d@%d) read again after its commit", r.Value, r.Partition, r.Offset)
		}
		seen[string(r.Value)] = true
		if !resumed[r.Partition] {
			resumed[r.Partition] = true
			if r.Offset != next[r.Partition] {
				t.Fatalf("the second member began kg-%d at %d, committed %d", r.Partition, r.Offset, next[r.Partition])
			}
		}
	}
	for v := range want {
		if !seen[v] {
			t.Fatalf("%s was skipped", v)
		}
	}

	// The live group, through both doors.
	ctx := clustertest.CtxFor(t, 30*time.Second)
	var described kadm.DescribedGroup
	c.WaitFor(20*time.Second, "the group stable with one member", func() bool {
		ds, err := adm.DescribeGroups(ctx, "readers")
		if err != nil {
			return false
		}
		described = ds["readers"]
		return described.Err == nil && described.State == "Stable" && len(described.Members) == 1
	})
	if described.ProtocolType != "consumer" {
		t.Fatalf("protocol type %q", described.ProtocolType)
	}
	g := clustertest.Groups{C: c}
	viaGRPC, err := clustertest.Call(g, "readers", func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.DescribeGroupsResponse, error) {
		return api.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{"readers"}})
	})
	if err != nil || len(viaGRPC.GetGroups()) != 1 || len(viaGRPC.GetGroups()[0].GetMembers()) != 1 {
		t.Fatalf("gRPC DescribeGroups: %v %v", viaGRPC, err)
	}
	if m := viaGRPC.GetGroups()[0].GetMembers()[0].GetMemberId(); m != described.Members[0].MemberID {
		t.Fatalf("gRPC sees member %q, Kafka %q", m, described.Members[0].MemberID)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := listed["readers"]; !ok || lg.ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %+v", listed)
	}
	del, err := adm.DeleteGroups(ctx, "readers")
	if err != nil || del["readers"].Err != fkerr.NonEmptyGroup {
		t.Fatalf("deleting a group with a member: %v %+v", err, del)
	}
	kg0 := kadm.TopicsSet{"kg": {0: {}}}
	if od, err := adm.DeleteOffsets(ctx, "readers", kg0); err != nil || od["kg"][0] != fkerr.GroupSubscribedToTopic {
		t.Fatalf("OffsetDelete of a topic the member reads: %v %+v", err, od)
	}

	second.Close()
	c.WaitFor(20*time.Second, "the group empty", func() bool {
		ds, err := adm.DescribeGroups(ctx, "readers")
		return err == nil && ds["readers"].State == "Empty"
	})
	before, err := adm.FetchOffsets(ctx, "readers")
	if err != nil {
		t.Fatal(err)
	}
	gone := int32(-1) // a partition with an offset, to delete
	before.Each(func(o kadm.OffsetResponse) { gone = max(gone, o.Partition) })
	if gone < 0 || len(before["kg"]) < 2 {
		t.Fatalf("committed offsets %+v: want two partitions or more", before)
	}
	if od, err := adm.DeleteOffsets(ctx, "readers", kadm.TopicsSet{"kg": {gone: {}}}); err != nil || od.Error() != nil {
		t.Fatalf("OffsetDelete once the group is empty: %v %+v", err, od)
	}
	after, err := adm.FetchOffsets(ctx, "readers")
	if err != nil {
		t.Fatal(err)
	}
	before.Each(func(o kadm.OffsetResponse) {
		_, ok := after.Lookup(o.Topic, o.Partition)
		if deleted := o.Partition == gone; ok == deleted {
			t.Fatalf("after OffsetDelete of kg-%d: %s-%d has an offset: %v", gone, o.Topic, o.Partition, ok)
		}
	})
	del, err = adm.DeleteGroups(ctx, "readers")
	if err != nil || del["readers"].Err != nil {
		t.Fatalf("deleting the empty group: %v %+v", err, del)
	}
	fetched, err := clustertest.Call(g, "readers", func(ctx context.Context, api groupv1.GroupServiceClient) (*groupv1.OffsetFetchResponse, error) {
		return api.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: "readers"})
	})
	if err != nil || len(fetched.GetTopics()) != 0 {
		t.Fatalf("offsets after the delete, through gRPC: %v %v", fetched, err)
	}

	// Transactions have no coordinator in tidemark: a clear refusal.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType = 1
	fc.CoordinatorKeys = []string{"txn"}
	fcr, err := fc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(fcr.Coordinators) != 1 || fcr.Coordinators[0].ErrorCode != fkerr.InvalidRequest.Code {
		t.Fatalf("transaction coordinator lookup: %+v", fcr.Coordinators)
	}
}

// One group, two doors: a tidemark GroupConsumer over gRPC and a kgo
// member over the Kafka listener share a group, each assigned half the
// partitions in Kafka's consumer encoding, and the kgo member reads its
// half.
func TestKafkaAndGRPCMembersShareAGroup(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3)})
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "mix", 4, 3, nil)

	grpcMember := c.StartMember(clustertest.GroupOpts("shared", "mix"))
	kafkaMember, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(30*time.Second), kgo.ClientID("kgo-member"),
		kgo.ConsumerGroup("shared"), kgo.ConsumeTopics("mix"), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer kafkaMember.Close()
	var mu sync.Mutex
	kgoRead := map[int32]bool{}
	go func() { // kgo rebalances while it is polled
		for {
			fs := kafkaMember.PollRecords(context.Background(), 10)
			if fs.IsClientClosed() {
				return
			}
			mu.Lock()
			for _, r := range fs.Records() {
				kgoRead[r.Partition] = true
			}
			mu.Unlock()
		}
	}()

	ctx := clustertest.CtxFor(t, 60*time.Second)
	owner := map[int32]string{}
	c.WaitFor(40*time.Second, "both members assigned two partitions each", func() bool {
		ds, err := adm.DescribeGroups(ctx, "shared")
		d := ds["shared"]
		if err != nil || d.Err != nil || d.State != "Stable" || len(d.Members) != 2 {
			return false
		}
		owner = map[int32]string{}
		for _, m := range d.Members {
			a, ok := m.Assigned.AsConsumer()
			if !ok {
				return false
			}
			n := 0
			for _, tp := range a.Topics {
				for _, p := range tp.Partitions {
					owner[p] = m.ClientID
					n++
				}
			}
			if n != 2 {
				return false
			}
		}
		return len(owner) == 4
	})
	kgoOwns := 0
	for _, who := range owner {
		if who == "kgo-member" {
			kgoOwns++
		}
	}
	if kgoOwns != 2 {
		t.Fatalf("owners %v: the kgo member should hold two partitions", owner)
	}

	// A record to every partition: each member reads exactly its own.
	prod := c.KafkaClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(4) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "mix", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor(30*time.Second, "every record read by its partition's owner", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for p, who := range owner {
			read := kgoRead[p]
			if who != "kgo-member" {
				read = len(grpcMember.Offsets(client.TopicPartition{Topic: "mix", Partition: p})) > 0
			}
			if !read {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for p := range kgoRead {
		if owner[p] != "kgo-member" {
			t.Fatalf("the kgo member read mix-%d, assigned to %s", p, owner[p])
		}
	}
	if err := grpcMember.Failure(); err != nil {
		t.Fatalf("the gRPC member failed: %v", err)
	}
}
