package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/clustertest"
)

// kadm's offsets and configs against the Kafka listener: ListOffsets
// earliest, latest and by timestamp; DescribeConfigs; an
// IncrementalAlterConfigs SET seen by the next describe, a bad value
// refused with INVALID_CONFIG, a recompressing compression.type refused.
func TestKafkaAdminOffsetsAndConfigs(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "cfg", 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	before := time.Now().UnixMilli()
	clustertest.ProduceSync(t, cl, "cfg", "a", "b", "c")

	ctx := clustertest.CtxFor(t, 20*time.Second)
	start, err := adm.ListStartOffsets(ctx, "cfg")
	if err != nil || start.Error() != nil {
		t.Fatalf("start offsets: %v %v", err, start.Error())
	}
	end, err := adm.ListEndOffsets(ctx, "cfg")
	if err != nil || end.Error() != nil {
		t.Fatalf("end offsets: %v %v", err, end.Error())
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, before, "cfg")
	if err != nil || after.Error() != nil {
		t.Fatalf("offsets after %d: %v %v", before, err, after.Error())
	}
	s, _ := start.Lookup("cfg", 0)
	e, _ := end.Lookup("cfg", 0)
	a, _ := after.Lookup("cfg", 0)
	if s.Offset != 0 || e.Offset != 3 || a.Offset != 0 {
		t.Fatalf("earliest %d, latest %d, after the first timestamp %d; want 0, 3, 0", s.Offset, e.Offset, a.Offset)
	}

	describe := func() map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("cfg", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe cfg: %v %v", err, rc.Err)
		}
		out := map[string]kadm.Config{}
		for _, cfg := range rc.Configs {
			out[cfg.Key] = cfg
		}
		return out
	}
	cfgs := describe()
	if v := cfgs["min.insync.replicas"]; v.MaybeValue() != "2" || v.Source != 1 {
		t.Fatalf("min.insync.replicas = %q from source %v, want 2 from the topic", v.MaybeValue(), v.Source)
	}
	if v := cfgs["compression.type"]; v.MaybeValue() != "producer" {
		t.Fatalf("compression.type = %q, want producer", v.MaybeValue())
	}

	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")}}, "cfg")
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter retention.ms: %v %v", err, res[0].Err)
	}
	if v := describe()["retention.ms"]; v.MaybeValue() != "3600000" {
		t.Fatalf("retention.ms = %q after the alter", v.MaybeValue())
	}
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("zero")}}, "cfg")
	if err != nil || !errors.Is(res[0].Err, fkerr.InvalidConfig) {
		t.Fatalf("bad min.insync.replicas: %v %v, want INVALID_CONFIG", err, res[0].Err)
	}
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: kadm.StringPtr("zstd")}}, "cfg")
	if err != nil || !errors.Is(res[0].Err, fkerr.InvalidConfig) {
		t.Fatalf("compression.type=zstd: %v %v, want INVALID_CONFIG", err, res[0].Err)
	}
}

