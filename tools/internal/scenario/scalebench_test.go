//go:build linux

package scenario

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/devcluster"
	"tidemark.io/tools/internal/testbin"
)

// TestScaleOnTheDevCluster is a measurement, not a check (make bench runs
// it with TIDEMARK_BENCH_SCALE=1): on a dev cluster of separate processes
// (3 brokers, each holding 10,000 replicas; 2 controllers; mutual TLS) it grows to 10,000 partitions of
// RF 3 and prints, each on a line starting "scale:", with the goal beside it:
//   - how long a topic of 2,000 partitions takes until every broker's
//     metadata shows every partition led;
//   - each broker's RSS with no topics and with 3,000 idle replicas, and
//     the difference per replica;
//   - how long the partitions led by a broker killed with SIGKILL take to
//     get new leaders (and writes to a sample of them to succeed);
//   - with 10,000 partitions (fewer when the brokers' open-files limit
//     cannot hold them, said on its own line), how long a controller
//     killed with SIGKILL takes to be replaced, and every broker to learn
//     of the new one.
//
// Every wait is bounded and fails naming what did not happen.
func TestScaleOnTheDevCluster(t *testing.T) {
	if os.Getenv("TIDEMARK_BENCH_SCALE") != "1" {
		testenv.Skip(t, "opt-in: set TIDEMARK_BENCH_SCALE=1 to measure a dev cluster at 10,000 partitions (make bench)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	// A broker's segment files go through one cache bounded by
	// log.max.open.files, so 10,000 replicas per broker fit under this
	// machine's open-files limit (20,000): the bound is set above the
	// replicas that are busy at once (every one, during the failovers),
	// and below the limit with room for sockets.
	brokers := 3
	var lim syscall.Rlimit
	maxOpen := uint64(14000)
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		maxOpen = min(maxOpen, lim.Max*7/10)
	}
	s := startScale(ctx, t, brokers, maxOpen)
	s.logf("%d brokers (RF 3), 2 controllers; open-files limit %d, log.max.open.files %d", brokers, lim.Max, maxOpen)

	// The brokers' RSS and open files before any topic, to subtract below.
	time.Sleep(3 * time.Second)
	bare := s.rss()
	bareFiles := s.openFiles(1)

	// 1. A topic of 2,000 partitions.
	start := time.Now()
	s.create("scale-0", 2000)
	created := time.Since(start)
	s.waitAllLed("scale-0", 2000, start, 2*time.Minute)
	s.logf("create a topic of 2,000 partitions RF 3: every broker's metadata shows all led after %s (CreateTopics answered after %s)",
		round(time.Since(start)), round(created))

	// 3. 3,000 idle replicas per broker (3,000 partitions RF 3 on 3
	// brokers, 1,000 more per further broker). A broker's metadata shows a
	// new topic once it has applied the topic's LeaderAndIsr (the
	// UpdateMetadata comes after it), so its replicas exist by then.
	idle := 1000 * brokers
	s.create("scale-1", int32(idle-2000))
	s.waitAllLed("scale-1", idle-2000, time.Now(), 2*time.Minute)
	time.Sleep(10 * time.Second) // idle: nothing written, followers parked
	loaded := s.rss()
	var perReplica []string
	var worst float64
	for i, id := range s.brokerIDs() {
		kib := float64(loaded[i]-bare[i]) / 3000
		worst = max(worst, kib)
		perReplica = append(perReplica, fmt.Sprintf("broker %d: %d MiB -> %d MiB, %.1f KiB/replica", id, bare[i]>>10, loaded[i]>>10, kib))
	}
	s.logf("broker RSS with 3,000 idle replicas each: %s (goal < 50 KiB per idle replica: %s)", strings.Join(perReplica, "; "), verdict(worst < 50))
	filesPerReplica := float64(s.openFiles(1)-bareFiles) / 3000
	limit := s.openFilesLimit(1)
	s.noOfflineLogDirs("3,000 replicas per broker")

	// 4. Leader failover of one broker's ~1,000 leaderships.
	s.leaderFailover([]string{"scale-0", "scale-1"})

	// 2. Controller failover with 10,000 partitions: with RF 3 on 3
	// brokers every broker hosts them all. Its segment files stay within
	// log.max.open.files (plus those in use and its sockets), so the
	// open-files limit holds them; the line says what the files came to.
	total := 10000
	s.logf("open files: %.1f per idle replica at 3,000 replicas, %d with no topics; log.max.open.files %d, the brokers' limit is %d",
		filesPerReplica, bareFiles, maxOpen, limit)
	start = time.Now()
	topics := []string{"scale-0", "scale-1"}
	for n := idle; n < total; {
		size := min(2000, total-n)
		topic := fmt.Sprintf("scale-%d", len(topics))
		s.create(topic, int32(size))
		s.waitAllLed(topic, size, start, 3*time.Minute)
		topics = append(topics, topic)
		n += size
	}
	s.logf("%d more partitions RF 3 (to %d) in %d topics, one after another: every broker's metadata shows all led after %s", total-idle, total, len(topics)-2, round(time.Since(start)))
	s.noOfflineLogDirs(fmt.Sprintf("%d replicas per broker", 3*total/brokers))
	s.logf("open files with %d replicas per broker: broker 1 holds %d (log.max.open.files %d, limit %d)", 3*total/brokers, s.openFiles(1), maxOpen, limit)
	s.controllerFailover(topics, total)
	s.noOfflineLogDirs("the controller failover")
}

// scale is the measurement's cluster and its clients.
type scale struct {
	ctx    context.Context
	t      *testing.T
	cl     *devcluster.Cluster
	env    Env
	admin  *client.Admin
	client *client.Client
}

// startScale starts a dev cluster on free ports in a temp dir, with the
// launcher in this process (it kills nodes by their own PIDs).
func startScale(ctx context.Context, t *testing.T, brokers int, maxOpenFiles uint64) *scale {
	t.Helper()
	bin := testbin.Dir(t, filepath.Join("..", "..", ".."), "TIDEMARK_SCENARIO_BIN_DIR")
	// TIDEMARK_BENCH_SCALE_DIR keeps the data and logs for a look after.
	data := os.Getenv("TIDEMARK_BENCH_SCALE_DIR")
	if data == "" {
		data = t.TempDir()
	} else if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := devcluster.Options{DataDir: data, BinDir: bin, Brokers: brokers, Controllers: 2, PortBase: freePortBase(t), Profiles: true,
		// Leaderships stay where the failover put them; every broker and
		// controller serves /debug/pprof (Node.ProfileAddr) for a look under load.
		ControllerArgs: []string{"--auto.leader.rebalance.enable=false"},
		BrokerArgs:     []string{"--config", fmt.Sprintf("log.max.open.files=%d", maxOpenFiles)}}
	launcherLog, err := os.Create(filepath.Join(data, "launcher.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { launcherLog.Close() })
	cl, err := devcluster.Up(ctx, opts, launcherLog)
	if err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	t.Cleanup(func() { cl.Down(launcherLog) })
	env, err := Discover(ctx, cl.Options().Ports().Control, cl.Options().Security())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := env.TLS.ClientOrNil()
	if err != nil {
		t.Fatal(err)
	}
	s := &scale{ctx: ctx, t: t, cl: cl, env: env}
	if s.admin, err = client.NewAdmin(env.Controllers, client.Options{RequestTimeout: 30 * time.Second, TLS: tc}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.Close() })
	if s.client, err = client.New(env.Brokers, client.Options{RequestTimeout: 5 * time.Second, RetryBackoffMax: 200 * time.Millisecond, TLS: tc}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.client.Close() })
	t.Logf("node logs in %s", filepath.Join(data, "logs"))
	// A node that exits at start (a port taken, say) would spoil a figure.
	s.until(fmt.Sprintf("both controllers and the %d brokers up", brokers), 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		d, err := s.admin.DescribeCluster(ctx)
		cancel()
		if err != nil {
			return false, err.Error()
		}
		alive := 0
		for _, b := range d.GetBrokers() {
			if b.GetAlive() {
				alive++
			}
		}
		return len(d.GetControllers()) == 2 && alive == brokers, fmt.Sprintf("%d controllers, %d brokers alive", len(d.GetControllers()), alive)
	})
	return s
}

