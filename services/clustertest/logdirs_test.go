package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	fkerr "github.com/twmb/franz-go/pkg/kerr"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/testenv"
)

// smallDisk mounts a tmpfs of size bytes: a real file system that fills up.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	testenv.SkipIfShort(t, "mounts a small tmpfs")
	dir := filepath.Join(t.TempDir(), "small-disk")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Unavailable(t, fmt.Sprintf("mounting a tmpfs (root or CAP_SYS_ADMIN): %v: %s", err, out), "run the test as root")
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// A broker with two log dirs, one on a small disk that fills up while
// records are written: that dir goes offline (ENOSPC), as Kafka's does.
// Its partitions lose this broker as leader and ISR member, the broker
// keeps serving the partitions of its other dir, the cluster shows the
// offline dir, and no acknowledged write is lost.
func TestAFullDiskTakesItsLogDirOffline(t *testing.T) {
	small := smallDisk(t, "512k")
	c := Start(t, Options{Brokers: 3, Kafka: true, Adjust: func(cfg *broker.Config) {
		if cfg.ID == 1 {
			cfg.LogDirs = []string{filepath.Join(cfg.DataDir, "logs"), small}
		}
	}})
	// Broker 1 leads every partition, so the full disk moves leaderships.
	var asg []*adminv1.ReplicaAssignment
	for p := int32(0); p < 4; p++ {
		asg = append(asg, &adminv1.ReplicaAssignment{Partition: p, Replicas: [][]int32{{1, 2, 3}, {1, 3, 2}}[p%2]})
	}
	created, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{TimeoutMs: 10000, Topics: []*adminv1.TopicSpec{{
		Name: "disk", Assignments: asg, Configs: map[string]string{"min.insync.replicas": "2"}}}})
	if err != nil || created.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v %v", created, err)
	}
	c.WaitFor(10*time.Second, "broker 1 leading every partition", func() bool {
		for p := int32(0); p < 4; p++ {
			if c.Partition("disk", p).GetLeader() != 1 {
				return false
			}
		}
		return true
	})
	ents, err := os.ReadDir(small)
	if err != nil {
		t.Fatal(err)
	}
	var onSmall []int32
	for _, e := range ents {
		if name, ok := strings.CutPrefix(e.Name(), "disk-"); ok && e.IsDir() {
			var p int32
			fmt.Sscan(name, &p)
			onSmall = append(onSmall, p)
		}
	}
	if len(onSmall) == 0 || len(onSmall) == 4 {
		t.Fatalf("broker 1 put %v of the 4 partitions on the small disk; the test needs some on each dir", onSmall)
	}
	t.Logf("on the small disk: partitions %v", onSmall)

	// Fill it: 1 KiB records, acks=all, to the partitions on the small disk,
	// well past its size; every write must end acknowledged (retried past
	// KAFKA_STORAGE_ERROR and leader changes) or refused, never lost.
	value := strings.Repeat("x", 1024)
	acked := map[int32][]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < 1200; i++ {
		p := onSmall[i%len(onSmall)]
		var off int64
		for attempt := 0; ; attempt++ {
			off, err = c.Produce(ctx, "disk", p, -1, fmt.Sprintf("%d-%s", i, value))
			if err == nil || attempt == 50 || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("write %d to disk-%d: %v", i, p, err)
		}
		acked[p] = append(acked[p], off)
	}

	c.WaitFor(20*time.Second, "broker 1's small disk reported offline", func() bool {
		resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		for _, b := range resp.GetBrokers() {
			if b.GetNode().GetId() == 1 {
				for _, d := range b.GetOfflineLogDirs() {
					if d.GetPath() == small && strings.Contains(d.GetError(), "no space left") && int(d.GetReplicas()) == len(onSmall) {
						return true
					}
				}
			}
		}
		return false
	})
	// Kafka's tools see it too (kafka-log-dirs.sh: DescribeLogDirs).
	dirs, err := kadm.NewClient(c.KafkaClient()).DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := dirs[small]; !ok || !errors.Is(d.Err, fkerr.KafkaStorageError) {
		t.Fatalf("DescribeLogDirs of broker 1: %v; want %s offline with KAFKA_STORAGE_ERROR", dirs, small)
	}
	healthy := filepath.Join(c.BrokerConfig(1).DataDir, "logs")
	if d, ok := dirs[healthy]; !ok || d.Err != nil || len(d.Topics["disk"]) != 4-len(onSmall) {
		t.Fatalf("DescribeLogDirs of broker 1: %v; want %s serving the other %d logs", dirs, healthy, 4-len(onSmall))
	}
	for p := int32(0); p < 4; p++ {
		pd := c.Partition("disk", p)
		offline := slices.Contains(onSmall, p)
		if offline && (pd.GetLeader() == 1 || slices.Contains(pd.GetIsr(), 1) || !slices.Contains(pd.GetOfflineReplicas(), 1)) {
			t.Fatalf("disk-%d on the full disk: %v; want broker 1 neither leader nor in the ISR, and listed offline", p, pd)
		}
		if !offline {
			c.WaitFor(20*time.Second, fmt.Sprintf("a full ISR for disk-%d", p), func() bool { return len(c.Partition("disk", p).GetIsr()) == 3 })
		}
	}
	// Broker 1 still serves its other dir: a write to a partition it leads
	// there, or follows, is replicated to it.
	for p := int32(0); p < 4; p++ {
		if slices.Contains(onSmall, p) {
			continue
		}
		if _, err := c.Produce(ctx, "disk", p, -1, "after"); err != nil {
			t.Fatalf("write to disk-%d (healthy dir): %v", p, err)
		}
		c.SameLogs("disk", p, 1, 2, 3)
	}
	// Every acknowledged write is on the partition's leader.
	for _, p := range onSmall {
		pd := c.Partition("disk", p)
		vals := c.Values(pd.GetLeader(), "disk", p)
		for _, off := range acked[p] {
			if off >= int64(len(vals)) {
				t.Fatalf("disk-%d: acknowledged offset %d missing on leader %d (log of %d)", p, off, pd.GetLeader(), len(vals))
			}
		}
	}
	// The full disk's partitions answer KAFKA_STORAGE_ERROR on broker 1.
	_, err = c.BrokerClient(1).Fetch(ctx, &brokerv1.FetchRequest{Topic: "disk", Partition: onSmall[0]})
	if code := kerr.FromStatus(err).Code; code != kerr.KafkaStorageError {
		t.Fatalf("fetch of an offline dir's partition from broker 1: %v, want KAFKA_STORAGE_ERROR", err)
	}

	// A controller failover and a quiet minute later the new controller
	// knows too: the dir is listed, and a preferred election cannot hand
	// the full disk's partitions back to broker 1, their preferred leader.
	active, _ := c.ActiveController()
	c.StopController(active)
	c.WaitFor(20*time.Second, "the other controller active and told of the offline dir", func() bool {
		now, _ := c.ActiveController()
		if now == active || now <= 0 {
			return false
		}
		resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		for _, b := range resp.GetBrokers() {
			if b.GetNode().GetId() == 1 && len(b.GetOfflineLogDirs()) == 1 {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second) // a quiet gap: nothing may drift back
	el := &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED}
	for _, p := range onSmall {
		el.Partitions = append(el.Partitions, &commonv1.TopicPartition{Topic: "disk", Partition: p})
	}
	if _, err := c.Admin().ElectLeaders(ctx, el); err != nil {
		t.Logf("preferred election: %v", err)
	}
	for _, p := range onSmall {
		if pd := c.Partition("disk", p); pd.GetLeader() == 1 || slices.Contains(pd.GetIsr(), 1) {
			t.Fatalf("after the controller failover disk-%d is %v: broker 1's offline replica is back", p, pd)
		}
	}
	c.StartController(active)

	// The operator replaces the disk (a new, larger, empty one) and
	// restarts the broker, naming the disk replaced: its replicas there start empty, catch up and
	// rejoin, and every partition is whole again.
	if err := c.StopBroker(1); err != nil {
		t.Logf("stopping broker 1: %v", err)
	}
	if out, err := exec.Command("umount", "-l", small).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount the new disk: %v: %s", err, out)
	}
	// An empty disk where broker 1's logs were is taken for an unmounted
	// one (offline) unless the operator says it was replaced.
	cfg := c.brokerCfg[1]
	cfg.LogDirsReplaced = []string{small}
	c.brokerCfg[1] = cfg
	c.StartBroker(1)
	for p := int32(0); p < 4; p++ {
		c.WaitFor(30*time.Second, fmt.Sprintf("disk-%d whole again", p), func() bool {
			pd := c.Partition("disk", p)
			return len(pd.GetIsr()) == 3 && len(pd.GetOfflineReplicas()) == 0
		})
		c.SameLogs("disk", p, 1, 2, 3)
	}
	resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.GetBrokers() {
		if len(b.GetOfflineLogDirs()) > 0 {
			t.Fatalf("broker %d still reports offline log dirs %v after the disk was replaced", b.GetNode().GetId(), b.GetOfflineLogDirs())
		}
	}
}

