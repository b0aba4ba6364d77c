package kafkaclients

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"tidemark.io/services/clustertest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/scram"
)

// The brokers read users' SCRAM credentials from etcd themselves, under
// their own etcd role: with no controller running, so no UpdateMetadata
// can carry anything, a user written to etcd (under a controller term of
// the test's own) logs in on every broker, a changed password replaces
// the old one and a deleted user is refused.
func TestBrokersFollowTheUsersInEtcdWithNoControllerRunning(t *testing.T) {
	adjust, addrs := saslListeners(t, "SASL_PLAINTEXT")
	c := clustertest.Start(t, clustertest.Options{Brokers: 2, Controllers: 1, SecureEtcd: true, Adjust: adjust})
	ctx := clustertest.CtxFor(t, 2*time.Minute)
	c.StopController(1)

	cli, err := c.EtcdAs(clustertest.ControllerName(1), c.Etcd.Endpoint()).Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	store, err := metastore.New(cli, metastore.Options{Prefix: c.BrokerConfig(1).Etcd.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := store.Campaign(ctx, 1, "127.0.0.1:1", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	setUser := func(user, pass string) {
		t.Helper()
		var creds metastore.UserCredentials
		if pass != "" {
			cr, err := scram.FromPassword(scram.SHA256, pass, scram.NewSalt(), scram.MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			creds = metastore.UserCredentials{scram.SHA256: cr}
		}
		if err := sess.PutUserCredentials(ctx, user, creds); err != nil {
			t.Fatal(err)
		}
	}
	logsIn := func(addr, user, pass string) bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second),
			kgo.SASL(kscram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Ping(ctx) == nil
	}
	everyBroker := func(what, user, pass string, want bool) {
		t.Helper()
		for _, addr := range addrs["SASL_PLAINTEXT"] {
			c.WaitFor(20*time.Second, what+" on "+addr, func() bool { return logsIn(addr, user, pass) == want })
		}
	}

	setUser("grace", "grace-old")
	everyBroker("grace logging in", "grace", "grace-old", true)
	setUser("grace", "grace-new")
	everyBroker("grace's new password logging in", "grace", "grace-new", true)
	everyBroker("grace's old password refused", "grace", "grace-old", false)
	setUser("grace", "")
	everyBroker("grace, deleted, refused", "grace", "grace-new", false)
}
