package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"tidemark.io/services/broker"
	"tidemark.io/services/controller"
	"tidemark.io/services/platform/authz/authztest"
	"tidemark.io/services/recordbatch"
)

// For tests that speak to the cluster's Kafka listeners with
// franz-go: this package's own and those of its kafkaclients package.

// KafkaClient is a franz-go client seeded with the cluster's Kafka
// listeners, closed when the test ends.
func (c *Cluster) KafkaClient(opts ...kgo.Opt) *kgo.Client {
	c.T.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		c.T.Fatal(err)
	}
	c.T.Cleanup(cl.Close)
	return cl
}

// FetchByName caps a client's Fetch at v12, whose topics are named by
// name: franz-go sends a request at the highest version both sides speak,
// and v13 names topics by id only, which hand-built fetches leave zero.
func FetchByName() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Fetch), 12)
	return kgo.MaxVersions(v)
}

// KafkaCreate creates a topic with kadm and waits until every partition's
// leader serves it.
func (c *Cluster) KafkaCreate(adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
	if err != nil || resp.Err != nil {
		c.T.Fatalf("kadm create %s: %v %v", topic, err, resp.Err)
	}
	c.WaitFor(10*time.Second, "leaders for "+topic, func() bool {
		for p := range partitions {
			if !c.Leads(c.Partition(topic, p).GetLeader(), topic, p) {
				return false
			}
		}
		return true
	})
}

// KafkaClientsAs issues certificates for users and returns a maker of
// Kafka clients over mTLS as any of them (or admin); sends are retried
// twice, so a refusal shows.
func (c *Cluster) KafkaClientsAs(users ...string) func(name string, opts ...kgo.Opt) *kgo.Client {
	certs := &authztest.PKI{Dir: c.PKIDir}
	certs.Issue(c.T, users...)
	return func(name string, opts ...kgo.Opt) *kgo.Client {
		tlsCfg, err := certs.Options(name).Client()
		if err != nil {
			c.T.Fatal(err)
		}
		return c.KafkaClient(append([]kgo.Opt{kgo.DialTLSConfig(tlsCfg), kgo.RecordRetries(2)}, opts...)...)
	}
}

// CtxFor is a context that expires after d, cancelled when the test ends.
func CtxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ProduceSync writes values to topic with an idempotent acks=all client.
func ProduceSync(t *testing.T, cl *kgo.Client, topic string, values ...string) {
	t.Helper()
	for _, v := range values {
		if err := cl.ProduceSync(CtxFor(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
}

// StoredCodec is the codec of the first batch broker b holds of topic.
func StoredCodec(t *testing.T, b *broker.Broker, topic string) recordbatch.Codec {
	t.Helper()
	for _, r := range b.Replicas().Replicas() {
		if r.TP().Topic != topic || r.Log().LogEndOffset() == 0 {
			continue
		}
		rr, err := r.Log().Read(0, 1<<20, r.Log().LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		for batch, err := range recordbatch.All(rr.Records) {
			if err != nil {
				t.Fatal(err)
			}
			return batch.Codec()
		}
	}
	t.Fatalf("broker %d holds no batch of %s", b.ID(), topic)
	return 0
}

// ACLQuietCluster is a secure cluster whose ACL file lets alice describe
// and write the acl-* topics, with acl-orders made (three replicas) and
// known to alice's client.
func ACLQuietCluster(t *testing.T) (*Cluster, func(name string, opts ...kgo.Opt) *kgo.Client, *kadm.Client) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("allow User:alice Describe Topic:acl-*\nallow User:alice Write Topic:acl-*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Start(t, Options{Secure: true, Kafka: true, Controllers: 2,
		Adjust: func(cfg *broker.Config) {
			cfg.Authz.ACLFile = acl
			cfg.Telemetry.MetricsListen = "127.0.0.1:0"
		},
		AdjustController: func(cfg *controller.Config) { cfg.Authz.ACLFile = acl },
	})
	as := c.KafkaClientsAs("alice")
	admin := kadm.NewClient(as("admin"))
	c.KafkaCreate(admin, "acl-orders", 1, 3, nil)
	return c, as, admin
}

// FreshAdmin is a kadm client of its own: kadm keeps sending a group's
// requests to a coordinator it can no longer dial, so each wait after a
// coordinator move looks the coordinator up anew.
func (c *Cluster) FreshAdmin() *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		c.T.Fatal(err)
	}
	return kadm.NewClient(cl)
}

// KgoCommitted waits until group's commits are want on every partition of
// topic, failing if one is below floor.
func (c *Cluster) KgoCommitted(group, topic string, parts int32, floor, want int64) {
	c.T.Helper()
	adm := c.FreshAdmin()
	defer adm.Close()
	c.WaitFor(time.Minute, fmt.Sprintf("%s committed %d on every partition", group, want), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := adm.FetchOffsets(ctx, group)
		if err != nil || got.Error() != nil {
			return false
		}
		ok := true
		for p := range parts {
			o, _ := got.Lookup(topic, p)
			if o.At < floor {
				c.T.Fatalf("%s-%d committed %d, below the earlier commit %d", topic, p, o.At, floor)
			}
			ok = ok && o.At == want
		}
		return ok
	})
}
