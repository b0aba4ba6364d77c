// Package clustertest runs a whole tidemark cluster in one test process: a
// real embedded etcd, real controllers and real brokers over real gRPC on
// loopback with real logs on disk, the brokers' links to each other going
// through a network simulator. Tests crash, restart, partition and pause
// nodes and check what the protocol promises. The Kafka listener's tests
// against real Kafka clients are in kafkaclients, on the same cluster.
package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/client"
	"tidemark.io/services/clustertest/netsim"
	"tidemark.io/services/controller"
	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/metastore/etcdauth"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/logging"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
)

// Record is one record holding v, as a Produce request carries it.
func Record(v string) []*commonv1.Record {
	return []*commonv1.Record{{Value: []byte(v)}}
}

// Options shape a test cluster.
type Options struct {
	Brokers     int
	Controllers int
	// BrokerSettings are static broker configs for every broker.
	BrokerSettings map[string]string
	// Racks, when set, are given to brokers round robin.
	Racks []string
	// Adjust, when set, changes a broker's config before each start.
	Adjust func(*broker.Config)
	// AdjustController, when set, changes a controller's config before start.
	AdjustController func(*controller.Config)
	// PausableControllers gives each controller its own etcd bridge and
	// names its address in the network simulator, so that PauseController
	// can freeze it as SIGSTOP would.
	PausableControllers bool
	// Secure runs every gRPC link with mutual TLS: Start makes a CA and
	// certificates in Cluster.PKIDir for broker-N, controller-N and admin
	// (the test's own calls, a super user). Authorization follows the
	// nodes' defaults.
	Secure bool
	// SecureEtcd runs etcd with TLS, client-certificate authentication and
	// tidemark's roles on (see metastore/etcdauth); every node dials it
	// with its own certificate from PKIDir (etcd's and root's are there
	// too).
	SecureEtcd bool
	// Kafka gives every broker a Kafka wire protocol listener on a free
	// port (KafkaAddrs), kept across restarts.
	Kafka bool
}

// Cluster is a running test cluster.
type Cluster struct {
	T    testing.TB
	Net  *netsim.Network
	Etcd *etcdtest.Server
	// PKIDir holds the CA and certificates with Options.Secure or
	// SecureEtcd (issue more with pki.LoadCA(PKIDir)).
	PKIDir     string
	etcdSecure bool

	mu          sync.Mutex
	brokers     map[int32]*broker.Broker
	brokerCfg   map[int32]broker.Config
	controllers map[int32]*controller.Controller
	ctrlCfg     map[int32]controller.Config
	ctrlEtcd    map[int32]*etcdtest.Bridge // with PausableControllers
	conns       map[string]*grpc.ClientConn
	etcdLinks   map[int32]*etcdtest.Bridge
	// held are the listeners of the nodes' first starts, by node name
	// (see hold).
	held map[string]net.Listener
	log  *slog.Logger
	tls  tlsconf.Options // the test's own calls
}

