package devcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"

	"tidemark.io/services/metastore"
	"tidemark.io/services/metastore/embedded"
	"tidemark.io/services/metastore/etcdauth"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/pki"
)

// PKIDir holds the cluster's CA and certificates: etcd, root, admin,
// gateway, broker-N and controller-N (see services/platform/pki).
func (o Options) PKIDir() string { return filepath.Join(o.DataDir, "pki") }

// AdminUser is the certificate the CLI reads etcd with
// (`tidemark metadata dump --etcd-tls-cert <data>/pki/admin.pem ...`).
const AdminUser = "admin"

// leaves are the certificates of o's cluster.
func (o Options) leaves() []pki.Leaf {
	leaves := []pki.Leaf{{Name: "etcd"}, {Name: etcdauth.RootUser}, {Name: AdminUser}, {Name: "gateway"}}
	for i := 1; i <= o.Brokers; i++ {
		leaves = append(leaves, pki.Leaf{Name: etcdauth.BrokerUser(int32(i))})
	}
	for i := 1; i <= o.Controllers; i++ {
		leaves = append(leaves, pki.Leaf{Name: etcdauth.ControllerUser(int32(i))})
	}
	return leaves
}

// EtcdAs is how name (a certificate in PKIDir) dials the cluster's etcd.
func (o Options) EtcdAs(name string) etcdconn.Options {
	e := etcdconn.Defaults()
	e.Endpoints = []string{o.withPorts().EtcdClient}
	if !o.PlaintextEtcd {
		dir := o.PKIDir()
		e.CA, e.Cert, e.Key = pki.CAPath(dir), pki.CertPath(dir, name), pki.KeyPath(dir, name)
	}
	return e
}

// startEtcd starts the embedded etcd and, unless PlaintextEtcd, makes the
// certificates it needs and turns its authentication on with a user per
// node (etcdauth.Setup, as root; idempotent on a restart).
func (o Options) startEtcd(ctx context.Context) (*embedded.Server, error) {
	cfg := embedded.Config{
		Dir:       filepath.Join(o.DataDir, "etcd"),
		ClientURL: "http://" + o.EtcdClient,
		PeerURL:   "http://127.0.0.1:0",
		// One hour of history, as the compose stack keeps (deploy/compose.yml).
		CompactionRetention: time.Hour,
	}
	if !o.PlaintextEtcd {
		dir := o.PKIDir()
		if _, err := pki.Ensure(dir, o.leaves()...); err != nil {
			return nil, fmt.Errorf("certificates in %s: %w", dir, err)
		}
		cfg.ClientURL = "https://" + o.EtcdClient
		cfg.ClientTLS = &embedded.TLS{CA: pki.CAPath(dir), Cert: pki.CertPath(dir, "etcd"), Key: pki.KeyPath(dir, "etcd"), ClientCertAuth: true}
	}
	etcd, err := embedded.Start(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd on %s: %w", o.EtcdClient, err)
	}
	if o.PlaintextEtcd {
		return etcd, nil
	}
	if err := o.setupEtcdAuth(ctx); err != nil {
		etcd.Close()
		return nil, err
	}
	return etcd, nil
}

func (o Options) setupEtcdAuth(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	root, err := o.EtcdAs(etcdauth.RootUser).Dial(ctx)
	if err != nil {
		return fmt.Errorf("etcd auth setup: %w", err)
	}
	defer root.Close()
	plan := etcdauth.Plan{Prefix: metastore.DefaultPrefix, Admins: []string{AdminUser}}
	for i := 1; i <= o.Brokers; i++ {
		plan.Brokers = append(plan.Brokers, int32(i))
	}
	for i := 1; i <= o.Controllers; i++ {
		plan.Controllers = append(plan.Controllers, int32(i))
	}
	if err := etcdauth.Setup(ctx, root, plan); err != nil {
		return fmt.Errorf("etcd auth setup: %w", err)
	}
	return nil
}

// EtcdNode is the name of the embedded etcd in the control API.
const EtcdNode = "etcd"

// etcdProto describes the embedded etcd as a node of the control API. It
// runs inside the launcher: no process of its own, no log file.
func (c *Cluster) etcdProto() *devclusterv1.DevNode {
	state := devclusterv1.NodeState_NODE_STATE_STOPPED
	if c.EtcdRunning() {
		state = devclusterv1.NodeState_NODE_STATE_RUNNING
	}
	return &devclusterv1.DevNode{Name: EtcdNode, Kind: "etcd", Address: c.opts.EtcdClient, State: state}
}

// EtcdRunning says whether the embedded etcd serves.
func (c *Cluster) EtcdRunning() bool {
	c.etcdMu.Lock()
	defer c.etcdMu.Unlock()
	return c.etcd != nil
}

// StopEtcd stops the embedded etcd as SIGTERM stops an etcd process: it
// refuses new calls at once, serves the streams open (watches, lease
// keepalives) for up to its request timeout (7 s), then closes every
// connection and its port. What it keeps on disk survives, leases included:
// when it starts again each has a whole TTL.
func (c *Cluster) StopEtcd() error {
	c.etcdMu.Lock()
	etcd := c.etcd
	c.etcd = nil
	c.etcdMu.Unlock()
	if etcd == nil {
		return fmt.Errorf("etcd is not running")
	}
	etcd.Close()
	return nil
}

// StartEtcd starts the embedded etcd again on its data and port.
func (c *Cluster) StartEtcd(ctx context.Context) error {
	c.etcdMu.Lock()
	defer c.etcdMu.Unlock()
	if c.etcd != nil {
		return fmt.Errorf("etcd is already running")
	}
	etcd, err := c.opts.startEtcd(ctx)
	if err != nil {
		return err
	}
	c.etcd = etcd
	return nil
}

// etcdAction applies a control API action to the embedded etcd.
func (c *Cluster) etcdAction(ctx context.Context, act devclusterv1.Action) error {
	switch act {
	case devclusterv1.Action_ACTION_STOP:
		return c.StopEtcd()
	case devclusterv1.Action_ACTION_START:
		return c.StartEtcd(ctx)
	case devclusterv1.Action_ACTION_RESTART:
		if c.EtcdRunning() {
			if err := c.StopEtcd(); err != nil {
				return err
			}
		}
		return c.StartEtcd(ctx)
	default:
		return fmt.Errorf("etcd runs inside the launcher: it can be stopped and started, not %v", act)
	}
}
