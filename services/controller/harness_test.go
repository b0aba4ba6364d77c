package controller

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/tlsconf"
)

// Test timings: 1 s leases (etcdtest's minimum) keep failovers short.
const (
	ctrlTTL   = time.Second
	brokerTTL = 4 * time.Second
)

// logBuffer collects every log line of a test's controllers; it is printed
// when the test fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// count reports how many lines contain all of the given parts.
func (l *logBuffer) count(parts ...string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all && line != "" {
			n++
		}
	}
	return n
}

// cluster is an etcd, some controllers and some fake brokers.
type cluster struct {
	t       *testing.T
	etcd    *etcdtest.Server
	store   *metastore.Store
	logs    *logBuffer
	ctrls   []*testController
	brokers map[int32]*fakeBroker
}

func newCluster(t *testing.T, opts ...etcdtest.Option) *cluster {
	t.Helper()
	srv := etcdtest.Start(t, opts...)
	store, err := metastore.New(srv.Client(t), metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, etcd: srv, store: store, logs: &logBuffer{}, brokers: map[int32]*fakeBroker{}}
	// TIDEMARK_TEST_LOGS=1 prints the logs of passing tests too.
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("TIDEMARK_TEST_LOGS") != "" {
			t.Logf("controller logs:\n%s", c.logs.String())
		}
	})
	return c
}

// testController is a controller whose etcd traffic goes through its own
// bridge, so a test can pause it or cut it off.
type testController struct {
	*Controller
	bridge *etcdtest.Bridge
}

// kill plays kill -9: the etcd connection is cut first, so nothing is
// resigned or revoked and the leases run out on their own; then the
// process's goroutines and server stop.
func (tc *testController) kill() {
	tc.bridge.Close()
	tc.crash()
}

// startController starts controller id with test timings; mods adjust its
// config.
func (c *cluster) startController(id int32, mods ...func(*Config)) *testController {
	c.t.Helper()
	br := c.etcd.NewBridge(c.t)
	cfg := DefaultConfig()
	cfg.TLS = tlsconf.Plain()
	cfg.ID = id
	cfg.Listen = "127.0.0.1:0"
	cfg.Etcd.Endpoints = []string{br.Endpoint()}
	cfg.SessionTTL = ctrlTTL
	cfg.BrokerSessionGrace = 600 * time.Millisecond
	cfg.RequestTimeout = 2 * time.Second
	cfg.Log.Level = "debug"
	for _, m := range mods {
		m(&cfg)
	}
	log := slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
	ctl, err := Start(context.Background(), cfg, log)
	if err != nil {
		c.t.Fatalf("start controller %d: %v", id, err)
	}
	c.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ctl.Stop(ctx)
	})
	tc := &testController{Controller: ctl, bridge: br}
	c.ctrls = append(c.ctrls, tc)
	return tc
}

// waitActive waits for ctl to hold the controller role and to have pushed
// its state, and returns its epoch.
func (c *cluster) waitActive(ctl *testController, within time.Duration) int32 {
	c.t.Helper()
	var epoch int32
	eventually(c.t, within, "controller "+fmt.Sprint(ctl.cfg.ID)+" active with its state pushed", func() bool {
		a := ctl.office.current()
		if a == nil {
			return false
		}
		select {
		case <-a.Pushed():
			epoch = a.Epoch()
			return true
		default:
			return false
		}
	})
	return epoch
}

func (c *cluster) startBroker(id int32, rack string) *fakeBroker {
	c.t.Helper()
	b := startBroker(c.t, c.etcd.Endpoint(), id, rack, brokerTTL)
	c.brokers[id] = b
	return b
}