// Start launches etcd, the controllers and the brokers, and waits until a
// controller is active and knows every broker.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.Controllers == 0 {
		o.Controllers = 2
	}
	etcdOpts := []etcdtest.Option{etcdtest.WithTimings(50*time.Millisecond, 500*time.Millisecond)}
	pkiDir := ""
	if o.Secure || o.SecureEtcd {
		pkiDir = t.TempDir()
	}
	if o.SecureEtcd {
		etcdOpts = append(etcdOpts, etcdtest.WithClientTLS(t, pkiDir, true))
	}
	c := &Cluster{
		T: t, Net: netsim.New(), PKIDir: pkiDir, etcdSecure: o.SecureEtcd,
		Etcd:    etcdtest.Start(t, etcdOpts...),
		brokers: map[int32]*broker.Broker{}, brokerCfg: map[int32]broker.Config{},
		controllers: map[int32]*controller.Controller{}, ctrlCfg: map[int32]controller.Config{},
		ctrlEtcd: map[int32]*etcdtest.Bridge{},
		conns:    map[string]*grpc.ClientConn{}, etcdLinks: map[int32]*etcdtest.Bridge{},
		held: map[string]net.Listener{},
	}
	c.log = logging.Discard()
	if os.Getenv("TIDEMARK_TEST_LOGS") != "" {
		c.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if o.SecureEtcd {
		c.secureEtcd(o)
	}
	c.tls = tlsconf.Plain()
	nodeTLS := func(string) tlsconf.Options { return tlsconf.Plain() }
	if o.Secure {
		leaves := []pki.Leaf{{Name: "admin"}}
		for id := int32(1); id <= int32(o.Controllers); id++ {
			leaves = append(leaves, pki.Leaf{Name: ControllerName(id)})
		}
		for id := int32(1); id <= int32(o.Brokers); id++ {
			leaves = append(leaves, pki.Leaf{Name: BrokerName(id)})
		}
		if _, err := pki.Ensure(c.PKIDir, leaves...); err != nil {
			t.Fatal(err)
		}
		c.tls = pki.Options(c.PKIDir, "admin")
		nodeTLS = func(name string) tlsconf.Options { return pki.Options(c.PKIDir, name) }
	}
	ep := c.Etcd.Endpoint()
	for id := int32(1); id <= int32(o.Controllers); id++ {
		cfg := controller.DefaultConfig()
		cfg.ID = id
		cfg.TLS = nodeTLS(ControllerName(id))
		cfg.Listen = c.hold(ControllerName(id))
		cfg.Etcd = c.EtcdAs(ControllerName(id), ep)
		cfg.SessionTTL = time.Second
		cfg.BrokerSessionGrace = 300 * time.Millisecond
		// Tests move leaderships on purpose and check where they went; a
		// test of the automatic rebalance turns it on (a term's first check
		// runs 5 s after it starts, whatever the interval).
		cfg.AutoLeaderRebalance = false
		cfg.Dialer = c.Net.Dialer(ControllerName(id))
		if o.PausableControllers {
			br := c.Etcd.NewBridge(t)
			c.ctrlEtcd[id] = br
			cfg.Etcd.Endpoints = config.StringList{br.Endpoint()}
			c.Net.Name(cfg.Listen, ControllerName(id))
		}
		if o.AdjustController != nil {
			o.AdjustController(&cfg)
		}
		c.Net.Name(cfg.Listen, ControllerName(id))
		c.ctrlCfg[id] = cfg
		c.StartController(id)
	}
	for id := int32(1); id <= int32(o.Brokers); id++ {
		cfg := broker.DefaultConfig()
		cfg.ID = id
		cfg.TLS = nodeTLS(BrokerName(id))
		cfg.Listen = c.hold(BrokerName(id))
		if o.Kafka {
			cfg.KafkaListen = c.hold(kafkaName(id))
		}
		cfg.DataDir = t.TempDir()
		// Each broker reaches etcd through its own bridge, so a test can
		// cut one broker off from etcd.
		c.etcdLinks[id] = c.Etcd.NewBridge(t)
		cfg.Etcd = c.EtcdAs(BrokerName(id), c.etcdLinks[id].Endpoint())
		cfg.SessionTimeout = 2 * time.Second
		cfg.Settings = maps.Clone(o.BrokerSettings)
		cfg.Dialer = c.Net.Dialer(BrokerName(id))
		if len(o.Racks) > 0 {
			cfg.Rack = o.Racks[int(id-1)%len(o.Racks)]
		}
		if o.Adjust != nil {
			o.Adjust(&cfg)
		}
		c.Net.Name(cfg.Listen, BrokerName(id))
		c.brokerCfg[id] = cfg
		c.StartBroker(id)
	}
	t.Cleanup(c.shutdown)
	c.WaitFor(20*time.Second, "every broker and controller registered with the active controller", func() bool {
		resp, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		alive := 0
		for _, b := range resp.GetBrokers() {
			if b.GetAlive() {
				alive++
			}
		}
		if alive != o.Brokers || len(resp.GetControllers()) != o.Controllers {
			return false
		}
		// And each broker has been told the cluster's metadata (a push
		// that raced its registration is retried a moment later).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for id := int32(1); id <= int32(o.Brokers); id++ {
			if _, err := c.BrokerClient(id).Metadata(ctx, &brokerv1.MetadataRequest{}); err != nil {
				return false
			}
		}
		return true
	})
	return c
}

// BrokerName is a broker's node name in the network simulator.
func BrokerName(id int32) string { return "broker-" + strconv.Itoa(int(id)) }

