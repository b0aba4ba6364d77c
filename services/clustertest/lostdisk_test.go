package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/platform/kerr"
)

// lostDiskCluster is 2 brokers, broker 1 with two log dirs (a and b),
// and a topic of 4 partitions on [1, 2] whose acknowledged writes only
// broker 1 holds: broker 2 crashed first, min.insync.replicas is 1.
// It returns the cluster, the partitions on dir b and each partition's
// acknowledged values; broker 1 is stopped.
func lostDiskCluster(t *testing.T) (c *Cluster, dirA, dirB string, onB []int32, acked map[int32][]string) {
	c = Start(t, Options{Brokers: 2, Adjust: func(cfg *broker.Config) {
		if cfg.ID == 1 {
			cfg.LogDirs = []string{filepath.Join(cfg.DataDir, "disk-a"), filepath.Join(cfg.DataDir, "disk-b")}
		}
	}})
	dirA, dirB = c.BrokerConfig(1).LogDirs[0], c.BrokerConfig(1).LogDirs[1]
	var asg []*adminv1.ReplicaAssignment
	for p := int32(0); p < 4; p++ {
		asg = append(asg, &adminv1.ReplicaAssignment{Partition: p, Replicas: []int32{1, 2}})
	}
	created, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{TimeoutMs: 10000, Topics: []*adminv1.TopicSpec{{
		Name: "lost", Assignments: asg, Configs: map[string]string{"min.insync.replicas": "1"}}}})
	if err != nil || created.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v %v", created, err)
	}
	for p := int32(0); p < 4; p++ {
		c.WaitFor(10*time.Second, fmt.Sprintf("lost-%d led by 1 with a full ISR", p), func() bool {
			pd := c.Partition("lost", p)
			return pd.GetLeader() == 1 && len(pd.GetIsr()) == 2
		})
	}
	ents, err := os.ReadDir(dirB)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if name, ok := strings.CutPrefix(e.Name(), "lost-"); ok && e.IsDir() {
			var p int32
			fmt.Sscan(name, &p)
			onB = append(onB, p)
		}
	}
	if len(onB) == 0 || len(onB) == 4 {
		t.Fatalf("broker 1 put %v of the 4 partitions on dir b; the test needs some on each dir", onB)
	}
	c.CrashBroker(2)
	for p := int32(0); p < 4; p++ {
		c.WaitFor(20*time.Second, fmt.Sprintf("lost-%d's ISR shrunk to [1]", p), func() bool {
			return slices.Equal(c.Partition("lost", p).GetIsr(), []int32{1})
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acked = map[int32][]string{}
	for p := int32(0); p < 4; p++ {
		for i := 0; i < 20; i++ {
			v := fmt.Sprintf("p%d-%d", p, i)
			if _, err := c.Produce(ctx, "lost", p, -1, v); err != nil {
				t.Fatalf("acks=all write to lost-%d with ISR [1]: %v", p, err)
			}
			acked[p] = append(acked[p], v)
		}
	}
	if err := c.StopBroker(1); err != nil {
		t.Logf("stopping broker 1: %v", err)
	}
	t.Logf("on dir b: partitions %v", onB)
	return c, dirA, dirB, onB, acked
}

// notLedEmpty waits until every partition in ps has no leader and lists
// broker 1 offline, then checks it stays so through a quiet gap: broker 1,
// their last ISR member, never leads them with an empty log.
func notLedEmpty(t *testing.T, c *Cluster, ps []int32) {
	t.Helper()
	notLedEmptyIn(t, c, "lost", ps)
}

// notLedEmptyIn is notLedEmpty for the partitions ps of topic.
func notLedEmptyIn(t *testing.T, c *Cluster, topic string, ps []int32) {
	t.Helper()
	for _, p := range ps {
		c.WaitFor(20*time.Second, fmt.Sprintf("%s-%d offline, broker 1's replica listed offline", topic, p), func() bool {
			pd := c.Partition(topic, p)
			return pd.GetLeader() == -1 && slices.Contains(pd.GetOfflineReplicas(), 1)
		})
	}
	time.Sleep(3 * time.Second) // a quiet gap: nothing may drift back
	for _, p := range ps {
		if pd := c.Partition(topic, p); pd.GetLeader() != -1 {
			t.Fatalf("%s-%d after a quiet gap: %v; broker 1 lost its log, so nothing may lead it", topic, p, pd)
		}
		_, err := c.BrokerClient(1).Fetch(context.Background(), &brokerv1.FetchRequest{Topic: topic, Partition: p})
		if code := kerr.FromStatus(err).Code; code != kerr.KafkaStorageError {
			t.Fatalf("fetch of %s-%d from broker 1: %v; want KAFKA_STORAGE_ERROR", topic, p, err)
		}
	}
}

// A log dir of the last ISR member is missing at restart (an unmounted
// disk): it stays offline instead of being created empty, its partitions
// stay without a leader instead of being led by an empty log, and once the
// disk is back every acknowledged write is served again.
func TestAnUnmountedLogDirLosesNoAcknowledgedWrite(t *testing.T) {
	c, dirA, dirB, onB, acked := lostDiskCluster(t)
	unmounted := dirB + ".unmounted"
	if err := os.Rename(dirB, unmounted); err != nil {
		t.Fatal(err)
	}
	c.StartBroker(1)
	c.WaitFor(20*time.Second, "broker 1's dir b reported offline as missing", func() bool {
		resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		for _, b := range resp.GetBrokers() {
			for _, d := range b.GetOfflineLogDirs() {
				if b.GetNode().GetId() == 1 && d.GetPath() == dirB && strings.Contains(d.GetError(), "missing or empty") {
					return true
				}
			}
		}
		return false
	})
	if _, err := os.Stat(dirB); err == nil {
		t.Fatalf("%s was created again: an unmounted disk's mount point must be left alone", dirB)
	}
	notLedEmpty(t, c, onB)
	for p := int32(0); p < 4; p++ {
		if slices.Contains(onB, p) {
			continue
		}
		c.WaitFor(20*time.Second, fmt.Sprintf("lost-%d (on dir a) led by 1", p), func() bool { return c.Partition("lost", p).GetLeader() == 1 })
		if got := c.Values(1, "lost", p); !slices.Equal(got, acked[p]) {
			t.Fatalf("lost-%d on dir a: %v, want %v", p, got, acked[p])
		}
	}
	if _, err := os.Stat(filepath.Join(dirA, "meta.properties")); err != nil {
		t.Fatalf("dir a: %v", err)
	}

	// The disk is mounted back: every acknowledged write is there, and
	// with broker 2 back every partition is whole and quiet.
	if err := c.StopBroker(1); err != nil {
		t.Logf("stopping broker 1: %v", err)
	}
	if err := os.Rename(unmounted, dirB); err != nil {
		t.Fatal(err)
	}
	c.StartBroker(1)
	c.StartBroker(2)
	for p := int32(0); p < 4; p++ {
		c.WaitFor(30*time.Second, fmt.Sprintf("lost-%d whole again", p), func() bool {
			pd := c.Partition("lost", p)
			return len(pd.GetIsr()) == 2 && len(pd.GetOfflineReplicas()) == 0 && pd.GetLeader() >= 1
		})
		got := c.SameLogs("lost", p, 1, 2)
		if !slices.Equal(got, acked[p]) {
			t.Fatalf("lost-%d after the disk came back: %v, want every acknowledged write %v", p, got, acked[p])
		}
		c.WaitHWAtLEO("lost", p, 1, 2)
	}
}

// The disk is replaced (an empty one) and the operator says so: broker 1
// uses it, but does not lead, or stay in the ISR of, a partition whose log
// may have been on it. Those partitions stay offline until the operator
// chooses an unclean election; broker 1 then follows them from empty,
// rejoins their ISR, and forgets the replaced disk.
func TestAReplacedLogDirIsUsedWithoutLeadingFromAnEmptyLog(t *testing.T) {
	c, _, dirB, onB, acked := lostDiskCluster(t)
	if err := os.RemoveAll(dirB); err != nil {
		t.Fatal(err)
	}
	cfg := c.brokerCfg[1]
	cfg.LogDirsReplaced = []string{dirB}
	c.brokerCfg[1] = cfg
	c.StartBroker(1)
	notLedEmpty(t, c, onB)
	for p := int32(0); p < 4; p++ {
		if !slices.Contains(onB, p) {
			c.WaitFor(20*time.Second, fmt.Sprintf("lost-%d (on dir a) led by 1", p), func() bool { return c.Partition("lost", p).GetLeader() == 1 })
		}
	}
	if m := dataMeta(t, cfg.DataDir); !strings.Contains(m, "log.dirs.replaced="+dirB) {
		t.Fatalf("data dir meta.properties:\n%s\nwant %s recorded as replaced until settled", m, dirB)
	}

	// Broker 2 is back, but was out of the ISR: only an unclean election
	// can bring the lost partitions back, losing what broker 2 missed.
	c.StartBroker(2)
	c.WaitBrokerAlive(2)
	time.Sleep(2 * time.Second)
	for _, p := range onB {
		if l := c.Partition("lost", p).GetLeader(); l != -1 {
			t.Fatalf("lost-%d led by %d without an unclean election", p, l)
		}
	}
	el := &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_UNCLEAN}
	for _, p := range onB {
		el.Partitions = append(el.Partitions, &commonv1.TopicPartition{Topic: "lost", Partition: p})
	}
	if _, err := c.Admin().ElectLeaders(context.Background(), el); err != nil {
		t.Fatalf("unclean election: %v", err)
	}
	for p := int32(0); p < 4; p++ {
		c.WaitFor(30*time.Second, fmt.Sprintf("lost-%d whole again", p), func() bool {
			pd := c.Partition("lost", p)
			return len(pd.GetIsr()) == 2 && len(pd.GetOfflineReplicas()) == 0 && pd.GetLeader() >= 1
		})
		got := c.SameLogs("lost", p, 1, 2)
		if !slices.Contains(onB, p) && !slices.Equal(got, acked[p]) {
			t.Fatalf("lost-%d on the intact dir: %v, want %v", p, got, acked[p])
		}
		c.WaitHWAtLEO("lost", p, 1, 2)
	}
	c.WaitFor(20*time.Second, "the replaced dir forgotten once every role has its log", func() bool {
		m := dataMeta(t, cfg.DataDir)
		return !strings.Contains(m, "log.dirs.replaced") && strings.Contains(m, dirB)
	})
}

// dataMeta reads the data dir's meta.properties.
func dataMeta(t *testing.T, dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A topic created while broker 1 still records a replaced disk (a lost
// partition stays refused) is new: it has no log anywhere to lose, so
// broker 1 leads it and serves its writes, and its refusal would not keep
// the record alive.
func TestATopicCreatedAfterADiskWasReplacedIsLedByThatBroker(t *testing.T) {
	c, _, dirB, onB, _ := lostDiskCluster(t)
	if err := os.RemoveAll(dirB); err != nil {
		t.Fatal(err)
	}
	cfg := c.brokerCfg[1]
	cfg.LogDirsReplaced = []string{dirB}
	c.brokerCfg[1] = cfg
	c.StartBroker(1)
	notLedEmpty(t, c, onB)

	created, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{TimeoutMs: 10000, Topics: []*adminv1.TopicSpec{{
		Name: "fresh", Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}}}})
	if err != nil || created.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v %v", created, err)
	}
	c.WaitFor(20*time.Second, "fresh-0 led by broker 1", func() bool {
		pd := c.Partition("fresh", 0)
		return pd.GetLeader() == 1 && len(pd.GetOfflineReplicas()) == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Produce(ctx, "fresh", 0, -1, "v"); err != nil {
		t.Fatalf("write to the new topic: %v", err)
	}
	if got := c.Values(1, "fresh", 0); !slices.Equal(got, []string{"v"}) {
		t.Fatalf("fresh-0 on broker 1: %v", got)
	}
	// The lost partitions are still refused: nothing drifted.
	for _, p := range onB {
		if l := c.Partition("lost", p).GetLeader(); l != -1 {
			t.Fatalf("lost-%d led by %d", p, l)
		}
	}
}

// A broker whose replaced disk held nothing it still hosts is sent no
// roles at all: the full metadata view it is sent tells it so, and a topic
// created on it afterwards is led by it rather than refused forever.
func TestABrokerThatHostsNothingLeadsANewTopicAfterItsDiskWasReplaced(t *testing.T) {
	c := Start(t, Options{Brokers: 2, Adjust: func(cfg *broker.Config) {
		if cfg.ID == 1 {
			cfg.LogDirs = []string{filepath.Join(cfg.DataDir, "disk-a"), filepath.Join(cfg.DataDir, "disk-b")}
		}
	}})
	dirB := c.BrokerConfig(1).LogDirs[1]
	c.WaitBrokerAlive(1)
	if err := c.StopBroker(1); err != nil {
		t.Logf("stopping broker 1: %v", err)
	}
	if err := os.RemoveAll(dirB); err != nil {
		t.Fatal(err)
	}
	cfg := c.brokerCfg[1]
	cfg.LogDirsReplaced = []string{dirB}
	c.brokerCfg[1] = cfg
	c.StartBroker(1)
	c.WaitBrokerAlive(1)
	time.Sleep(time.Second) // its registration's pushes applied

	created, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{TimeoutMs: 10000, Topics: []*adminv1.TopicSpec{{
		Name: "fresh", Assignments: []*adminv1.ReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}}}})
	if err != nil || created.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v %v", created, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.WaitFor(20*time.Second, "fresh-0 led by broker 1 and writable", func() bool {
		pd := c.Partition("fresh", 0)
		if pd.GetLeader() != 1 || len(pd.GetOfflineReplicas()) != 0 {
			return false
		}
		_, err := c.Produce(ctx, "fresh", 0, -1, "v")
		return err == nil
	})
	c.WaitFor(20*time.Second, "the replaced dir forgotten", func() bool {
		return !strings.Contains(dataMeta(t, cfg.DataDir), "log.dirs.replaced")
	})
}

