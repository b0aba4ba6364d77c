package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/platform/testenv"
)

// ext4Disk is a real ext4 file system on a loop device, mounted with
// errors=remount-ro as Linux disks commonly are: its image file and
// mount point are the test's own, and it is unmounted at the end.
type ext4Disk struct {
	t          *testing.T
	image, dir string
}

func newExt4Disk(t *testing.T, name string) *ext4Disk {
	t.Helper()
	testenv.SkipIfShort(t, "mounts an ext4 image")
	root := t.TempDir()
	d := &ext4Disk{t: t, image: filepath.Join(root, name+".img"), dir: filepath.Join(root, name)}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("truncate", "-s", "64M", d.image).CombinedOutput(); err != nil {
		t.Fatalf("image %s: %v: %s", d.image, err, out)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", d.image).CombinedOutput(); err != nil {
		testenv.Unavailable(t, fmt.Sprintf("mkfs.ext4: %v: %s", err, out), "install e2fsprogs")
	}
	d.mount()
	t.Cleanup(func() {
		if exec.Command("mountpoint", "-q", d.dir).Run() != nil {
			return // unmounted by the test
		}
		if out, err := exec.Command("umount", d.dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s; detaching it lazily", d.dir, err, out)
			exec.Command("umount", "-l", d.dir).Run()
		}
	})
	return d
}

func (d *ext4Disk) mount() {
	d.t.Helper()
	if out, err := exec.Command("mount", "-o", "loop,errors=remount-ro", d.image, d.dir).CombinedOutput(); err != nil {
		testenv.Unavailable(d.t, fmt.Sprintf("mounting an ext4 image on a loop device (root, loop devices): %v: %s", err, out), "run the test as root")
	}
}

// fail makes the kernel take the file system read-only as it does on an
// I/O error (ext4's errors=remount-ro): every write fails with EROFS from
// then on, through files already open too, and reads still work. A plain
// `mount -o remount,ro` is refused while the broker holds segments open
// for writing, the kernel's own remount is not.
func (d *ext4Disk) fail() {
	d.t.Helper()
	out, err := exec.Command("findmnt", "-no", "SOURCE", d.dir).Output()
	if err != nil {
		d.t.Fatalf("findmnt %s: %v", d.dir, err)
	}
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(strings.TrimSpace(string(out))), "trigger_fs_error")
	if err := os.WriteFile(trigger, []byte("1"), 0); err != nil {
		testenv.Unavailable(d.t, fmt.Sprintf("writing %s: %v", trigger, err), "a kernel with ext4's trigger_fs_error")
	}
	// The kernel may remount from a work queue: wait for it. Newer kernels
	// show the aborted file system as emergency_ro, older ones as ro.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		opts, _ := exec.Command("findmnt", "-no", "OPTIONS", d.dir).Output()
		fields := strings.Split(strings.TrimSpace(string(opts)), ",")
		if slices.Contains(fields, "ro") || slices.Contains(fields, "emergency_ro") {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s still mounted %s 5 s after the error", d.dir, opts)
		}
	}
}

// repair is the operator's part once the broker is stopped: unmount,
// check the file system and mount it again read-write (an ext4 that
// aborted its journal refuses `remount,rw`).
func (d *ext4Disk) repair() {
	d.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("umount", d.dir).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("umount %s: %v: %s", d.dir, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := exec.Command("e2fsck", "-f", "-y", d.image).CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 { // 1: errors corrected
			d.t.Fatalf("e2fsck %s: %v: %s", d.image, err, out)
		}
	}
	d.mount()
}