// ControllerName is a controller's node name in the network simulator: its
// own connections to brokers always go through it; connections to it only
// with PausableControllers.
func ControllerName(id int32) string { return "controller-" + strconv.Itoa(int(id)) }

// PauseController freezes controller id as SIGSTOP would (it needs
// PausableControllers): its etcd traffic and every connection dialled to it
// through the network simulator (brokers', and those of a client given
// Net.Dialer) stall without closing, so its lease runs out and a standby
// takes office. Its own calls to brokers are not held; having lost its
// lease it steps down and makes none that count.
func (c *Cluster) PauseController(id int32) {
	c.T.Helper()
	br, ok := c.ctrlEtcd[id]
	if !ok {
		c.T.Fatalf("PauseController(%d) needs Options.PausableControllers", id)
	}
	c.Net.Pause(ControllerName(id))
	br.Pause()
}

// ResumeController lets a paused controller run again.
func (c *Cluster) ResumeController(id int32) {
	if br, ok := c.ctrlEtcd[id]; ok {
		br.Resume()
		c.Net.Resume(ControllerName(id))
	}
}

// ControllerEtcdLink is controller id's connection to etcd (it needs
// PausableControllers): Pause holds its etcd traffic alone, where
// PauseController also stalls the connections dialled to it.
func (c *Cluster) ControllerEtcdLink(id int32) *etcdtest.Bridge { return c.ctrlEtcd[id] }

// EtcdLink is broker id's connection to etcd: Pause holds its traffic (a
// partition from etcd), Resume lets it through again.
func (c *Cluster) EtcdLink(id int32) *etcdtest.Bridge { return c.etcdLinks[id] }

// hold binds a free loopback port below the ephemeral range for the first
// start of node name and returns its address. The node starts on the open
// listener (see takeHeld), so no other process can take the port between
// the pick and the bind; a node restarted later binds its address again
// itself, which the range keeps free of outbound connections (see
// platform/loopback).
func (c *Cluster) hold(name string) string {
	c.T.Helper()
	l, err := loopback.Listen()
	if err != nil {
		c.T.Fatal(err)
	}
	c.mu.Lock()
	c.held[name] = l
	c.mu.Unlock()
	return l.Addr().String()
}

// takeHeld returns the listener held for node name's first start when it
// is still on addr (an Adjust may have moved the node), nil otherwise; it
// is given out once.
func (c *Cluster) takeHeld(name, addr string) net.Listener {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.held[name]
	delete(c.held, name)
	if l != nil && l.Addr().String() != addr {
		_ = l.Close()
		return nil
	}
	return l
}

func kafkaName(id int32) string { return BrokerName(id) + "/kafka" }

// freeAddr is a free loopback address below the ephemeral port range, so a
// node restarted on it finds it free again (see platform/loopback).
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func (c *Cluster) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.Net.HealAll()
	c.mu.Lock()
	brokers := maps.Clone(c.brokers)
	ctrls := maps.Clone(c.controllers)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range brokers {
		wg.Add(1)
		go func() { defer wg.Done(); b.Crash() }()
	}
	wg.Wait()
	for _, ct := range ctrls {
		_ = ct.Stop(ctx)
	}
	for _, conn := range c.conns {
		conn.Close()
	}
	c.mu.Lock()
	for _, l := range c.held { // nodes that never started
		_ = l.Close()
	}
	c.mu.Unlock()
}

// StartBroker (re)starts broker id on its address and data directory.
func (c *Cluster) StartBroker(id int32) *broker.Broker {
	c.T.Helper()
	cfg, _ := c.brokerConfig(id)
	cfg.Listener = c.takeHeld(BrokerName(id), cfg.Listen)
	cfg.KafkaListener = c.takeHeld(kafkaName(id), cfg.KafkaListen)
	held := cfg.Listener != nil || cfg.KafkaListener != nil || cfg.KafkaNamedListeners != nil
	b := startOnce(c.T, fmt.Sprintf("start broker %d", id), held, func() (*broker.Broker, error) {
		return broker.Start(context.Background(), cfg, c.log.With("node", BrokerName(id)))
	})
	c.mu.Lock()
	c.brokers[id] = b
	// Named Kafka listeners an Adjust bound serve the first start only: a
	// restart binds the same addresses (--kafka.listeners) itself.
	if stored := c.brokerCfg[id]; stored.KafkaNamedListeners != nil {
		stored.KafkaNamedListeners = nil
		c.brokerCfg[id] = stored
	}
	c.mu.Unlock()
	return b
}