// An RF 1 topic whose only copies of some partitions were on a replaced
// disk: those partitions stay offline (broker 1 never leads them from an
// empty log on its own, and a preferred election changes nothing) until
// the operator asks for an unclean election, by ElectLeaders UNCLEAN for
// one partition and by unclean.leader.election.enable on the topic for the
// rest. Broker 1 then leads them from an empty log at offset 0 in a new
// leader epoch, and they take writes and serve reads again; the partitions
// on the intact disk keep every acknowledged write.
func TestAnUncleanElectionBringsBackAPartitionWhoseOnlyLogWasLost(t *testing.T) {
	c := Start(t, Options{Brokers: 2, Adjust: func(cfg *broker.Config) {
		if cfg.ID == 1 {
			cfg.LogDirs = []string{filepath.Join(cfg.DataDir, "disk-a"), filepath.Join(cfg.DataDir, "disk-b")}
		}
	}})
	dirB := c.BrokerConfig(1).LogDirs[1]
	var asg []*adminv1.ReplicaAssignment
	for p := int32(0); p < 4; p++ {
		asg = append(asg, &adminv1.ReplicaAssignment{Partition: p, Replicas: []int32{1}})
	}
	created, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{TimeoutMs: 10000,
		Topics: []*adminv1.TopicSpec{{Name: "solo", Assignments: asg}}})
	if err != nil || created.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v %v", created, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acked := map[int32][]string{}
	for p := int32(0); p < 4; p++ {
		c.WaitFor(10*time.Second, fmt.Sprintf("solo-%d led by 1", p), func() bool { return c.Partition("solo", p).GetLeader() == 1 })
		for i := 0; i < 10; i++ {
			v := fmt.Sprintf("p%d-%d", p, i)
			if _, err := c.Produce(ctx, "solo", p, -1, v); err != nil {
				t.Fatalf("acks=all write to solo-%d: %v", p, err)
			}
			acked[p] = append(acked[p], v)
		}
	}
	var onB []int32
	for p := int32(0); p < 4; p++ {
		if _, err := os.Stat(filepath.Join(dirB, fmt.Sprintf("solo-%d", p))); err == nil {
			onB = append(onB, p)
		}
	}
	if len(onB) < 2 || len(onB) == 4 {
		t.Fatalf("broker 1 put %v of the 4 partitions on dir b; the test needs two or more there and some on dir a", onB)
	}
	epochBefore := map[int32]int32{}
	for _, p := range onB {
		epochBefore[p] = c.Partition("solo", p).GetLeaderEpoch()
	}

	if err := c.StopBroker(1); err != nil {
		t.Logf("stopping broker 1: %v", err)
	}
	if err := os.RemoveAll(dirB); err != nil {
		t.Fatal(err)
	}
	cfg := c.brokerCfg[1]
	cfg.LogDirsReplaced = []string{dirB}
	c.brokerCfg[1] = cfg
	c.StartBroker(1)
	notLedEmptyIn(t, c, "solo", onB)

	// A preferred election cannot bring them back: the preferred (only)
	// replica has no log.
	pref := &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED}
	for _, p := range onB {
		pref.Partitions = append(pref.Partitions, &commonv1.TopicPartition{Topic: "solo", Partition: p})
	}
	resp, err := c.Admin().ElectLeaders(context.Background(), pref)
	if err != nil {
		t.Fatalf("preferred election: %v", err)
	}
	for _, r := range resp.GetResults() {
		if r.GetErrorCode() == 0 {
			t.Fatalf("preferred election of solo-%d succeeded: %v", r.GetPartition(), r)
		}
	}
	notLedEmptyIn(t, c, "solo", onB)

	// ElectLeaders UNCLEAN for the first: broker 1 leads it from empty.
	first, rest := onB[0], onB[1:]
	el := &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_UNCLEAN,
		Partitions: []*commonv1.TopicPartition{{Topic: "solo", Partition: first}}}
	resp, err = c.Admin().ElectLeaders(context.Background(), el)
	if err != nil || len(resp.GetResults()) != 1 || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("unclean election of solo-%d: %v %v", first, resp, err)
	}
	backFromEmpty(t, c, first, epochBefore[first])
	// The others were not asked for: still offline.
	notLedEmptyIn(t, c, "solo", rest)

	// unclean.leader.election.enable on the topic brings back the rest.
	ar, err := c.Admin().AlterConfigs(context.Background(), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "solo"},
		Ops:      []*adminv1.ConfigOp{{Name: "unclean.leader.election.enable", Value: "true", Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}}}})
	if err != nil || ar.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("set unclean.leader.election.enable: %v %v", ar, err)
	}
	for _, p := range rest {
		backFromEmpty(t, c, p, epochBefore[p])
	}
	for p := int32(0); p < 4; p++ {
		if !slices.Contains(onB, p) {
			if got := c.Values(1, "solo", p); !slices.Equal(got, acked[p]) {
				t.Fatalf("solo-%d on the intact dir: %v, want %v", p, got, acked[p])
			}
		}
	}
	c.WaitFor(20*time.Second, "the replaced dir forgotten once every role has its log", func() bool {
		return !strings.Contains(dataMeta(t, cfg.DataDir), "log.dirs.replaced")
	})
}