func (s *scale) logf(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("scale: "+format, args...)
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

func (s *scale) brokerIDs() []int32 {
	var ids []int32
	for i := range s.env.Brokers {
		ids = append(ids, int32(i+1))
	}
	return ids
}

// until polls cond every `every` until it holds, failing the test after
// timeout with what and cond's last word.
func (s *scale) until(what string, timeout, every time.Duration, cond func() (bool, string)) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not within %s (last: %s; node logs in %s)", what, timeout, last, filepath.Join(s.cl.Options().DataDir, "logs"))
		}
		select {
		case <-s.ctx.Done():
			s.t.Fatalf("%s: %v", what, s.ctx.Err())
		case <-time.After(every):
		}
	}
}

// create creates a topic of n partitions, RF 3, without waiting for leaders.
func (s *scale) create(topic string, n int32) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 60*time.Second)
	defer cancel()
	if _, err := s.admin.CreateTopic(ctx, &adminv1.TopicSpec{Name: topic, NumPartitions: n, ReplicationFactor: 3}); err != nil {
		s.t.Fatalf("create topic %s of %d partitions: %v", topic, n, err)
	}
}

// describe is the controller's view of topics.
func (s *scale) describe(topics []string, underReplicated bool) ([]*adminv1.TopicDescription, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	resp, err := s.admin.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{Topics: topics, UnderReplicated: underReplicated})
	return resp.GetTopics(), err
}

