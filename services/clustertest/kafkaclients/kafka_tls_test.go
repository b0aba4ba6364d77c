package kafkaclients

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
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
)

// With TLS on, the Kafka listener is TLS with the brokers' certificates,
// the client certificate's Common Name is the principal, and the same ACLs
// decide: on the broker for produce and fetch, on the controller for
// forwarded admin requests (which act as the client, not as the broker).
func TestKafkaListenerOverMutualTLSWithACLs(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("allow User:alice Write Topic:orders-*\nallow User:alice Read Topic:orders-*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t, clustertest.Options{Secure: true, Kafka: true,
		Adjust:           func(cfg *broker.Config) { cfg.Authz.ACLFile = acl },
		AdjustController: func(cfg *controller.Config) { cfg.Authz.ACLFile = acl },
	})
	as := c.KafkaClientsAs("alice")

	admin := kadm.NewClient(as("admin"))
	c.KafkaCreate(admin, "orders-1", 1, 3, nil)
	c.KafkaCreate(admin, "other", 1, 3, nil)

	alice := as("alice")
	clustertest.ProduceSync(t, alice, "orders-1", "o1")
	err := alice.ProduceSync(clustertest.CtxFor(t, 20*time.Second), &kgo.Record{Topic: "other", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, fkerr.TopicAuthorizationFailed) {
		t.Fatalf("alice writing other: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// Forwarded to the controller as alice: refused there.
	resp, err := kadm.NewClient(alice).CreateTopic(clustertest.CtxFor(t, 20*time.Second), 1, 1, nil, "orders-2")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, fkerr.TopicAuthorizationFailed) && !errors.Is(err, fkerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice creating a topic: %v, want an authorization failure", err)
	}
	cons := as("alice", kgo.ConsumeTopics("orders-1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if got := consumeAll(t, cons, 1)[0]; len(got) != 1 || got[0] != "o1" {
		t.Fatalf("alice read %q", got)
	}

	// What alice may not Describe she does not see, as in Kafka: listing
	// leaves other out, naming it is TOPIC_AUTHORIZATION_FAILED (as for a
	// topic that does not exist), and its offsets are refused her.
	aliceAdm := kadm.NewClient(alice)
	ctx := clustertest.CtxFor(t, 20*time.Second)
	listed, err := aliceAdm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := listed.Names(); len(names) != 1 || names[0] != "orders-1" {
		t.Fatalf("alice listed %v, want only orders-1", names)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"orders-1", "other", "ghost"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		mreq.Topics = append(mreq.Topics, rt)
	}
	mresp, err := mreq.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range mresp.Topics {
		var want error = fkerr.TopicAuthorizationFailed
		if *rt.Topic == "orders-1" {
			want = nil
		}
		if err := fkerr.ErrorForCode(rt.ErrorCode); !errors.Is(err, want) || (want != nil && len(rt.Partitions) != 0) {
			t.Errorf("alice's metadata of %s: %v with %d partitions, want %v", *rt.Topic, err, len(rt.Partitions), want)
		}
	}
	offs, err := aliceAdm.ListEndOffsets(ctx, "orders-1")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("orders-1", 0); !ok || o.Err != nil || o.Offset != 1 {
		t.Errorf("alice's end offset of orders-1: %+v, want 1", o)
	}
	offs, err = aliceAdm.ListEndOffsets(ctx, "other")
	if err == nil {
		err = offs.Error()
	}
	if !errors.Is(err, fkerr.TopicAuthorizationFailed) {
		t.Errorf("alice's end offsets of other: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// A plaintext client never gets an answer.
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Ping(clustertest.CtxFor(t, 10*time.Second)); err == nil {
		t.Fatal("a plaintext client was answered by the TLS listener")
	}
}

// Kafka's group requests are decided by the gRPC GroupService's policy:
// alice, with Read on Group:team-* and Topic:orders-*, consumes in a group
// of hers and commits; another group's offsets are refused her with
// GROUP_AUTHORIZATION_FAILED, and ListGroups shows her only her own.
func TestKafkaGroupsAuthorizedAsGRPC(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("allow User:alice Read Topic:orders-*\nallow User:alice Read Group:team-*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t, clustertest.Options{Secure: true, Kafka: true, BrokerSettings: clustertest.GroupSettings, AdjustController: clustertest.OffsetsPartitions(3),
		Adjust: func(cfg *broker.Config) { cfg.Authz.ACLFile = acl },
	})
	as := c.KafkaClientsAs("alice")
	admCl := as("admin")
	admin := kadm.NewClient(admCl)
	c.KafkaCreate(admin, "orders-1", 1, 3, nil)
	clustertest.ProduceSync(t, admCl, "orders-1", "o1", "o2")
	ctx := clustertest.CtxFor(t, 30*time.Second)
	if r, err := admin.CommitOffsets(ctx, "billing", kadm.OffsetsFromRecords(kgo.Record{Topic: "orders-1", Partition: 0, Offset: 0})); err != nil || r.Error() != nil {
		t.Fatalf("admin committing for billing: %v %v", err, r.Error())
	}

	alice := as("alice", kgo.ConsumerGroup("team-a"), kgo.ConsumeTopics("orders-1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := pollUntil(t, alice, nil, 2)
	if err := alice.CommitRecords(ctx, got...); err != nil {
		t.Fatalf("alice committing in her group: %v", err)
	}
	aliceAdm := kadm.NewClient(as("alice"))
	own, err := aliceAdm.FetchOffsets(ctx, "team-a")
	if err != nil || own.Error() != nil {
		t.Fatalf("alice fetching her offsets: %v %v", err, own.Error())
	}
	if o, ok := own.Lookup("orders-1", 0); !ok || o.At != 2 {
		t.Fatalf("team-a committed %+v, want 2", o)
	}
	other, err := aliceAdm.FetchOffsets(ctx, "billing")
	if err == nil {
		err = other.Error()
	}
	if !errors.Is(err, fkerr.GroupAuthorizationFailed) {
		t.Fatalf("alice fetching billing's offsets: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	listed, err := aliceAdm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["billing"]; ok {
		t.Fatalf("alice listed billing: %+v", listed)
	}
	if _, ok := listed["team-a"]; !ok {
		t.Fatalf("alice did not list her own group: %+v", listed)
	}
}