// startBrokers starts brokers 1..n and waits until the active controller
// ctl knows them all.
func (c *cluster) startBrokers(ctl *testController, n int) {
	c.t.Helper()
	for id := int32(1); id <= int32(n); id++ {
		c.startBroker(id, "")
	}
	eventually(c.t, 5*time.Second, "brokers registered at the controller", func() bool {
		resp, err := c.admin(ctl).DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		alive := 0
		for _, b := range resp.GetBrokers() {
			if b.GetAlive() {
				alive++
			}
		}
		return alive == n
	})
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func (c *cluster) admin(ctl *testController) adminv1.AdminServiceClient {
	return adminv1.NewAdminServiceClient(dial(c.t, ctl.Addr()))
}

func (c *cluster) control(ctl *testController) controlv1.ControllerServiceClient {
	return controlv1.NewControllerServiceClient(dial(c.t, ctl.Addr()))
}

// createTopic creates a topic with an explicit assignment and fails the
// test on any error.
func (c *cluster) createTopic(ctl *testController, name string, assignment [][]int32, configs map[string]string) {
	c.t.Helper()
	spec := &adminv1.TopicSpec{Name: name, Configs: configs}
	for p, reps := range assignment {
		spec.Assignments = append(spec.Assignments, &adminv1.ReplicaAssignment{Partition: int32(p), Replicas: reps})
	}
	resp, err := c.admin(ctl).CreateTopics(ctx(c.t), &adminv1.CreateTopicsRequest{Topics: []*adminv1.TopicSpec{spec}, TimeoutMs: 5000})
	if err != nil {
		c.t.Fatalf("create topic %s: %v", name, err)
	}
	if r := resp.GetResults()[0]; r.GetErrorCode() != 0 {
		c.t.Fatalf("create topic %s: %v %s", name, r.GetErrorCode(), r.GetErrorMessage())
	}
}

// state reads a partition's state from etcd.
func (c *cluster) state(topic string, p int32) metastore.PartitionState {
	c.t.Helper()
	rec, err := c.store.PartitionState(ctx(c.t), topic, p)
	if err != nil {
		c.t.Fatalf("read %s-%d: %v", topic, p, err)
	}
	return rec.State
}

// waitState waits until a partition's state in etcd satisfies cond.
func (c *cluster) waitState(topic string, p int32, within time.Duration, what string, cond func(metastore.PartitionState) bool) metastore.PartitionState {
	c.t.Helper()
	var s metastore.PartitionState
	eventually(c.t, within, fmt.Sprintf("%s-%d: %s", topic, p, what), func() bool {
		rec, err := c.store.PartitionState(context.Background(), topic, p)
		s = rec.State
		return err == nil && cond(s)
	})
	return s
}

// eventually polls cond every 10 ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ctx bounds one call.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// detail extracts the ErrorDetail a tidemark service answered with.
func detail(t testing.TB, err error) *kerr.Error {
	t.Helper()
	if err == nil {
		t.Fatal("call succeeded; want an error")
	}
	return kerr.FromStatus(err)
}

func wantCode(t testing.TB, got commonv1.ErrorCode, want kerr.Code, msg string) {
	t.Helper()
	if kerr.Code(got) != want {
		t.Fatalf("%s: code %v, want %v", msg, kerr.Code(got), want)
	}
}

// samples returns a metric's samples in the controller's Prometheus
// registry; false when it is not registered.
func samples(t testing.TB, ctl *testController, name string) ([]*dto.Metric, bool) {
	t.Helper()
	mfs, err := ctl.tel.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric(), true
		}
	}
	return nil, false
}

// metric sums a metric's samples; -1 when it is not registered.
func metric(t testing.TB, ctl *testController, name string) float64 {
	t.Helper()
	ms, ok := samples(t, ctl, name)
	if !ok {
		return -1
	}
	var sum float64
	for _, m := range ms {
		sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return sum
}

// labelled is a counter's sample with label = value; 0 when absent.
func labelled(t testing.TB, ctl *testController, name, label, value string) float64 {
	t.Helper()
	ms, _ := samples(t, ctl, name)
	for _, m := range ms {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