// brokerMetadata is broker id's own metadata for topics.
func (s *scale) brokerMetadata(id int32, topics []string) (*brokerv1.MetadataResponse, error) {
	bc, err := s.client.Broker(s.env.Brokers[id-1])
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	return bc.Metadata(ctx, &brokerv1.MetadataRequest{Topics: topics})
}

// waitAllLed waits until every broker's metadata shows all n partitions of
// topic with a leader.
func (s *scale) waitAllLed(topic string, n int, start time.Time, timeout time.Duration) {
	s.t.Helper()
	s.until(fmt.Sprintf("every broker's metadata showing the %d partitions of %s led", n, topic), timeout, 50*time.Millisecond, func() (bool, string) {
		for _, id := range s.brokerIDs() {
			md, err := s.brokerMetadata(id, []string{topic})
			if err != nil {
				return false, fmt.Sprintf("broker %d: %v", id, err)
			}
			led := 0
			for _, tm := range md.GetTopics() {
				for _, p := range tm.GetPartitions() {
					if p.GetLeader() > 0 {
						led++
					}
				}
			}
			if led < n {
				return false, fmt.Sprintf("broker %d shows %d of %d led after %s", id, led, n, round(time.Since(start)))
			}
		}
		return true, ""
	})
}

// waitFullISR waits until no partition of topics is under-replicated.
func (s *scale) waitFullISR(topics []string, timeout time.Duration) {
	s.t.Helper()
	s.until(fmt.Sprintf("every partition of %v with its full ISR", topics), timeout, 250*time.Millisecond, func() (bool, string) {
		ts, err := s.describe(topics, true)
		if err != nil {
			return false, err.Error()
		}
		under := 0
		for _, td := range ts {
			under += len(td.GetPartitions())
		}
		return under == 0, fmt.Sprintf("%d under-replicated", under)
	})
}

// pid is the running process of node name, as the launcher knows it.
func (s *scale) pid(name string) int32 {
	s.t.Helper()
	n, err := s.cl.Node(name)
	if err != nil {
		s.t.Fatal(err)
	}
	pid := n.Proto().GetPid()
	if pid == 0 {
		s.t.Fatalf("%s is not running", name)
	}
	return pid
}

