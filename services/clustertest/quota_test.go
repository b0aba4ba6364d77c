package clustertest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/broker"
	"tidemark.io/services/platform/pki"
)

// Byte-rate quotas follow the principal a certificate names: alice, over
// her produce quota, is served but held back and told for how long; bob,
// with no quota, is not, until a quota for him is set at run time through
// the controller's AlterConfigs on the cluster-wide broker resource.
func TestProduceQuotaFollowsThePrincipal(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("allow User:alice Write Topic:q\nallow User:bob Write Topic:q\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Start(t, Options{Brokers: 1, Controllers: 1, Secure: true, BrokerSettings: map[string]string{
		"quota.producer.overrides": "alice:1000",
		"quota.window.num":         "2", "quota.window.size.seconds": "1",
	}, Adjust: func(cfg *broker.Config) { cfg.Authz.ACLFile = acl }})
	ca, err := pki.LoadCA(c.PKIDir)
	if err != nil {
		t.Fatal(err)
	}
	producer := func(name string) brokerv1.BrokerServiceClient {
		if err := ca.IssueFiles(c.PKIDir, pki.Leaf{Name: name}); err != nil {
			t.Fatal(err)
		}
		creds, err := pki.Options(c.PKIDir, name).DialOption()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(c.BrokerConfig(1).Listen, creds)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return brokerv1.NewBrokerServiceClient(conn)
	}
	alice, bob := producer("alice"), producer("bob")
	c.CreateTopic("q", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(who brokerv1.BrokerServiceClient) *brokerv1.ProduceResponse {
		t.Helper()
		resp, err := who.Produce(ctx, &brokerv1.ProduceRequest{Topic: "q", Acks: 1,
			Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: []*commonv1.Record{{Value: []byte(strings.Repeat("x", 1500))}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	if r := produce(alice); r.GetThrottleTimeMs() <= 0 {
		t.Fatalf("alice, 1.5 kB against 1000 B/s: throttle_time_ms %d, want > 0", r.GetThrottleTimeMs())
	}
	if r := produce(bob); r.GetThrottleTimeMs() != 0 {
		t.Fatalf("bob, without a quota: throttle_time_ms %d, want 0", r.GetThrottleTimeMs())
	}

	resp, err := c.Admin().AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER},
		Ops: []*adminv1.ConfigOp{{Name: "quota.producer.overrides", Value: "alice:1000,bob:1000",
			Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}},
	}}})
	if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
		t.Fatalf("alter quota.producer.overrides: %v %v", resp, err)
	}
	c.WaitFor(10*time.Second, "bob's quota to reach the broker", func() bool {
		return c.Broker(1).Replicas().BrokerConfig().QuotaProducerOverrides == "alice:1000,bob:1000"
	})
	if r := produce(bob); r.GetThrottleTimeMs() <= 0 {
		t.Fatalf("bob, over the quota set at run time: throttle_time_ms %d, want > 0", r.GetThrottleTimeMs())
	}
}

// The cluster-wide quota.producer.default set, then removed, while a
// broker is down: back, the broker throttles by the value in force from
// its first produce, never by the one it had before it went (its dynamic
// configs arrive, whole, before it is told to lead anything).
func TestProducerDefaultChangedWhileTheBrokerIsDown(t *testing.T) {
	c := Start(t, Options{Brokers: 2, Controllers: 1, BrokerSettings: map[string]string{
		"quota.window.num": "2", "quota.window.size.seconds": "1"}})
	CreateAssigned(t, c, "dq", [][]int32{{2}}, nil)
	produce := func() int32 {
		t.Helper()
		var resp *brokerv1.ProduceResponse
		c.WaitFor(20*time.Second, "a produce to broker 2", func() bool {
			var err error
			resp, err = c.BrokerClient(2).Produce(CtxFor(t, 10*time.Second), &brokerv1.ProduceRequest{Topic: "dq", Acks: 1,
				Payload: &brokerv1.ProduceRequest_Records{Records: &brokerv1.Records{Records: []*commonv1.Record{{Value: []byte(strings.Repeat("d", 1500))}}}}})
			return err == nil
		})
		return resp.GetThrottleTimeMs()
	}
	alterDefault := func(op adminv1.ConfigOpType) {
		t.Helper()
		resp, err := c.Admin().AlterConfigs(CtxFor(t, 10*time.Second), &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
			Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER},
			Ops:      []*adminv1.ConfigOp{{Name: "quota.producer.default", Value: "1000", Op: op}},
		}}})
		if err != nil || resp.GetResults()[0].GetErrorCode() != 0 {
			t.Fatalf("alter quota.producer.default: %v %v", resp, err)
		}
	}
	restartWith := func(change func()) {
		t.Helper()
		if err := c.StopBroker(2); err != nil {
			t.Fatal(err)
		}
		change()
		c.StartBroker(2)
		c.WaitBrokerAlive(2)
		c.WaitFor(20*time.Second, "broker 2 leads dq-0 again", func() bool { return c.Leads(2, "dq", 0) })
	}
	if ms := produce(); ms != 0 {
		t.Fatalf("without a quota: throttle_time_ms %d", ms)
	}
	restartWith(func() { alterDefault(adminv1.ConfigOpType_CONFIG_OP_TYPE_SET) })
	if ms := produce(); ms <= 0 {
		t.Fatalf("1.5 kB against a 1000 B/s default set while the broker was down: throttle_time_ms %d, want > 0", ms)
	}
	restartWith(func() { alterDefault(adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE) })
	if ms := produce(); ms != 0 {
		t.Fatalf("the default removed while the broker was down: throttle_time_ms %d, want 0", ms)
	}
}
