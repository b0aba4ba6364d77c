package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// denyAliceDescribe stores, through the active controller, a binding that
// denies alice Describe on acl-orders.
func denyAliceDescribe(t *testing.T, admin *kadm.Client) {
	t.Helper()
	res, err := admin.CreateACLs(CtxFor(t, 20*time.Second), kadm.NewACLs().Topics("acl-orders").Deny("User:alice").DenyHosts("*").Operations(kadm.OpDescribe))
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("creating the deny: %v %+v", err, res)
	}
}

// firstAnswerRefuses asks the Kafka listener at addr, as alice, for
// acl-orders' metadata until it answers at all, and reports whether that
// first answer refused it.
func firstAnswerRefuses(t *testing.T, as func(string, ...kgo.Opt) *kgo.Client, addr string) bool {
	t.Helper()
	cl := as("alice", kgo.SeedBrokers(addr))
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("acl-orders")
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Request(CtxFor(t, 30*time.Second), req)
	if err != nil {
		t.Fatalf("metadata from %s: %v", addr, err)
	}
	return resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode == fkerr.TopicAuthorizationFailed.Code
}

// A broker cut off from etcd while a deny is stored and etcd's history is
// compacted past it cannot resume its watch where it left off: when the
// link comes back, after a quiet spell, it must load the bindings again and
// enforce the deny, and its metrics show the reload. Meanwhile nothing is
// produced; afterwards the partition is whole again (broker 3 back in the
// ISR, HW = LEO).
func TestACLChangeMissedByACompactedWatchIsLoadedAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts a broker off from etcd for a while")
	}
	c, as, admin := ACLQuietCluster(t)
	alice := as("alice")
	ProduceSync(t, alice, "acl-orders", "a1")
	if _, err := kadm.NewClient(alice).BrokerMetadata(CtxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 2, 3} {
		if describeRefusedOn(t, alice, id, "acl-orders") {
			t.Fatalf("broker %d refuses alice before any deny", id)
		}
	}

	link := c.EtcdLink(3)
	link.Pause()
	denyAliceDescribe(t, admin)
	c.WaitFor(10*time.Second, "brokers 1 and 2 to refuse alice", func() bool {
		return describeRefusedOn(t, alice, 1, "acl-orders") && describeRefusedOn(t, alice, 2, "acl-orders")
	})
	// Move etcd on past the deny and compact its history away, so a watch
	// resumed from before the deny is refused as compacted.
	etcd := c.Etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rev int64
	for i := 0; i < 5; i++ {
		resp, err := etcd.Put(ctx, "/unrelated/quiet", "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := etcd.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // a quiet spell, broker 3 still cut off
	resumed := time.Now().Unix()
	link.DropConnections()
	link.Resume()

	c.WaitFor(30*time.Second, "broker 3 to enforce the deny stored while it was cut off", func() bool {
		return describeRefusedOn(t, alice, 3, "acl-orders")
	})
	if v := c.Metric(3, `tidemark_etcd_follow_reloads_total{state="acls"}`); v < 1 {
		t.Fatalf("broker 3 counts %v reloads of the ACL bindings after a compacted watch", v)
	}
	if v := c.Metric(3, `tidemark_etcd_follow_entries{state="acls"}`); v != 1 {
		t.Fatalf("broker 3 holds %v stored bindings, want the deny alone", v)
	}
	if v := c.Metric(3, `tidemark_etcd_follow_last_applied_timestamp_seconds{state="acls"}`); v < float64(resumed) {
		t.Fatalf("broker 3 last applied the bindings at %v, before its link came back (%d)", v, resumed)
	}
	c.WaitFor(30*time.Second, "broker 3 back in acl-orders' ISR", func() bool {
		return len(c.Partition("acl-orders", 0).GetIsr()) == 3
	})
	c.WaitHWAtLEO("acl-orders", 0, 1, 2, 3)
	if got := c.SameLogs("acl-orders", 0, 1, 2, 3); len(got) != 1 || got[0] != "a1" {
		t.Fatalf("acl-orders holds %v, want [a1]", got)
	}
	// Write is still allowed: the reload kept the file's rules.
	ProduceSync(t, alice, "acl-orders", "a2")
}

// A deny stored while a broker was down is in force on that broker from
// its very first answer after a quiet spell and its restart: it loads the
// bindings before it serves users.
func TestACLCreatedWhileABrokerWasDownIsEnforcedFromItsFirstAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a broker")
	}
	c, as, admin := ACLQuietCluster(t)
	addr3 := c.KafkaAddrs()[2]
	if firstAnswerRefuses(t, as, addr3) {
		t.Fatal("broker 3 refuses alice before any deny")
	}
	if err := c.StopBroker(3); err != nil {
		t.Fatal(err)
	}
	denyAliceDescribe(t, admin)
	time.Sleep(2 * time.Second) // a quiet spell with broker 3 down

	c.StartBroker(3)
	if !firstAnswerRefuses(t, as, addr3) {
		t.Fatal("broker 3's first answer after its restart let alice describe acl-orders, denied while it was down")
	}
	c.WaitBrokerAlive(3)
	c.WaitFor(30*time.Second, "broker 3 back in acl-orders' ISR", func() bool {
		return len(c.Partition("acl-orders", 0).GetIsr()) == 3
	})
	c.WaitHWAtLEO("acl-orders", 0, 1, 2, 3)
}