// rss is each broker's VmRSS in KiB, by id-1.
func (s *scale) rss() []int64 {
	s.t.Helper()
	var out []int64
	for _, id := range s.brokerIDs() {
		pid := s.pid(brokerName(id))
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			s.t.Fatalf("RSS of broker %d (pid %d): %v", id, pid, err)
		}
		kib := int64(-1)
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kib, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
		if kib < 0 {
			s.t.Fatalf("no VmRSS in /proc/%d/status", pid)
		}
		out = append(out, kib)
	}
	return out
}

// openFiles is how many files broker id's process holds open.
func (s *scale) openFiles(id int32) int {
	s.t.Helper()
	pid := s.pid(brokerName(id))
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		s.t.Fatalf("open files of broker %d (pid %d): %v", id, pid, err)
	}
	return len(fds)
}

// openFilesLimit is broker id's soft limit on open files.
func (s *scale) openFilesLimit(id int32) int {
	s.t.Helper()
	pid := s.pid(brokerName(id))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Max open files") {
			if f := strings.Fields(strings.TrimPrefix(l, "Max open files")); len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					return n
				}
			}
		}
	}
	s.t.Fatalf("no open-files limit in /proc/%d/limits", pid)
	return 0
}

// noOfflineLogDirs fails when a broker reports a log dir taken offline (a
// storage error: out of file descriptors, say): its replicas are gone and
// a figure measured over them would mean nothing.
func (s *scale) noOfflineLogDirs(after string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	d, err := s.admin.DescribeCluster(ctx)
	cancel()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, b := range d.GetBrokers() {
		for _, od := range b.GetOfflineLogDirs() {
			s.t.Fatalf("after %s, broker %d's log dir %s is offline: %s", after, b.GetNode().GetId(), od.GetPath(), od.GetError())
		}
	}
}