// BrokerIDs are the ids of the cluster's brokers, running or not, in order.
func (c *Cluster) BrokerIDs() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.brokerCfg))
}

// MoveBroker gives stopped broker id a new listen address for its next
// start, as a broker restarted on another port.
func (c *Cluster) MoveBroker(id int32) string {
	c.mu.Lock()
	cfg := c.brokerCfg[id]
	cfg.Listen = freeAddr(c.T)
	c.brokerCfg[id] = cfg
	c.mu.Unlock()
	c.Net.Name(cfg.Listen, BrokerName(id))
	return cfg.Listen
}

// startOnce starts a node: once on the listener held for its first start
// (Start closes it when it fails, so it cannot be tried again), otherwise
// retrying for a few seconds, as a crashed node's port may linger briefly
// before it can be bound again.
func startOnce[T any](t testing.TB, what string, held bool, start func() (T, error)) T {
	t.Helper()
	if !held {
		return startRetrying(t, what, start)
	}
	v, err := start()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// startRetrying retries a node's start for a few seconds: a crashed node's
// port may linger briefly before it can be bound again.
func startRetrying[T any](t testing.TB, what string, start func() (T, error)) T {
	t.Helper()
	var v T
	var err error
	for i := 0; i < 100; i++ {
		if v, err = start(); err == nil {
			return v
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
	return v
}

// WaitBrokerAlive waits until the active controller counts broker id
// alive. A restarted broker registers only once its previous lease is
// gone, and until then an assignment naming it is refused as naming an
// unknown broker.
func (c *Cluster) WaitBrokerAlive(id int32) {
	c.T.Helper()
	c.WaitFor(15*time.Second, fmt.Sprintf("broker %d registered with the controller", id), func() bool {
		dc, err := c.Admin().DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
		if err != nil {
			return false
		}
		for _, b := range dc.GetBrokers() {
			if b.GetNode().GetId() == id {
				return b.GetAlive()
			}
		}
		return false
	})
}

// CrashBroker kills broker id as kill -9 would: no controlled shutdown, no
// final checkpoint, its registration left to expire.
func (c *Cluster) CrashBroker(id int32) {
	c.mu.Lock()
	b := c.brokers[id]
	delete(c.brokers, id)
	c.mu.Unlock()
	b.Crash()
}

// StopBroker stops broker id gracefully (controlled shutdown first).
func (c *Cluster) StopBroker(id int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.StopBrokerWithin(ctx, id)
}

// StopBrokerWithin stops broker id gracefully within ctx: an error when
// the stop did not finish before ctx ended (a flush that waited it out).
func (c *Cluster) StopBrokerWithin(ctx context.Context, id int32) error {
	c.mu.Lock()
	b := c.brokers[id]
	delete(c.brokers, id)
	c.mu.Unlock()
	return b.Stop(ctx)
}

// KafkaAddrs are the Kafka listener addresses of every configured broker
// (running or not), for Kafka clients' seed lists.
func (c *Cluster) KafkaAddrs() []string {
	var out []string
	for id := int32(1); ; id++ {
		cfg, ok := c.brokerConfig(id)
		if !ok {
			return out
		}
		if cfg.KafkaListen != "" {
			out = append(out, cfg.KafkaListen)
		}
	}
}

// Client returns a Go client bootstrapping from every broker, closed when
// the test ends.
func (c *Cluster) Client() *client.Client {
	c.T.Helper()
	return c.ClientWith(client.Options{})
}

// ClientWith is Client with options of the test's own (its TLS is the
// cluster's).
func (c *Cluster) ClientWith(o client.Options) *client.Client {
	c.T.Helper()
	var boot []string
	c.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(c.brokerCfg)) {
		boot = append(boot, c.brokerCfg[id].Listen)
	}
	c.mu.Unlock()
	tc, err := c.tls.ClientOrNil()
	if err != nil {
		c.T.Fatal(err)
	}
	o.TLS = tc
	cl, err := client.New(boot, o)
	if err != nil {
		c.T.Fatal(err)
	}
	c.T.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Broker returns a running broker.
func (c *Cluster) Broker(id int32) *broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[id]
}

// ReplicaISR is the committed ISR of topic-p as broker id's own replica
// holds it (ok=false when the broker is down or does not host it). The
// controller's view runs ahead of a leader's: a test that needs the leader
// to act on a shrunk ISR waits for this, not for DescribeTopics.
func (c *Cluster) ReplicaISR(id int32, topic string, p int32) ([]int32, bool) {
	b := c.Broker(id)
	if b == nil {
		return nil, false
	}
	for _, r := range b.Replicas().Replicas() {
		if tp := r.TP(); tp.Topic == topic && tp.Partition == p {
			return r.Snapshot(time.Now()).ISR, true
		}
	}
	return nil, false
}

// StartController (re)starts controller id.
func (c *Cluster) StartController(id int32) *controller.Controller {
	c.T.Helper()
	cfg := c.ctrlCfg[id]
	cfg.Listener = c.takeHeld(ControllerName(id), cfg.Listen)
	ct := startOnce(c.T, fmt.Sprintf("start controller %d", id), cfg.Listener != nil, func() (*controller.Controller, error) {
		return controller.Start(context.Background(), cfg, c.log.With("node", "controller-"+strconv.Itoa(int(id))))
	})
	c.mu.Lock()
	c.controllers[id] = ct
	c.mu.Unlock()
	return ct
}

// StopController stops controller id.
func (c *Cluster) StopController(id int32) {
	c.mu.Lock()
	ct := c.controllers[id]
	delete(c.controllers, id)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = ct.Stop(ctx)
}

// ActiveController returns the active controller's id and epoch, or -1.
func (c *Cluster) ActiveController() (int32, int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, ct := range c.controllers {
		if e, ok := ct.Active(); ok {
			return id, e
		}
	}
	return -1, 0
}

// Conn is the cluster's shared connection to addr.
func (c *Cluster) Conn(addr string) *grpc.ClientConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[addr]; ok {
		return conn
	}
	creds, err := c.tls.DialOption()
	if err != nil {
		c.T.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, creds)
	if err != nil {
		c.T.Fatal(err)
	}
	c.conns[addr] = conn
	return conn
}

// Admin returns an AdminService client on the active controller (the first
// controller when none is active yet).
func (c *Cluster) Admin() adminv1.AdminServiceClient {
	id, _ := c.ActiveController()
	if id < 0 {
		id = 1
	}
	return adminv1.NewAdminServiceClient(c.Conn(c.ctrlCfg[id].Listen))
}

// BrokerClient returns a BrokerService client on broker id.
func (c *Cluster) BrokerClient(id int32) brokerv1.BrokerServiceClient {
	cfg, _ := c.brokerConfig(id)
	return brokerv1.NewBrokerServiceClient(c.Conn(cfg.Listen))
}

// BrokerConfig returns the config broker id starts with.
func (c *Cluster) BrokerConfig(id int32) broker.Config {
	cfg, _ := c.brokerConfig(id)
	return cfg
}

// SetBrokerConfig replaces the config broker id starts with on its next
// StartBroker (a crashed broker brought back with other settings).
func (c *Cluster) SetBrokerConfig(id int32, cfg broker.Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.brokerCfg[id] = cfg
}

// TakeBroker takes running broker id out of the cluster's hands and
// returns it, for a test that stops it itself (as lifecycle.WaitAndStop
// does on SIGTERM): the cluster no longer stops or crashes it.
func (c *Cluster) TakeBroker(id int32) *broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.brokers[id]
	delete(c.brokers, id)
	return b
}