// backFromEmpty waits until solo-p is led by broker 1 again in a leader
// epoch past before, from an empty log at offset 0, and checks that it
// takes a write and serves it to a consumer.
func backFromEmpty(t *testing.T, c *Cluster, p int32, before int32) {
	t.Helper()
	c.WaitFor(30*time.Second, fmt.Sprintf("solo-%d led by 1 again, no replica offline", p), func() bool {
		pd := c.Partition("solo", p)
		return pd.GetLeader() == 1 && len(pd.GetOfflineReplicas()) == 0
	})
	if e := c.Partition("solo", p).GetLeaderEpoch(); e <= before {
		t.Fatalf("solo-%d leader epoch %d, want past %d", p, e, before)
	}
	if got := c.Values(1, "solo", p); len(got) != 0 {
		t.Fatalf("solo-%d's new log holds %v before any write", p, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v := fmt.Sprintf("after-%d", p)
	off, err := c.Produce(ctx, "solo", p, -1, v)
	if err != nil || off != 0 {
		t.Fatalf("write to solo-%d after the unclean election: offset %d, %v; want offset 0", p, off, err)
	}
	resp, err := c.BrokerClient(1).Fetch(ctx, &brokerv1.FetchRequest{Topic: "solo", Partition: p, CurrentLeaderEpoch: -1})
	if err != nil || len(resp.GetRecords()) != 1 || string(resp.GetRecords()[0].GetValue()) != v {
		t.Fatalf("consumer fetch of solo-%d: %v %v; want the one new record", p, resp, err)
	}
}