// leaderFailover kills (SIGKILL) the broker leading most partitions of
// topics and measures how long until each of them has another leader in
// the controller's view and in every surviving broker's metadata, and
// until an acks=all write to each of a sample of them succeeds. The broker
// is started again and the ISRs are full again before it returns.
func (s *scale) leaderFailover(topics []string) {
	s.t.Helper()
	ts, err := s.describe(topics, false)
	if err != nil {
		s.t.Fatal(err)
	}
	led := map[int32][]client.TopicPartition{}
	for _, td := range ts {
		for _, p := range td.GetPartitions() {
			led[p.GetLeader()] = append(led[p.GetLeader()], client.TopicPartition{Topic: td.GetName(), Partition: p.GetPartition()})
		}
	}
	victim := int32(1)
	for id, ps := range led {
		if len(ps) > len(led[victim]) {
			victim = id
		}
	}
	moved := led[victim]
	var sample []client.TopicPartition
	for i := 0; i < len(moved); i += len(moved) / 20 {
		sample = append(sample, moved[i])
	}
	// Warm the producer (connections and metadata), as a running client's.
	p, err := client.NewProducer(s.client, client.ProducerOptions{Acks: client.AcksAll, Idempotence: client.IdempotenceOff,
		Linger: -1, RequestTimeout: 5 * time.Second, DeliveryTimeout: 60 * time.Second})
	if err != nil {
		s.t.Fatal(err)
	}
	defer p.Close(context.Background())
	if err := s.produce(p, sample, "before"); err != nil {
		s.t.Fatalf("writing to the sample before the kill: %v", err)
	}

	name := brokerName(victim)
	n, err := s.cl.Node(name)
	if err != nil {
		s.t.Fatal(err)
	}
	start := time.Now()
	if err := n.Kill(); err != nil {
		s.t.Fatalf("kill %s: %v", name, err)
	}
	survivor := int32(1)
	if victim == 1 {
		survivor = 2
	}
	profiled := s.profile(brokerName(survivor), "leader-failover")
	defer profiled()
	var writes, firstWrite time.Duration
	var writeErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var first time.Time
		first, writeErr = s.produceTimed(p, sample, "after")
		writes, firstWrite = time.Since(start), first.Sub(start)
	}()
	isMoved := map[client.TopicPartition]bool{}
	for _, tp := range moved {
		isMoved[tp] = true
	}
	s.until(fmt.Sprintf("the %d partitions broker %d led with another leader in the controller's view", len(moved), victim), time.Minute, 20*time.Millisecond, func() (bool, string) {
		ts, err := s.describe(topics, false)
		if err != nil {
			return false, err.Error()
		}
		left := 0
		for _, td := range ts {
			for _, p := range td.GetPartitions() {
				if isMoved[client.TopicPartition{Topic: td.GetName(), Partition: p.GetPartition()}] && (p.GetLeader() <= 0 || p.GetLeader() == victim) {
					left++
				}
			}
		}
		return left == 0, fmt.Sprintf("%d still without a new leader after %s", left, round(time.Since(start)))
	})
	elected := time.Since(start)
	var survivors []int32
	for _, id := range s.brokerIDs() {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	known := s.untilEach("every surviving broker's metadata showing the new leaders", survivors, start, time.Minute, 20*time.Millisecond, func(id int32) (bool, string) {
		md, err := s.brokerMetadata(id, topics)
		if err != nil {
			return false, fmt.Sprintf("broker %d: %v", id, err)
		}
		for _, tm := range md.GetTopics() {
			for _, p := range tm.GetPartitions() {
				if isMoved[client.TopicPartition{Topic: tm.GetName(), Partition: p.GetPartition()}] && (p.GetLeader() <= 0 || p.GetLeader() == victim) {
					return false, fmt.Sprintf("broker %d still shows %s-%d led by %d", id, tm.GetName(), p.GetPartition(), p.GetLeader())
				}
			}
		}
		return true, ""
	})
	wg.Wait()
	if writeErr != nil {
		s.t.Fatalf("writing to %d of the moved partitions after the kill: %v", len(sample), writeErr)
	}
	s.logf("leader failover: broker %d killed (SIGKILL) while leading %d partitions: all re-elected after %s (goal < 5 s: %s); every surviving broker's metadata shows them after %s (goal < 5 s: %s); acks=all writes to %d of them succeeded after %s (goal < 5 s: %s; the first after %s)",
		victim, len(moved), round(elected), verdict(elected < 5*time.Second), round(known), verdict(known < 5*time.Second),
		len(sample), round(writes), verdict(writes < 5*time.Second), round(firstWrite))
	s.failoverPhases(start, victim, known+2*time.Second)

	if err := n.Start(); err != nil {
		s.t.Fatalf("start %s again: %v", name, err)
	}
	s.waitFullISR(topics, 2*time.Minute)
	s.noOfflineLogDirs(fmt.Sprintf("restarting broker %d", victim))
}

// produce writes one acks=all record to each partition of tps at once and
// waits for them all.
func (s *scale) produce(p *client.Producer, tps []client.TopicPartition, tag string) error {
	_, err := s.produceTimed(p, tps, tag)
	return err
}

// produceTimed is produce, also returning when the first write succeeded.
func (s *scale) produceTimed(p *client.Producer, tps []client.TopicPartition, tag string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 70*time.Second)
	defer cancel()
	errs := make([]error, len(tps))
	var mu sync.Mutex
	var first time.Time
	var wg sync.WaitGroup
	for i, tp := range tps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.Produce(ctx, client.Record{Topic: tp.Topic, Partition: tp.Partition, ManualPartition: true, Value: []byte(tag)})
			if errs[i] == nil {
				mu.Lock()
				if first.IsZero() {
					first = time.Now()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return first, fmt.Errorf("%s-%d: %w", tps[i].Topic, tps[i].Partition, err)
		}
	}
	return first, nil
}

