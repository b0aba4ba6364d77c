package kafkaclients

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"tidemark.io/services/clustertest"
)

// A broker that was down while users were created, changed and deleted,
// and that comes back after a quiet spell, knows them all at once: it
// logs in the user created in its absence with the password set in its
// absence, and refuses the one deleted in its absence. Nothing is produced
// meanwhile, so only what the returning broker reads from etcd as it
// starts can have told it.
func TestABrokerBackFromDowntimeKnowsTheUsersChangedMeanwhile(t *testing.T) {
	adjust, addrs := saslListeners(t, "PLAINTEXT", "SASL_PLAINTEXT")
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Controllers: 2, Adjust: adjust})
	ctx := clustertest.CtxFor(t, 2*time.Minute)
	// The admin client knows broker 1 only, so broker 3's absence never
	// stands in its way.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs["PLAINTEXT"][0]), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	upsert := func(user, pass string) {
		t.Helper()
		altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pass}})
		if err != nil || altered[user].Err != nil {
			t.Fatalf("setting %s: %v %+v", user, err, altered)
		}
	}
	logsIn := func(addr, user, pass string) bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Ping(ctx) == nil
	}
	broker3 := addrs["SASL_PLAINTEXT"][2]
	upsert("erin", "erin-old")
	upsert("frank", "frank-pw")
	c.WaitFor(20*time.Second, "erin and frank on broker 3", func() bool {
		return logsIn(broker3, "erin", "erin-old") && logsIn(broker3, "frank", "frank-pw")
	})

	if err := c.StopBroker(3); err != nil {
		t.Fatal(err)
	}
	upsert("dave", "dave-pw")
	upsert("erin", "erin-new")
	deleted, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "frank", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || deleted["frank"].Err != nil {
		t.Fatalf("deleting frank: %v %+v", err, deleted)
	}
	time.Sleep(2 * time.Second) // a quiet spell with broker 3 down

	c.StartBroker(3)
	c.WaitBrokerAlive(3)
	c.WaitFor(20*time.Second, "dave, created while broker 3 was down, logging in on it", func() bool {
		return logsIn(broker3, "dave", "dave-pw")
	})
	if !logsIn(broker3, "erin", "erin-new") {
		t.Error("erin's password set while broker 3 was down is refused there")
	}
	if logsIn(broker3, "erin", "erin-old") {
		t.Error("erin's password from before broker 3 went down still logs in there")
	}
	if logsIn(broker3, "frank", "frank-pw") {
		t.Error("frank, deleted while broker 3 was down, still logs in there")
	}
}