// underReplicated is kafka-topics --describe --under-replicated-partitions
// over kadm's metadata: partitions whose ISR is smaller than their replicas.
func underReplicated(t *testing.T, adm *kadm.Client, topic string) map[int32]kadm.PartitionDetail {
	t.Helper()
	md, err := adm.Metadata(clustertest.CtxFor(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]kadm.PartitionDetail{}
	for p, pd := range md.Topics[topic].Partitions {
		if len(pd.ISR) < len(pd.Replicas) {
			out[p] = pd
		}
	}
	return out
}

// The note's "watch the ISR" flow through Kafka's admin client: a stopped
// broker's partitions show as under-replicated, with it offline; when it
// returns and catches up, a preferred election gives every partition back
// to its first replica.
func TestKafkaAdminUnderReplicatedAndPreferredElection(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "urp", 3, 3, nil)
	clustertest.ProduceSync(t, cl, "urp", "x", "y", "z")
	if u := underReplicated(t, adm, "urp"); len(u) != 0 {
		t.Fatalf("under-replicated before any fault: %v", u)
	}

	if err := c.StopBroker(3); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(20*time.Second, "every partition under-replicated with broker 3 offline", func() bool {
		u := underReplicated(t, adm, "urp")
		if len(u) != 3 {
			return false
		}
		for _, pd := range u {
			if !slices.Equal(pd.OfflineReplicas, []int32{3}) || slices.Contains(pd.ISR, 3) || pd.Leader == 3 {
				return false
			}
		}
		return true
	})

	c.StartBroker(3)
	c.WaitFor(30*time.Second, "the full ISR back", func() bool { return len(underReplicated(t, adm, "urp")) == 0 })
	res, err := adm.ElectLeaders(clustertest.CtxFor(t, 20*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{"urp": {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range res {
		for p, r := range ps {
			if r.Err != nil && !errors.Is(r.Err, fkerr.ElectionNotNeeded) {
				t.Fatalf("elect urp-%d: %v", p, r.Err)
			}
		}
	}
	c.WaitFor(20*time.Second, "every partition led by its preferred replica", func() bool {
		md, err := adm.Metadata(clustertest.CtxFor(t, 10*time.Second), "urp")
		if err != nil {
			return false
		}
		for _, pd := range md.Topics["urp"].Partitions {
			if pd.Leader != pd.Replicas[0] {
				return false
			}
		}
		return true
	})
}

// The note's "kill the leader while producing" flow with franz-go's
// idempotent producer: the leader crashes mid-stream, kgo retries
// NOT_LEADER_OR_FOLLOWER and the errors of the dead connection against the
// new leader, and the log holds every record exactly once, in order.
func TestKafkaLeaderKilledWhileProducingIdempotently(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	adm := kadm.NewClient(c.KafkaClient())
	c.KafkaCreate(adm, "kill", 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	prod := c.KafkaClient(kgo.DefaultProduceTopic("kill"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))

	const n = 2000
	// The first record gets the producer its id; the leader crashes once a
	// quarter of the rest are acknowledged, with more in flight.
	clustertest.ProduceSync(t, prod, "kill", "v00000")
	var (
		mu     sync.Mutex
		failed []error
	)
	var acked atomic.Int64
	ctx := clustertest.CtxFor(t, 60*time.Second)
	var wg sync.WaitGroup
	crashedAt := make(chan int64, 1)
	go func() { // crash the leader mid-stream, records still in flight
		for acked.Load() < n/4 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		leader := c.Partition("kill", 0).GetLeader()
		crashedAt <- acked.Load()
		c.CrashBroker(leader)
	}()
	for i := 1; i < n; i++ {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%05d", i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			acked.Add(1)
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
		if i%10 == 0 {
			time.Sleep(time.Millisecond) // a steady stream, not one burst
		}
	}
	wg.Wait()
	if at := <-crashedAt; at >= n-1 {
		t.Fatalf("the leader crashed only after every record was acknowledged")
	} else {
		t.Logf("leader crashed with %d of %d records acknowledged", at, n)
	}
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
	}
	cons := c.KafkaClient(kgo.ConsumeTopics("kill"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consumeAll(t, cons, n)[0]
	for i, v := range got {
		if want := fmt.Sprintf("v%05d", i); v != want {
			t.Fatalf("record %d is %s, want %s (lost, duplicated or reordered)", i, v, want)
		}
	}
}

// The note's min.insync.replicas flow: with two of three brokers stopped,
// an acks=all write is refused with NOT_ENOUGH_REPLICAS, and nothing is
// written.
func TestKafkaMinInsyncRefusal(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "minisr", 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	clustertest.ProduceSync(t, cl, "minisr", "before")
	leader := c.Leader("minisr", 0)
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			if err := c.StopBroker(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.WaitFor(20*time.Second, "the ISR shrunk to the leader", func() bool {
		isr, ok := c.ReplicaISR(leader, "minisr", 0)
		return ok && len(isr) == 1
	})
	prod := c.KafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(2))
	err := prod.ProduceSync(clustertest.CtxFor(t, 30*time.Second), &kgo.Record{Topic: "minisr", Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, fkerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with one in-sync replica: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if vals := c.Values(leader, "minisr", 0); !slices.Equal(vals, []string{"before"}) {
		t.Fatalf("leader's log %q, want only the record written before", vals)
	}
}

// The rest of the advertised APIs through real clients: acks=0 (no answer
// on the wire, the records still written), OffsetForLeaderEpoch,
// DescribeCluster and DeleteTopics.
func TestKafkaAcksZeroEpochsClusterAndDelete(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "misc", 1, 3, nil)

	fire := c.KafkaClient(kgo.DefaultProduceTopic("misc"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	for _, v := range []string{"f0", "f1", "f2"} {
		if err := fire.ProduceSync(clustertest.CtxFor(t, 20*time.Second), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("acks=0 produce: %v", err)
		}
	}
	cons := c.KafkaClient(kgo.ConsumeTopics("misc"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if got := consumeAll(t, cons, 3)[0]; !slices.Equal(got, []string{"f0", "f1", "f2"}) {
		t.Fatalf("acks=0 records read back as %q", got)
	}

	leader := c.Partition("misc", 0).GetLeader()
	epoch := c.Partition("misc", 0).GetLeaderEpoch()
	olReq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	olReq.ReplicaID = -1
	olp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	olp.Partition, olp.CurrentLeaderEpoch, olp.LeaderEpoch = 0, epoch, epoch
	olt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	olt.Topic, olt.Partitions = "misc", []kmsg.OffsetForLeaderEpochRequestTopicPartition{olp}
	olReq.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{olt}
	olResp, err := olReq.RequestWith(clustertest.CtxFor(t, 10*time.Second), cl.Broker(int(leader)))
	if err != nil {
		t.Fatal(err)
	}
	if r := olResp.Topics[0].Partitions[0]; r.ErrorCode != 0 || r.LeaderEpoch != epoch || r.EndOffset != 3 {
		t.Fatalf("OffsetForLeaderEpoch(%d): error %d, epoch %d, end %d; want epoch %d ending at 3", epoch, r.ErrorCode, r.LeaderEpoch, r.EndOffset, epoch)
	}

	dcResp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(clustertest.CtxFor(t, 10*time.Second), cl)
	if err != nil || dcResp.ErrorCode != 0 || len(dcResp.Brokers) != 3 || dcResp.ClusterID == "" {
		t.Fatalf("DescribeCluster: %v, error %d, %d brokers, cluster id %q", err, dcResp.ErrorCode, len(dcResp.Brokers), dcResp.ClusterID)
	}
	for _, b := range dcResp.Brokers {
		if addr := fmt.Sprintf("%s:%d", b.Host, b.Port); !slices.Contains(c.KafkaAddrs(), addr) {
			t.Fatalf("broker %d at %s, not a Kafka listener", b.NodeID, addr)
		}
	}

	del, err := adm.DeleteTopics(clustertest.CtxFor(t, 20*time.Second), "misc")
	if err != nil || del["misc"].Err != nil {
		t.Fatalf("delete misc: %v %v", err, del["misc"].Err)
	}
	c.WaitFor(20*time.Second, "misc gone from Kafka's metadata", func() bool {
		md, err := adm.Metadata(clustertest.CtxFor(t, 10*time.Second), "misc")
		return err == nil && errors.Is(md.Topics["misc"].Err, fkerr.UnknownTopicOrPartition)
	})
}

// An unclean election asked through Kafka's admin client (KIP-460): with
// every in-sync replica dead and unclean.leader.election.enable off, the
// partition stays offline until ElectLeaders(unclean) hands it to a live
// out-of-sync replica.
func TestKafkaUncleanElectLeaders(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "uncl", 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("1")})
	clustertest.ProduceSync(t, cl, "uncl", "u0")
	leader := c.Leader("uncl", 0)
	var others []int32
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			others = append(others, id)
			if err := c.StopBroker(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.WaitFor(20*time.Second, "the ISR down to the leader", func() bool {
		return slices.Equal(c.Partition("uncl", 0).GetIsr(), []int32{leader})
	})
	c.CrashBroker(leader)
	for _, id := range others {
		c.StartBroker(id)
	}
	c.WaitFor(20*time.Second, "the partition offline with its out-of-sync replicas back", func() bool {
		md, err := adm.Metadata(clustertest.CtxFor(t, 10*time.Second), "uncl")
		if err != nil {
			return false
		}
		pd := md.Topics["uncl"].Partitions[0]
		return pd.Leader == -1 && len(md.Brokers) == 2
	})
	res, err := adm.ElectLeaders(clustertest.CtxFor(t, 20*time.Second), kadm.ElectLiveReplica, kadm.TopicsSet{"uncl": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["uncl"][0]; r.Err != nil {
		t.Fatalf("unclean election: %v", r.Err)
	}
	c.WaitFor(20*time.Second, "an out-of-sync replica leading", func() bool {
		l := c.Partition("uncl", 0).GetLeader()
		return slices.Contains(others, l) && c.Leads(l, "uncl", 0)
	})
	clustertest.ProduceSync(t, c.KafkaClient(), "uncl", "after")

	// A client still at leader epoch 0 (0 is a real epoch to Kafka, not
	// "unset") is fenced by the new leader.
	pd := c.Partition("uncl", 0)
	if pd.GetLeaderEpoch() < 1 {
		t.Fatalf("leader epoch %d after two elections", pd.GetLeaderEpoch())
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.CurrentLeaderEpoch, lp.Timestamp = 0, 0, -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic, lt.Partitions = "uncl", []kmsg.ListOffsetsRequestTopicPartition{lp}
	lo.Topics = []kmsg.ListOffsetsRequestTopic{lt}
	resp, err := lo.RequestWith(clustertest.CtxFor(t, 10*time.Second), c.KafkaClient().Broker(int(pd.GetLeader())))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != fkerr.FencedLeaderEpoch.Code {
		t.Fatalf("ListOffsets at epoch 0 against epoch %d: error %d, want FENCED_LEADER_EPOCH", pd.GetLeaderEpoch(), code)
	}
}

// Partitions added through Kafka's admin client (kafka-topics.sh --alter
// --partitions): the count grows, the new partitions get leaders and take
// writes, a smaller count is refused with INVALID_PARTITIONS and an
// explicit assignment is used as given.
func TestKafkaCreatePartitions(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	cl := c.KafkaClient()
	adm := kadm.NewClient(cl)
	c.KafkaCreate(adm, "grow", 2, 3, nil)

	res, err := adm.UpdatePartitions(clustertest.CtxFor(t, 20*time.Second), 4, "grow")
	if err != nil || res["grow"].Err != nil {
		t.Fatalf("grow to 4: %v %v", err, res["grow"].Err)
	}
	c.WaitFor(20*time.Second, "4 partitions with leaders in Kafka's metadata", func() bool {
		md, err := adm.Metadata(clustertest.CtxFor(t, 10*time.Second), "grow")
		if err != nil || len(md.Topics["grow"].Partitions) != 4 {
			return false
		}
		for _, p := range md.Topics["grow"].Partitions {
			if p.Leader < 0 {
				return false
			}
		}
		return true
	})
	for p := int32(2); p < 4; p++ {
		if err := cl.ProduceSync(clustertest.CtxFor(t, 20*time.Second), &kgo.Record{Topic: "grow", Partition: p, Value: []byte("new")}).FirstErr(); err != nil {
			t.Fatalf("produce to new partition %d: %v", p, err)
		}
	}

	res, err = adm.UpdatePartitions(clustertest.CtxFor(t, 20*time.Second), 3, "grow")
	if err != nil || !errors.Is(res["grow"].Err, fkerr.InvalidPartitions) {
		t.Fatalf("shrink to 3: %v %v, want INVALID_PARTITIONS", err, res["grow"].Err)
	}

	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "grow", 5
	a := kmsg.NewCreatePartitionsRequestTopicAssignment()
	a.Replicas = []int32{3, 1, 2}
	rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{a}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	resp, err := req.RequestWith(clustertest.CtxFor(t, 20*time.Second), cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions with an assignment: %v %+v", err, resp)
	}
	c.WaitFor(20*time.Second, "grow-4 on 3,1,2 led by 3", func() bool {
		pd := c.Partition("grow", 4)
		return slices.Equal(pd.GetReplicas(), []int32{3, 1, 2}) && pd.GetLeader() == 3
	})
}

// A broker answers Kafka clients only once it knows the cluster: started
// while no controller runs, its Kafka listener takes connections but
// answers nothing (a Metadata answer would list no brokers and no leaders,
// and clients would believe it), and it answers fully as soon as a
// controller has told it the metadata.
func TestKafkaListenerWaitsForTheFirstMetadata(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Controllers: 1, Kafka: true})
	c.KafkaCreate(kadm.NewClient(c.KafkaClient()), "known", 1, 3, nil)
	c.StopController(1)
	c.CrashBroker(1)
	c.StartBroker(1)
	one := c.BrokerConfig(1).KafkaListen

	quick, err := kgo.NewClient(kgo.SeedBrokers(one), kgo.RequestTimeoutOverhead(time.Second), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer quick.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, quick)
	cancel()
	if err == nil {
		t.Fatalf("a broker without metadata answered Metadata: %d brokers, %d topics", len(md.Brokers), len(md.Topics))
	}

	c.StartController(1)
	cl := c.KafkaClient(kgo.SeedBrokers(one))
	c.WaitFor(20*time.Second, "broker 1's Metadata listing 3 brokers and the topic", func() bool {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(clustertest.CtxFor(t, 5*time.Second), cl)
		return err == nil && len(md.Brokers) == 3 && len(md.Topics) >= 1
	})
}