// failoverPhases prints, from the node logs, when each step of a broker
// failover happened, counted from the kill at start: the active
// controller declaring the broker failed and writing the elections, and
// each surviving broker applying the controller's pushes (and how long
// each took to apply) until `until` after the kill.
func (s *scale) failoverPhases(start time.Time, victim int32, until time.Duration) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	d, err := s.admin.DescribeCluster(ctx)
	cancel()
	if err != nil {
		s.t.Fatal(err)
	}
	at := func(l logLine) string { return fmt.Sprintf("+%.2fs", l.at.Sub(start).Seconds()) }
	var ctrl []string
	decisions := 0
	var firstDecision logLine
	for _, l := range s.logLines(fmt.Sprintf("controller-%d", d.GetController().GetId()), start, until) {
		switch l.msg {
		case "Broker failure", "Broker session broke; declaring the broker dead unless it reconnects or answers a health check",
			"Broker did not reopen its session and its process is gone: declaring it dead now by revoking its registration lease":
			ctrl = append(ctrl, fmt.Sprintf("%q %s", l.msg, at(l)))
		case "Elected leader", "Removed replicas from ISR", "Partition offline: no live ISR member can lead; waiting for one to return":
			if decisions == 0 {
				firstDecision = l
			}
			decisions++
		}
	}
	if decisions > 0 {
		ctrl = append(ctrl, fmt.Sprintf("%d decisions written to etcd (first logged %s)", decisions, at(firstDecision)))
	}
	s.logf("leader failover phases, controller %d: %s", d.GetController().GetId(), strings.Join(ctrl, "; "))
	for _, id := range s.brokerIDs() {
		if id == victim {
			continue
		}
		var applied []string
		for _, l := range s.logLines(brokerName(id), start, until) {
			if kind, ok := strings.CutPrefix(l.msg, "Applied "); ok {
				took, _ := strconv.Atoi(l.attr("took_ms"))
				applied = append(applied, fmt.Sprintf("%s of %s partitions received +%.2fs applied %s",
					kind, l.attr("partitions"), l.at.Add(-time.Duration(took)*time.Millisecond).Sub(start).Seconds(), at(l)))
			}
		}
		s.logf("leader failover phases, broker %d: %s", id, strings.Join(applied, "; "))
	}
}

// controllerFailoverPhases prints, from the node logs, when controller
// now won the election and loaded the cluster, and when each broker
// applied its first pushes, counted from the kill at start.
func (s *scale) controllerFailoverPhases(start time.Time, now int32) {
	s.t.Helper()
	until := 30 * time.Second
	at := func(l logLine) string { return fmt.Sprintf("+%.2fs", l.at.Sub(start).Seconds()) }
	var ctrl []string
	for _, l := range s.logLines(fmt.Sprintf("controller-%d", now), start, until) {
		switch {
		case l.msg == "Won the controller election":
			ctrl = append(ctrl, "won the election "+at(l))
		case strings.HasPrefix(l.msg, "Controller elected: loaded the cluster"):
			ctrl = append(ctrl, fmt.Sprintf("loaded the cluster (%s) %s", l.attr("took"), at(l)))
		case strings.HasPrefix(l.msg, "Controller failover complete"):
			ctrl = append(ctrl, fmt.Sprintf("failover complete (all_delivered=%s) %s", l.attr("all_delivered"), at(l)))
		case l.msg == "broker unreachable; retrying":
			ctrl = append(ctrl, fmt.Sprintf("%s to broker %s resent (%s) %s", l.attr("request"), l.attr("broker_id"), l.attr("err"), at(l)))
		}
	}
	s.logf("controller failover phases, controller %d: %s", now, strings.Join(ctrl, "; "))
	for _, id := range s.brokerIDs() {
		var applied []string
		for _, l := range s.logLines(brokerName(id), start, until) {
			if kind, ok := strings.CutPrefix(l.msg, "Applied "); ok && len(applied) < 4 {
				took, _ := strconv.Atoi(l.attr("took_ms"))
				if l.attr("full") == "true" {
					kind += " (full)"
				}
				applied = append(applied, fmt.Sprintf("%s of %s partitions received +%.2fs applied %s",
					kind, l.attr("partitions"), l.at.Add(-time.Duration(took)*time.Millisecond).Sub(start).Seconds(), at(l)))
			}
		}
		s.logf("controller failover phases, broker %d: %s", id, strings.Join(applied, "; "))
	}
}