// A broker whose only log dir fills up has nothing left to serve: it
// reports failure (the process exits, as Kafka's broker does), and the
// controller moves its leaderships once it is gone.
func TestABrokerWithEveryLogDirOfflineStops(t *testing.T) {
	small := smallDisk(t, "256k")
	c := Start(t, Options{Brokers: 3, Adjust: func(cfg *broker.Config) {
		if cfg.ID == 2 {
			cfg.LogDirs = []string{small}
		}
	}})
	c.CreateTopic("full", 1, 3, nil)
	value := strings.Repeat("y", 1024)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := c.Broker(2)
	failed := func(err error) {
		if !strings.Contains(err.Error(), "every log dir is offline") {
			t.Fatalf("broker 2 failed with %v", err)
		}
		c.CrashBroker(2) // what the process's exit amounts to
		c.WaitFor(20*time.Second, "a leader other than broker 2", func() bool {
			l := c.Partition("full", 0).GetLeader()
			return l > 0 && l != 2
		})
	}
	for i := 0; i < 600; i++ {
		if _, err := c.Produce(ctx, "full", 0, 1, value); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
		select {
		case err := <-b.Failed():
			failed(err)
			return
		default:
		}
	}
	// acks=1: broker 2, a follower, may still be fetching what fills its
	// disk when the last write is acknowledged.
	select {
	case err := <-b.Failed():
		failed(err)
	case <-time.After(30 * time.Second):
		t.Fatal("broker 2 kept running with its only log dir full")
	}
}