// SetLog sends the logs of the nodes started from now on to l.
func (c *Cluster) SetLog(l *slog.Logger) { c.log = l }

// brokerConfig reads broker id's config under the cluster's lock: a
// restart writes it back (StartBroker, MoveBroker) while a test's
// producers look brokers up.
func (c *Cluster) brokerConfig(id int32) (broker.Config, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg, ok := c.brokerCfg[id]
	return cfg, ok
}

// CreateTopic creates a topic through the active controller and waits until
// every partition has a leader.
func (c *Cluster) CreateTopic(name string, partitions, rf int32, configs map[string]string) {
	c.T.Helper()
	resp, err := c.Admin().CreateTopics(context.Background(), &adminv1.CreateTopicsRequest{
		Topics: []*adminv1.TopicSpec{{Name: name, NumPartitions: partitions, ReplicationFactor: rf, Configs: configs}}})
	if err != nil {
		c.T.Fatalf("create %s: %v", name, err)
	}
	if r := resp.GetResults()[0]; r.GetErrorCode() != 0 {
		c.T.Fatalf("create %s: %s", name, r.GetErrorMessage())
	}
	c.WaitFor(10*time.Second, "leaders for "+name, func() bool {
		for p := int32(0); p < partitions; p++ {
			if !c.Leads(c.Partition(name, p).GetLeader(), name, p) {
				return false
			}
		}
		return true
	})
	c.WaitAnnounced(name, partitions)
}