// profile, when TIDEMARK_BENCH_SCALE_PROFILE=1, records an 8 s CPU profile
// of node name from now into profiles/<phase>-<name>.pprof in the data dir
// (`go tool pprof` reads it); the returned func waits for it to be written.
func (s *scale) profile(name, phase string) (wait func()) {
	if os.Getenv("TIDEMARK_BENCH_SCALE_PROFILE") != "1" {
		return func() {}
	}
	n, err := s.cl.Node(name)
	if err != nil || n.ProfileAddr == "" {
		s.t.Logf("no profile of %s: %v", name, err)
		return func() {}
	}
	dir := filepath.Join(s.cl.Options().DataDir, "profiles")
	path := filepath.Join(dir, phase+"-"+name+".pprof")
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get("http://" + n.ProfileAddr + "/debug/pprof/profile?seconds=8")
		if err != nil {
			s.t.Logf("profile of %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			s.t.Logf("profile of %s: %v", name, err)
			return
		}
		s.t.Logf("CPU profile of %s during the %s: %s", name, phase, path)
	}()
	return func() { <-done }
}

// untilEach polls cond for every broker of ids on its own, each every
// `every` until it holds, and returns how long after start the last of
// them held, counted to the answer of the check that saw it: a slow
// answer from one busy broker does not hold back the checks of the others,
// as it did when one check went through every broker in turn. It fails the
// test after timeout.
func (s *scale) untilEach(what string, ids []int32, start time.Time, timeout, every time.Duration, cond func(id int32) (bool, string)) time.Duration {
	s.t.Helper()
	var mu sync.Mutex
	var latest time.Duration
	var failed []string
	var wg sync.WaitGroup
	deadline := time.Now().Add(timeout)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ok, last := cond(id)
				if ok {
					mu.Lock()
					latest = max(latest, time.Since(start))
					mu.Unlock()
					return
				}
				if time.Now().After(deadline) || s.ctx.Err() != nil {
					mu.Lock()
					failed = append(failed, last)
					mu.Unlock()
					return
				}
				select {
				case <-s.ctx.Done():
				case <-time.After(every):
				}
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		s.t.Fatalf("%s: not within %s (last: %s; node logs in %s)", what, timeout, strings.Join(failed, "; "), filepath.Join(s.cl.Options().DataDir, "logs"))
	}
	return latest
}

// logLine is one line of a node's text log.
type logLine struct {
	at   time.Time
	msg  string
	line string
}