// partitionsIn lists the partitions of topic whose logs are in dir.
func partitionsIn(t *testing.T, dir, topic string) []int32 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ps []int32
	for _, e := range ents {
		if name, ok := strings.CutPrefix(e.Name(), topic+"-"); ok && e.IsDir() {
			var p int32
			if _, err := fmt.Sscan(name, &p); err == nil {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// A disk that turns read-only while nothing is written (ext4's
// errors=remount-ro after an I/O error) is noticed within a few high
// watermark checkpoint intervals, as Kafka's brokers notice it: the
// checkpoint is written every interval whether or not a high watermark
// moved. First a follower's disk, then the leader's: each dir is reported
// offline, its replicas leave the ISR (and the leadership moves to another
// ISR member) while the cluster is still quiet, so the next acks=all write
// succeeds at its first attempt; every acknowledged write stays readable;
// repaired and restarted, the brokers are whole again.
func TestAnIdleDiskTurnedReadOnlyGoesOffline(t *testing.T) {
	disk1, disk2 := newExt4Disk(t, "disk1"), newExt4Disk(t, "disk2")
	c := Start(t, Options{Brokers: 3, Adjust: func(cfg *broker.Config) {
		if cfg.Settings == nil {
			cfg.Settings = map[string]string{}
		}
		cfg.Settings["replica.high.watermark.checkpoint.interval.ms"] = "300"
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
		switch cfg.ID {
		case 1:
			cfg.LogDirs = []string{filepath.Join(cfg.DataDir, "logs"), disk1.dir}
		case 2:
			cfg.LogDirs = []string{filepath.Join(cfg.DataDir, "logs"), disk2.dir}
		}
	}})
	const topic, parts = "ro", 6
	var asg []*adminv1.ReplicaAssignment
	for p := int32(0); p < parts; p++ {
		asg = append(asg, &adminv1.ReplicaAssignment{Partition: p, Replicas: [][]int32{{1, 2, 3}, {1, 3, 2}}[p%2]})
	}
	created, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{TimeoutMs: 10000, Topics: []*adminv1.TopicSpec{{Name: topic, Assignments: asg}}})
	if err != nil || created.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("create: %v %v", created, err)
	}
	c.WaitFor(15*time.Second, "broker 1 leading every partition with a full ISR", func() bool {
		for p := int32(0); p < parts; p++ {
			if pd := c.Partition(topic, p); pd.GetLeader() != 1 || len(pd.GetIsr()) != 3 {
				return false
			}
		}
		return true
	})
	on1, on2 := partitionsIn(t, disk1.dir, topic), partitionsIn(t, disk2.dir, topic)
	if len(on1) == 0 || len(on2) == 0 {
		t.Fatalf("partitions on broker 1's disk %v, on broker 2's %v: the test needs some on each", on1, on2)
	}
	t.Logf("on broker 1's ext4 disk: %v; on broker 2's: %v", on1, on2)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	acked := map[int32]map[int64]string{}
	write := func(p int32, v string) {
		t.Helper()
		off, err := c.Produce(ctx, topic, p, -1, v) // one attempt
		if err != nil {
			t.Fatalf("acks=all write %q to %s-%d (leader %d): %v", v, topic, p, c.Partition(topic, p).GetLeader(), err)
		}
		if acked[p] == nil {
			acked[p] = map[int64]string{}
		}
		acked[p][off] = v
	}
	for p := int32(0); p < parts; p++ {
		for i := 0; i < 5; i++ {
			write(p, fmt.Sprintf("before-%d-%d", p, i))
		}
		c.WaitHWAtLEO(topic, p, 1, 2, 3)
	}
	time.Sleep(2 * time.Second) // idle: the moved high watermarks are checkpointed, nothing moves any more

	offlineDir := func(id int32, dir string, replicas int) bool {
		resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		for _, b := range resp.GetBrokers() {
			if b.GetNode().GetId() != id {
				continue
			}
			for _, d := range b.GetOfflineLogDirs() {
				// EROFS mostly; EIO when a write was under way as the
				// journal aborted.
				if d.GetPath() == dir && d.GetError() != "" && int(d.GetReplicas()) == replicas {
					return true
				}
			}
		}
		return false
	}
	// A few checkpoint intervals, far below the minute of the recovery
	// point checkpoint: nothing else writes to an idle dir.
	const noticed = 10 * time.Second
	state := func() string {
		var b strings.Builder
		if resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{}); err == nil {
			for _, br := range resp.GetBrokers() {
				fmt.Fprintf(&b, "broker %d offline dirs %v; ", br.GetNode().GetId(), br.GetOfflineLogDirs())
			}
		}
		for p := int32(0); p < parts; p++ {
			pd := c.Partition(topic, p)
			fmt.Fprintf(&b, "%d: leader %d isr %v offline %v; ", p, pd.GetLeader(), pd.GetIsr(), pd.GetOfflineReplicas())
		}
		return b.String()
	}
	waitNoticed := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(noticed); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s: %s", what, noticed, state())
			}
		}
	}

	// The follower's disk: broker 2 leaves the ISR of its partitions there,
	// broker 1 keeps leading.
	failed := time.Now()
	disk2.fail()
	waitNoticed("broker 2's read-only disk offline and out of the ISRs while idle", func() bool {
		if !offlineDir(2, disk2.dir, len(on2)) {
			return false
		}
		for _, p := range on2 {
			pd := c.Partition(topic, p)
			if slices.Contains(pd.GetIsr(), 2) || !slices.Contains(pd.GetOfflineReplicas(), 2) || pd.GetLeader() != 1 {
				return false
			}
		}
		return true
	})
	t.Logf("broker 2's disk offline and its replicas out of the ISRs %v after the error", time.Since(failed).Round(10*time.Millisecond))
	if n := c.Metric(2, "tidemark_log_offline_dirs"); n != 1 {
		t.Fatalf("broker 2 reports %v offline log dirs, want 1", n)
	}
	for p := int32(0); p < parts; p++ {
		write(p, fmt.Sprintf("after-follower-%d", p))
	}

	// The leader's disk: another ISR member leads its partitions there.
	time.Sleep(time.Second) // idle again
	failed = time.Now()
	disk1.fail()
	waitNoticed("broker 1's read-only disk offline, its leaderships moved, while idle", func() bool {
		if !offlineDir(1, disk1.dir, len(on1)) {
			return false
		}
		for _, p := range on1 {
			pd := c.Partition(topic, p)
			if l := pd.GetLeader(); l == 1 || l <= 0 || slices.Contains(pd.GetIsr(), 1) || !slices.Contains(pd.GetOfflineReplicas(), 1) {
				return false
			}
		}
		return true
	})
	t.Logf("broker 1's disk offline and its leaderships moved %v after the error", time.Since(failed).Round(10*time.Millisecond))
	if n := c.Metric(1, "tidemark_log_offline_dirs"); n != 1 {
		t.Fatalf("broker 1 reports %v offline log dirs, want 1", n)
	}
	for p := int32(0); p < parts; p++ {
		write(p, fmt.Sprintf("after-leader-%d", p))
	}
	for p := int32(0); p < parts; p++ {
		leader := c.Partition(topic, p).GetLeader()
		vals := c.Values(leader, topic, p)
		for off, v := range acked[p] {
			if off >= int64(len(vals)) || vals[off] != v {
				t.Fatalf("%s-%d: acknowledged %q at offset %d not on leader %d (log %v)", topic, p, v, off, leader, vals)
			}
		}
	}

	// Repaired (unmounted, checked, mounted again) with the brokers
	// stopped, and restarted: every dir is back and every ISR whole.
	for _, id := range []int32{1, 2} {
		if err := c.StopBroker(id); err != nil {
			t.Logf("stopping broker %d: %v", id, err)
		}
	}
	disk1.repair()
	disk2.repair()
	c.StartBroker(1)
	c.StartBroker(2)
	for p := int32(0); p < parts; p++ {
		c.WaitFor(30*time.Second, fmt.Sprintf("%s-%d whole again", topic, p), func() bool {
			pd := c.Partition(topic, p)
			return len(pd.GetIsr()) == 3 && len(pd.GetOfflineReplicas()) == 0
		})
		logs := c.SameLogs(topic, p, 1, 2, 3)
		for off, v := range acked[p] {
			if off >= int64(len(logs)) || logs[off] != v {
				t.Fatalf("%s-%d after the repair: acknowledged %q at offset %d missing (log %v)", topic, p, v, off, logs)
			}
		}
	}
	resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.GetBrokers() {
		if len(b.GetOfflineLogDirs()) > 0 {
			t.Fatalf("broker %d still reports offline log dirs %v after the repair", b.GetNode().GetId(), b.GetOfflineLogDirs())
		}
	}
	for _, id := range []int32{1, 2} {
		if n := c.Metric(id, "tidemark_log_offline_dirs"); n != 0 {
			t.Fatalf("broker %d reports %v offline log dirs after the repair", id, n)
		}
	}
}