// WaitAnnounced waits, best effort, until every running broker hosts its
// replicas of a topic just created with partitions partitions and every
// broker's metadata shows them all. The followers apply the same
// LeaderAndIsr a little after the leaders, and every broker learns the
// topic with the UpdateMetadata after it; a test that looks at a follower
// next, or calls a broker about the topic (a group coordinator refuses
// commits of a topic it does not know, a Kafka script's Metadata finds no
// such topic), would race them. A broker cut off on purpose never gets
// them, and the test goes on after a while.
func (c *Cluster) WaitAnnounced(name string, partitions int32) {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && !(c.followersHost(name, partitions) && c.announced(name, partitions)); {
		time.Sleep(10 * time.Millisecond)
	}
}

// announced reports whether every running broker's metadata shows all of
// the topic's partitions.
func (c *Cluster) announced(name string, partitions int32) bool {
	for id := range c.brokerCfg {
		if c.Broker(id) == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := c.BrokerClient(id).Metadata(ctx, &brokerv1.MetadataRequest{Topics: []string{name}})
		cancel()
		if err != nil || len(resp.GetTopics()) != 1 || len(resp.GetTopics()[0].GetPartitions()) != int(partitions) {
			return false
		}
	}
	return true
}

// followersHost reports whether every running broker assigned a replica of
// the topic's partitions hosts it.
func (c *Cluster) followersHost(name string, partitions int32) bool {
	for p := int32(0); p < partitions; p++ {
		for _, id := range c.Partition(name, p).GetReplicas() {
			if b := c.Broker(id); b != nil {
				if _, _, ok := b.ReplicaOffsets(name, p); !ok {
					return false
				}
			}
		}
	}
	return true
}

// Leads reports whether broker id is running and acting as the leader of
// the partition (it has applied the controller's decision).
func (c *Cluster) Leads(id int32, topic string, p int32) bool {
	b := c.Broker(id)
	if b == nil {
		return false
	}
	return b.IsLeader(topic, p)
}

// Partition describes a partition as the active controller knows it.
func (c *Cluster) Partition(topic string, p int32) *adminv1.PartitionDescription {
	resp, err := c.Admin().DescribeTopics(context.Background(), &adminv1.DescribeTopicsRequest{Topics: []string{topic}})
	if err != nil || len(resp.GetTopics()) == 0 {
		return &adminv1.PartitionDescription{Leader: -1}
	}
	for _, pd := range resp.GetTopics()[0].GetPartitions() {
		if pd.GetPartition() == p {
			return pd
		}
	}
	return &adminv1.PartitionDescription{Leader: -1}
}

// Leader is the partition's leader as the controller describes it, waited
// for (up to 15 s) when the description fails or names none: right after a
// topic is created, a loaded machine may delay the controller's answer or
// move the leadership while a broker's session flaps, and a test that took
// -1 for a broker id failed far from the cause.
func (c *Cluster) Leader(topic string, p int32) int32 {
	c.T.Helper()
	var leader int32 = -1
	c.WaitFor(15*time.Second, fmt.Sprintf("a leader of %s-%d", topic, p), func() bool {
		leader = c.Partition(topic, p).GetLeader()
		_, known := c.brokerConfig(leader)
		return known
	})
	return leader
}