// attr is the value of key=value in the line ("" when absent).
func (l logLine) attr(key string) string {
	i := strings.Index(l.line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := l.line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if q, err := strconv.QuotedPrefix(v); err == nil {
			u, _ := strconv.Unquote(q)
			return u
		}
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// logLines are node name's log lines from start to start+until.
func (s *scale) logLines(name string, start time.Time, until time.Duration) []logLine {
	b, err := os.ReadFile(s.env.Logs[name])
	if err != nil {
		s.t.Logf("reading %s's log: %v", name, err)
		return nil
	}
	var out []logLine
	for _, raw := range strings.Split(string(b), "\n") {
		l := logLine{line: raw}
		ts, ok := strings.CutPrefix(raw, "time=")
		if !ok {
			continue
		}
		if i := strings.IndexByte(ts, ' '); i >= 0 {
			ts = ts[:i]
		}
		if l.at, err = time.Parse(time.RFC3339Nano, ts); err != nil || l.at.Before(start) || l.at.Sub(start) > until {
			continue
		}
		l.msg = l.attr("msg")
		out = append(out, l)
	}
	return out
}

// controllerFailover kills (SIGKILL) the active controller and measures
// how long until another one answers as active with a newer epoch, and
// until every broker's metadata names it and shows all total partitions
// of topics led as the new controller has them.
func (s *scale) controllerFailover(topics []string, total int) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	before, err := s.admin.DescribeCluster(ctx)
	cancel()
	if err != nil {
		s.t.Fatal(err)
	}
	old, oldEpoch := before.GetController().GetId(), before.GetControllerEpoch()
	name := fmt.Sprintf("controller-%d", old)
	n, err := s.cl.Node(name)
	if err != nil {
		s.t.Fatal(err)
	}
	start := time.Now()
	if err := n.Kill(); err != nil {
		s.t.Fatalf("kill %s: %v", name, err)
	}
	profiled := s.profile(brokerName(1), "controller-failover")
	defer profiled()
	var now int32
	s.until(fmt.Sprintf("a controller other than %d answering with an epoch after %d", old, oldEpoch), time.Minute, 20*time.Millisecond, func() (bool, string) {
		ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
		d, err := s.admin.DescribeCluster(ctx)
		cancel()
		if err != nil {
			return false, err.Error()
		}
		now = d.GetController().GetId()
		return now > 0 && now != old && d.GetControllerEpoch() > oldEpoch, fmt.Sprintf("controller %d, epoch %d", now, d.GetControllerEpoch())
	})
	elected := time.Since(start)
	ts, err := s.describe(topics, false)
	if err != nil {
		s.t.Fatal(err)
	}
	want := map[client.TopicPartition]int32{}
	for _, td := range ts {
		for _, p := range td.GetPartitions() {
			want[client.TopicPartition{Topic: td.GetName(), Partition: p.GetPartition()}] = p.GetLeader()
		}
	}
	if len(want) != total {
		s.t.Fatalf("the new controller describes %d partitions of %v, want %d", len(want), topics, total)
	}
	converged := s.untilEach("every broker's metadata naming the new controller and showing every partition's leader", s.brokerIDs(), start, 2*time.Minute, 50*time.Millisecond, func(id int32) (bool, string) {
		md, err := s.brokerMetadata(id, topics)
		if err != nil {
			return false, fmt.Sprintf("broker %d: %v", id, err)
		}
		if c := md.GetController().GetId(); c != now {
			return false, fmt.Sprintf("broker %d names controller %d", id, c)
		}
		seen := 0
		for _, tm := range md.GetTopics() {
			for _, p := range tm.GetPartitions() {
				tp := client.TopicPartition{Topic: tm.GetName(), Partition: p.GetPartition()}
				if l := want[tp]; l <= 0 || p.GetLeader() != l {
					return false, fmt.Sprintf("broker %d shows %s-%d led by %d, the controller by %d", id, tp.Topic, tp.Partition, p.GetLeader(), l)
				}
				seen++
			}
		}
		if seen != total {
			return false, fmt.Sprintf("broker %d shows %d of %d partitions", id, seen, total)
		}
		return true, ""
	})
	var complete string
	s.until(fmt.Sprintf("controller %d logging its failover complete", now), time.Minute, 100*time.Millisecond, func() (bool, string) {
		complete = s.failoverLine(fmt.Sprintf("controller-%d", now))
		return complete != "", "no such line yet"
	})
	s.logf("controller failover with %d partitions (%d replicas, %d per broker): controller %d killed (SIGKILL), controller %d active after %s (goal < 5 s: %s; its lease TTL is 3 s); every broker converged after %s; its log: %q",
		total, 3*total, 3*total/len(s.env.Brokers), old, now, round(elected), verdict(elected < 5*time.Second), round(converged), complete)
	s.controllerFailoverPhases(start, now)
	if !slices.Contains([]int32{1, 2}, now) {
		s.t.Fatalf("controller id %d", now)
	}
}

// failoverLine is the new controller's "Controller failover complete" log
// line, or "".
func (s *scale) failoverLine(name string) string {
	b, err := os.ReadFile(s.env.Logs[name])
	if err != nil {
		return ""
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "failover complete") {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}
