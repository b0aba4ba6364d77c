package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
)

// disconnects counts a client's closed broker connections.
type disconnects struct{ n atomic.Int64 }

func (d *disconnects) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { d.n.Add(1) }

// With connections.max.reauth.ms at 2 s, franz-go re-authenticates its
// connections before their sessions end (KIP-368): it produces and
// consumes across several lifetimes and after a quiet spell longer than
// one, on the connections it opened. A re-passworded user's connections
// are refused at their next re-authentication (the old password no
// longer logs in), and so are a deleted user's: neither can produce any
// more, without a restart.
func TestKafkaSASLReauthentication(t *testing.T) {
	const lifetime = 2 * time.Second
	adjust, addrs := saslListeners(t, "PLAINTEXT", "SASL_PLAINTEXT")
	c := clustertest.Start(t, clustertest.Options{Brokers: 1, Adjust: func(cfg *broker.Config) {
		adjust(cfg)
		cfg.SASLMaxReauth = lifetime
		cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	}})
	admin, err := kgo.NewClient(kgo.SeedBrokers(addrs["PLAINTEXT"]...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	adm := kadm.NewClient(admin)
	ctx := clustertest.CtxFor(t, 3*time.Minute)
	setPassword := func(user, pass string) {
		t.Helper()
		altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pass}})
		if err != nil || altered[user].Err != nil {
			t.Fatalf("setting %s: %v %+v", user, err, altered)
		}
	}
	setPassword("alice", "wonderland")
	setPassword("bob", "builder")
	c.KafkaCreate(adm, "reauth", 1, 1, nil)
	logsIn := func(user, pass string) bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs["SASL_PLAINTEXT"]...), kgo.RetryTimeout(time.Second),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Ping(ctx) == nil
	}
	c.WaitFor(20*time.Second, "alice and bob logging in", func() bool { return logsIn("alice", "wonderland") && logsIn("bob", "builder") })

	asUser := func(user, pass string, d *disconnects, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs["SASL_PLAINTEXT"]...), kgo.RetryTimeout(5 * time.Second),
			kgo.ConnIdleTimeout(10 * time.Minute), kgo.WithHooks(d),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	var aliceGone, readerGone disconnects
	alice := asUser("alice", "wonderland", &aliceGone)
	reader := asUser("alice", "wonderland", &readerGone,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"reauth": {0: kgo.NewOffset().AtStart()}}))
	seen := 0
	roundTrip := func(v string) {
		t.Helper()
		if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("producing %s: %v", v, err)
		}
		for got := false; !got; {
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			fs := reader.PollFetches(pctx)
			cancel()
			if err := fs.Err(); err != nil {
				t.Fatalf("consuming %s: %v", v, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if want := fmt.Sprint(seen); string(r.Value) != want {
					t.Fatalf("read %q, want %q", r.Value, want)
				}
				seen++
				got = string(r.Value) == v
			})
		}
	}
	start := time.Now()
	for i := 0; i < 200 && time.Since(start) < 3*lifetime; i++ {
		roundTrip(fmt.Sprint(seen))
		time.Sleep(100 * time.Millisecond) // paces the writes across the lifetimes
	}
	time.Sleep(lifetime + lifetime/2) // a quiet spell longer than a session
	roundTrip(fmt.Sprint(seen))
	if n := aliceGone.n.Load() + readerGone.n.Load(); n != 0 {
		t.Fatalf("%d connections closed across %s of sessions lasting %s; want every one re-authenticated in place", n, time.Since(start), lifetime)
	}
	const reauths = `tidemark_kafka_sasl_reauthentications_total{mechanism="SCRAM-SHA-512",result="%s"}`
	// Two connections (produce, fetch) over three lifetimes and more.
	if n := c.Metric(1, fmt.Sprintf(reauths, "success")); n < 4 {
		t.Fatalf("%v re-authentications, want at least 4", n)
	}

	// bob, then deleted: his connection is refused when it re-authenticates.
	var bobGone disconnects
	bob := asUser("bob", "builder", &bobGone)
	clustertest.ProduceSync(t, bob, "reauth", "bob")
	if altered, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil); err != nil || altered["bob"].Err != nil {
		t.Fatalf("deleting bob: %v %+v", err, altered)
	}
	refused := func(cl *kgo.Client) bool {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := cl.ProduceSync(pctx, &kgo.Record{Topic: "reauth", Value: []byte("refused?")}).FirstErr()
		return errors.Is(err, fkerr.SaslAuthenticationFailed)
	}
	c.WaitFor(30*time.Second, "bob's connection refused at its re-authentication", func() bool { return refused(bob) })
	if bobGone.n.Load() == 0 {
		t.Fatal("bob's connection is still open")
	}
	if n := c.Metric(1, fmt.Sprintf(reauths, "failure")); n < 1 {
		t.Fatalf("%v failed re-authentications, want bob's", n)
	}

	// alice re-passworded: her old password stops working at the next
	// re-authentication; the new one logs in.
	setPassword("alice", "looking-glass")
	c.WaitFor(30*time.Second, "alice's old password refused at re-authentication", func() bool { return refused(alice) })
	if !logsIn("alice", "looking-glass") {
		t.Fatal("alice's new password does not log in")
	}
}