// WaitFor polls cond until it holds or fails the test after timeout.
func (c *Cluster) WaitFor(timeout time.Duration, what string, cond func() bool) {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.T.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Produce sends one record to the partition's leader once (the leader as
// the controller describes it).
func (c *Cluster) Produce(ctx context.Context, topic string, p int32, acks int32, value string) (int64, error) {
	leader := c.Partition(topic, p).GetLeader()
	if leader < 0 {
		return 0, kerr.New(kerr.LeaderNotAvailable, "%s-%d has no leader", topic, p)
	}
	resp, err := c.BrokerClient(leader).Produce(ctx, &brokerv1.ProduceRequest{Topic: topic, Partition: p, Acks: acks, TimeoutMs: 5000,
		Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: Record(value)}}})
	if err != nil {
		return 0, kerr.FromStatus(err)
	}
	return resp.GetBaseOffset(), nil
}

// Values reads every record of a replica's log (not bounded by the HW)
// directly from broker id's log, in order.
func (c *Cluster) Values(id int32, topic string, p int32) []string {
	c.T.Helper()
	b := c.Broker(id)
	if b == nil {
		c.T.Fatalf("broker %d is not running", id)
	}
	vals, err := b.ReadLog(topic, p)
	if err != nil {
		c.T.Fatalf("read broker %d's log: %v", id, err)
	}
	return vals
}

// WaitHWAtLEO waits until every given broker's replica of a partition has
// HW = LEO, the same LEO on all: the partition is whole and quiet.
func (c *Cluster) WaitHWAtLEO(topic string, p int32, ids ...int32) {
	c.T.Helper()
	c.WaitFor(15*time.Second, fmt.Sprintf("HW = LEO on replicas %v of %s-%d", ids, topic, p), func() bool {
		var leo int64
		for i, id := range ids {
			hw, end, ok := c.Broker(id).ReplicaOffsets(topic, p)
			if !ok || hw != end || (i > 0 && end != leo) {
				return false
			}
			leo = end
		}
		return true
	})
}

// SameLogs waits until the given brokers hold identical logs of a partition
// and returns them.
func (c *Cluster) SameLogs(topic string, p int32, ids ...int32) []string {
	c.T.Helper()
	var want []string
	c.WaitFor(15*time.Second, fmt.Sprintf("replicas %v of %s-%d to converge", ids, topic, p), func() bool {
		want = c.Values(ids[0], topic, p)
		for _, id := range ids[1:] {
			if fmt.Sprint(c.Values(id, topic, p)) != fmt.Sprint(want) {
				return false
			}
		}
		return true
	})
	return want
}

// secureEtcd issues the certificates of o's nodes and admin, and sets up
// etcd's users and roles as root, which turns auth on.
func (c *Cluster) secureEtcd(o Options) {
	c.T.Helper()
	leaves := []pki.Leaf{{Name: etcdauth.RootUser}, {Name: "admin"}}
	plan := etcdauth.Plan{Prefix: metastore.DefaultPrefix, Admins: []string{"admin"}}
	for id := int32(1); id <= int32(o.Brokers); id++ {
		leaves = append(leaves, pki.Leaf{Name: BrokerName(id)})
		plan.Brokers = append(plan.Brokers, id)
	}
	for id := int32(1); id <= int32(o.Controllers); id++ {
		leaves = append(leaves, pki.Leaf{Name: ControllerName(id)})
		plan.Controllers = append(plan.Controllers, id)
	}
	if _, err := pki.Ensure(c.PKIDir, leaves...); err != nil {
		c.T.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	root, err := c.EtcdAs(etcdauth.RootUser, c.Etcd.Endpoint()).Dial(ctx)
	if err != nil {
		c.T.Fatal(err)
	}
	defer root.Close()
	if err := etcdauth.Setup(ctx, root, plan); err != nil {
		c.T.Fatal(err)
	}
}

// EtcdAs is how name dials etcd at endpoint: with name's certificate in a
// SecureEtcd cluster, plaintext otherwise.
func (c *Cluster) EtcdAs(name, endpoint string) etcdconn.Options {
	o := etcdconn.Defaults()
	o.Endpoints = config.StringList{endpoint}
	if c.etcdSecure {
		o.CA, o.Cert, o.Key = pki.CAPath(c.PKIDir), pki.CertPath(c.PKIDir, name), pki.KeyPath(c.PKIDir, name)
	}
	return o
}
