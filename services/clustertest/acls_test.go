package clustertest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/broker"
	"tidemark.io/services/controller"
)

// describeRefusedOn reports whether broker id refuses alice's Metadata of
// topic (TOPIC_AUTHORIZATION_FAILED): each broker decides by its own
// authorizer.
func describeRefusedOn(t *testing.T, cl *kgo.Client, id int32, topic string) bool {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(id)).Request(CtxFor(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("metadata from broker %d: %v", id, err)
	}
	return resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode == fkerr.TopicAuthorizationFailed.Code
}

// ACL bindings created with Kafka's API go to etcd through the active
// controller and take effect on every broker, and on whichever controller
// is active after a failover, without a restart; deleting them takes the
// access away again. The file's rules stay in force alongside. etcd is
// secured, so each broker reads the bindings with its own role.
func TestACLsCreatedOverKafkaReachEveryBrokerAndSurviveFailover(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("allow User:carol Describe Topic:acl-*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Start(t, Options{Secure: true, SecureEtcd: true, Kafka: true, Controllers: 2,
		Adjust:           func(cfg *broker.Config) { cfg.Authz.ACLFile = acl },
		AdjustController: func(cfg *controller.Config) { cfg.Authz.ACLFile = acl },
	})
	as := c.KafkaClientsAs("alice", "carol")
	adminCl := as("admin")
	admin := kadm.NewClient(adminCl)
	c.KafkaCreate(admin, "acl-orders", 1, 3, nil)
	alice := as("alice")
	aliceAdm := kadm.NewClient(alice)
	brokers := []int32{1, 2, 3}
	if _, err := aliceAdm.BrokerMetadata(CtxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, id := range brokers {
		if !describeRefusedOn(t, alice, id, "acl-orders") {
			t.Fatalf("broker %d let alice describe acl-orders before any binding", id)
		}
	}
	// alice may not touch ACLs herself.
	refused, err := aliceAdm.DescribeACLs(CtxFor(t, 10*time.Second), kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err == nil && len(refused) == 1 {
		err = refused[0].Err
	}
	if !errors.Is(err, fkerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice describing ACLs: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	// Through broker 1 only: the binding reaches brokers 2 and 3 too.
	create := kmsg.NewPtrCreateACLsRequest()
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationWrite, kmsg.ACLOperationCreate} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, "acl-", kmsg.ACLResourcePatternTypePrefixed
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:alice", "*", op, kmsg.ACLPermissionTypeAllow
		create.Creations = append(create.Creations, cr)
	}
	if _, err := admin.BrokerMetadata(CtxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	cresp, err := adminCl.Broker(1).Request(CtxFor(t, 20*time.Second), create)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cresp.(*kmsg.CreateACLsResponse).Results {
		if r.ErrorCode != 0 {
			t.Fatalf("creating through broker 1: %v %v", fkerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
	// And with kadm: Describe on the cluster for alice.
	res, err := admin.CreateACLs(CtxFor(t, 20*time.Second), kadm.NewACLs().Clusters().Allow("User:alice").Operations(kadm.OpDescribe))
	if err != nil || res[0].Err != nil {
		t.Fatalf("kadm CreateACLs: %v %+v", err, res)
	}
	c.WaitFor(10*time.Second, "every broker to let alice describe acl-orders", func() bool {
		for _, id := range brokers {
			if describeRefusedOn(t, alice, id, "acl-orders") {
				return false
			}
		}
		return true
	})
	ProduceSync(t, alice, "acl-orders", "a1")

	described, err := admin.DescribeACLs(CtxFor(t, 10*time.Second), kadm.NewACLs().AnyResource().Allow("User:alice").AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 3 {
		t.Fatalf("kadm DescribeACLs: %v %+v, want alice's 3 bindings", err, described)
	}

	// Failover: the standby decides forwarded requests by the same
	// bindings, from etcd, as soon as it is active.
	old, _ := c.ActiveController()
	c.StopController(old)
	c.WaitFor(20*time.Second, "the standby to take over", func() bool {
		id, _ := c.ActiveController()
		return id >= 0 && id != old
	})
	var seen kadm.DescribeACLsResults
	c.WaitFor(20*time.Second, "alice to describe ACLs through the new controller", func() bool {
		seen, err = aliceAdm.DescribeACLs(CtxFor(t, 10*time.Second), kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
		return err == nil && len(seen) == 1 && seen[0].Err == nil
	})
	if n := len(seen[0].Described); n != 3 {
		t.Errorf("alice described %d bindings after the failover, want 3", n)
	}
	if r, err := aliceAdm.CreateTopic(CtxFor(t, 20*time.Second), 1, 3, nil, "acl-new"); err != nil || r.Err != nil {
		t.Fatalf("alice creating acl-new (Create by prefix) after the failover: %v %v", err, r.Err)
	}
	// carol's rule from the file still applies.
	carol := as("carol")
	if _, err := kadm.NewClient(carol).BrokerMetadata(CtxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if describeRefusedOn(t, carol, 2, "acl-orders") {
		t.Error("the file's rule for carol is no longer in force")
	}

	// Deleting takes alice's access away on every broker.
	deleted, err := admin.DeleteACLs(CtxFor(t, 20*time.Second), kadm.NewACLs().Topics("acl-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").AllowHosts().Operations(kadm.OpAny))
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 2 {
		t.Fatalf("kadm DeleteACLs: %v %+v, want the 2 prefixed bindings", err, deleted)
	}
	c.WaitFor(10*time.Second, "every broker to refuse alice again", func() bool {
		for _, id := range brokers {
			if !describeRefusedOn(t, alice, id, "acl-orders") {
				return false
			}
		}
		return true
	})
	err = alice.ProduceSync(CtxFor(t, 20*time.Second), &kgo.Record{Topic: "acl-orders", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, fkerr.TopicAuthorizationFailed) {
		t.Fatalf("alice writing after the delete: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
