package clustertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"tidemark.io/services/broker"
	"tidemark.io/services/platform/tlsconf"
)

// With mutual TLS between the nodes and etcd's TLS, client-certificate auth
// and roles on, brokers and a controller run on their own certificates, and
// each certificate can do only what its role allows.
func TestSecureEtcd(t *testing.T) {
	c := Start(t, Options{Brokers: 2, Controllers: 1, Secure: true, SecureEtcd: true})
	c.CreateTopic("secure", 1, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Produce(ctx, "secure", 0, -1, "v"); err != nil {
		t.Fatalf("produce acks=all: %v", err)
	}
	ctrlID, epoch := c.ActiveController()
	if ctrlID != 1 {
		t.Fatalf("active controller %d, want 1", ctrlID)
	}

	t.Run("a broker's certificate cannot write controller_epoch", func(t *testing.T) {
		cli, err := c.EtcdAs("broker-1", c.Etcd.Endpoint()).Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		_, err = cli.Put(ctx, "/tidemark/controller_epoch", "2147483647")
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("put controller_epoch as broker-1: %v, want %v", err, rpctypes.ErrPermissionDenied)
		}
		admin, err := c.EtcdAs("admin", c.Etcd.Endpoint()).Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		resp, err := admin.Get(ctx, "/tidemark/controller_epoch")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("read controller_epoch: %v %v", resp, err)
		}
		if id, e := c.ActiveController(); id != ctrlID || e != epoch || string(resp.Kvs[0].Value) == "2147483647" {
			t.Fatalf("controller %d epoch %d (key %s), want %d epoch %d unchanged", id, e, resp.Kvs[0].Value, ctrlID, epoch)
		}
	})

	t.Run("broker 3 with broker 1's certificate cannot register", func(t *testing.T) {
		cfg := broker.DefaultConfig()
		cfg.ID = 3
		cfg.Listen = freeAddr(t)
		cfg.DataDir = t.TempDir()
		cfg.SessionTimeout = 2 * time.Second
		cfg.TLS = tlsconf.Plain()
		cfg.Etcd = c.EtcdAs("broker-1", c.Etcd.Endpoint())
		b, err := broker.Start(ctx, cfg, nil)
		if err == nil {
			_ = b.Stop(ctx)
			t.Fatal("broker 3 started on broker-1's certificate")
		}
		if !errors.Is(err, rpctypes.ErrPermissionDenied) || !strings.Contains(err.Error(), "registering broker 3 in etcd") {
			t.Fatalf("broker 3: %v, want permission denied registering broker 3", err)
		}
		if _, err := c.Admin().DescribeCluster(ctx, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a node without a certificate is refused at the handshake", func(t *testing.T) {
		o := c.EtcdAs("broker-2", c.Etcd.Endpoint())
		o.Cert, o.Key = "", ""
		_, err := o.Dial(ctx)
		if err == nil || !strings.Contains(err.Error(), "tls: certificate required") || !strings.Contains(err.Error(), "--etcd.tls.cert") {
			t.Fatalf("Dial without a certificate: %v", err)
		}
	})

	t.Run("a password for a certificate-only user is refused naming the flags", func(t *testing.T) {
		o := c.EtcdAs("admin", c.Etcd.Endpoint())
		o.Username, o.Password = "controller-1", "wrong"
		_, err := o.Dial(ctx)
		if err == nil || !strings.Contains(err.Error(), `refused user "controller-1": it has no password in etcd (it authenticates by client certificate): drop --etcd.username`) {
			t.Fatalf("Dial with a wrong password: %v", err)
		}
	})
}
