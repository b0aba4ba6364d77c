package clustertest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	"tidemark.io/services/broker"
)

// TestDataDirBelongsToOneClusterAndBroker: a broker records its cluster id
// and broker id in its data dir (meta.properties), starts again on it, and
// refuses to start on it as another broker or against another cluster's
// etcd, so foreign logs are never served.
func TestDataDirBelongsToOneClusterAndBroker(t *testing.T) {
	a := Start(t, Options{Brokers: 1, Controllers: 1})
	b := Start(t, Options{Brokers: 2, Controllers: 1})
	a.CreateTopic("mine", 1, 1, nil)
	if _, err := a.Produce(context.Background(), "mine", 0, -1, "a record of cluster a"); err != nil {
		t.Fatal(err)
	}
	dirA := a.BrokerConfig(1).DataDir
	idA, idB := clusterID(t, a), clusterID(t, b)
	if idA == "" || idA == idB {
		t.Fatalf("cluster a is %q, b is %q", idA, idB)
	}
	// A broker that started before the controller created the cluster id
	// records it once it appears.
	var props []byte
	a.WaitFor(10*time.Second, "cluster a's id in broker 1's meta.properties", func() bool {
		props, _ = os.ReadFile(filepath.Join(dirA, "meta.properties"))
		return strings.Contains(string(props), "cluster.id="+idA+"\n")
	})
	if !strings.Contains(string(props), "broker.id=1\n") {
		t.Fatalf("meta.properties of cluster a's broker 1:\n%s\nwant broker.id=1", props)
	}
	if err := a.StopBroker(1); err != nil {
		t.Fatal(err)
	}

	try := func(cfg broker.Config) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		br, err := broker.Start(ctx, cfg, nil)
		if err == nil {
			_ = br.Stop(ctx)
		}
		return err
	}
	// Cluster b's broker 1, pointed at cluster a's data dir.
	if err := b.StopBroker(1); err != nil {
		t.Fatal(err)
	}
	cfg := b.BrokerConfig(1)
	cfg.DataDir = dirA
	if err := try(cfg); err == nil || !strings.Contains(err.Error(), "belongs to cluster "+idA) || !strings.Contains(err.Error(), idB) {
		t.Fatalf("cluster a's data dir against cluster b's etcd: %v, want a refusal naming both clusters", err)
	}
	// Cluster a's data dir given to broker 2.
	cfg = a.BrokerConfig(1)
	cfg.ID = 2
	if err := try(cfg); err == nil || !strings.Contains(err.Error(), "holds the logs of broker 1") {
		t.Fatalf("broker 1's data dir as broker 2: %v, want a refusal naming broker 1", err)
	}
	// Its own broker, against its own cluster, starts and still has its record.
	a.StartBroker(1)
	var v []string
	a.WaitFor(20*time.Second, "broker 1 back with its log of mine-0", func() bool {
		v = a.Values(1, "mine", 0)
		return len(v) > 0
	})
	if len(v) != 1 || v[0] != "a record of cluster a" {
		t.Fatalf("after the refusals, broker 1's log holds %q", v)
	}
}

// clusterID is the cluster id a broker's Metadata answer names.
func clusterID(t *testing.T, c *Cluster) string {
	t.Helper()
	resp, err := c.BrokerClient(1).Metadata(context.Background(), &brokerv1.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetClusterId()
}
