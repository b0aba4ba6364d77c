package kafkaclients

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"tidemark.io/services/broker"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/controller"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/authz/authztest"
	"tidemark.io/services/platform/loopback"
	"tidemark.io/services/platform/testenv"
)

// saslListeners gives every broker Kafka listeners named after their
// protocols (so no protocol map is needed), e.g. SSL (client
// certificates), SASL_PLAINTEXT and SASL_SSL. It returns each listener's
// addresses.
func saslListeners(t *testing.T, names ...string) (func(*broker.Config), map[string][]string) {
	addrs := map[string][]string{}
	return func(cfg *broker.Config) {
		cfg.KafkaListen, cfg.KafkaListener = "", nil
		cfg.KafkaNamedListeners = map[string]net.Listener{}
		cfg.KafkaListeners, cfg.KafkaAdvertisedListeners = nil, nil
		for _, name := range names {
			l, err := loopback.Listen()
			if err != nil {
				t.Fatal(err)
			}
			cfg.KafkaNamedListeners[name] = l
			cfg.KafkaListeners = append(cfg.KafkaListeners, name+"://"+l.Addr().String())
			addrs[name] = append(addrs[name], l.Addr().String())
		}
	}, addrs
}

// Users created with AlterUserScramCredentials log in with franz-go's
// SCRAM clients over SASL_PLAINTEXT and SASL_SSL, produce and consume as
// themselves (the ACLs decide for the SASL user, as for a certificate's
// name); the admin APIs answer Kafka's per-user errors; a changed or
// deleted user counts at its next login on every broker, without a
// restart, while a connection already logged in carries on.
func TestKafkaSASLLoginsWithSCRAMUsersFromTheController(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("allow User:alice Write Topic:orders-*\nallow User:alice Read Topic:orders-*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	adjust, addrs := saslListeners(t, "SSL", "SASL_PLAINTEXT", "SASL_SSL")
	c := clustertest.Start(t, clustertest.Options{Secure: true,
		Adjust: func(cfg *broker.Config) {
			adjust(cfg)
			cfg.Authz.ACLFile = acl
			cfg.SASLMechanisms = []string{"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"}
		},
		AdjustController: func(cfg *controller.Config) { cfg.Authz.ACLFile = acl },
	})
	certs := &authztest.PKI{Dir: c.PKIDir}
	certs.Issue(t, "admin")
	adminTLS, err := certs.Options("admin").Client()
	if err != nil {
		t.Fatal(err)
	}
	// SASL_SSL: the broker's certificate checked, none presented.
	serverOnly := adminTLS.Clone()
	serverOnly.Certificates, serverOnly.GetClientCertificate = nil, nil
	client := func(listener string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs[listener]...), kgo.RetryTimeout(30 * time.Second),
			kgo.RecordRetries(2), kgo.ConnIdleTimeout(10 * time.Minute)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	asUser := func(listener string, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
		opts = append(opts, kgo.SASL(m))
		if listener == "SASL_SSL" {
			opts = append(opts, kgo.DialTLSConfig(serverOnly.Clone()))
		}
		return client(listener, opts...)
	}
	adminCl := client("SSL", kgo.DialTLSConfig(adminTLS))
	admin := kadm.NewClient(adminCl)
	ctx := clustertest.CtxFor(t, 2*time.Minute)

	altered, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "wonderland"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "wonderland"},
	})
	if err != nil || altered["alice"].Err != nil {
		t.Fatalf("creating alice: %v %+v", err, altered)
	}
	described, err := admin.DescribeUserSCRAMs(ctx, "alice")
	if err != nil || len(described["alice"].CredInfos) != 2 {
		t.Fatalf("describe alice: %v %+v", err, described)
	}

	// Kafka's per-user errors.
	bad := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(user string, mech int8, iter int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, mech, iter, []byte("salt"), make([]byte, 32)
		return u
	}
	bad.Upsertions = append(bad.Upsertions, up("few", 1, 100), up("many", 2, 20000), up("", 1, 4096),
		up("twice", 1, 4096), up("twice", 1, 4096), up("unknownmech", 3, 4096), up("broker-7", 1, 4096))
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "nobody", 1
	bad.Deletions = append(bad.Deletions, del)
	badResp, err := bad.RequestWith(ctx, adminCl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"few": 93, "many": 93, "": 93, "twice": 92, "unknownmech": 33, "broker-7": 93, "nobody": 91}
	for _, r := range badResp.Results {
		if r.ErrorCode != want[r.User] {
			t.Errorf("user %q: code %d (%v), want %d", r.User, r.ErrorCode, r.ErrorMessage, want[r.User])
		}
		delete(want, r.User)
	}
	if len(want) != 0 {
		t.Fatalf("no results for %v", want)
	}
	if d, _ := admin.DescribeUserSCRAMs(ctx, "nobody"); !errors.Is(d["nobody"].Err, fkerr.ResourceNotFound) {
		t.Fatalf("describe nobody: %+v", d)
	}

	c.KafkaCreate(admin, "orders-1", 1, 3, nil)
	c.KafkaCreate(admin, "other", 1, 3, nil)

	// The brokers learn alice from the controller's push; a login may
	// precede it by a moment.
	sha256 := scram.Auth{User: "alice", Pass: "wonderland"}.AsSha256Mechanism()
	sha512 := scram.Auth{User: "alice", Pass: "wonderland"}.AsSha512Mechanism()
	var alice *kgo.Client
	c.WaitFor(20*time.Second, "alice logging in on every broker", func() bool {
		for _, addr := range addrs["SASL_PLAINTEXT"] {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(sha256))
			if err != nil {
				t.Fatal(err)
			}
			err = cl.Ping(ctx)
			cl.Close()
			if err != nil {
				return false
			}
		}
		return true
	})
	alice = asUser("SASL_PLAINTEXT", sha256)
	clustertest.ProduceSync(t, alice, "orders-1", "o1")
	err = alice.ProduceSync(ctx, &kgo.Record{Topic: "other", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, fkerr.TopicAuthorizationFailed) {
		t.Fatalf("alice writing other: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if r, err := kadm.NewClient(alice).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "mallory", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "x"}}); err == nil && !errors.Is(r["mallory"].Err, fkerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice creating a user: %+v, want CLUSTER_AUTHORIZATION_FAILED", r)
	}

	overTLS := asUser("SASL_SSL", sha512)
	clustertest.ProduceSync(t, overTLS, "orders-1", "o2")
	plainTLS := asUser("SASL_SSL", plain.Auth{User: "alice", Pass: "wonderland"}.AsMechanism(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders-1": {0: kgo.NewOffset().AtStart()}}))
	if got := consumeAll(t, plainTLS, 2)[0]; len(got) != 2 || got[0] != "o1" || got[1] != "o2" {
		t.Fatalf("alice read %q", got)
	}

	wrong := asUser("SASL_PLAINTEXT", scram.Auth{User: "alice", Pass: "wonderlanD"}.AsSha256Mechanism(), kgo.RetryTimeout(time.Second))
	if err := wrong.Ping(ctx); !errors.Is(err, fkerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	// A new password counts at the next login on every broker; alice's
	// connections already logged in carry on.
	if altered, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "looking-glass"}}); err != nil || altered["alice"].Err != nil {
		t.Fatalf("changing alice: %v %+v", err, altered)
	}
	loginsWith := func(m sasl.Mechanism) int {
		n := 0
		for _, addr := range addrs["SASL_PLAINTEXT"] {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m), kgo.RetryTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if cl.Ping(ctx) == nil {
				n++
			}
			cl.Close()
		}
		return n
	}
	changed := scram.Auth{User: "alice", Pass: "looking-glass"}.AsSha256Mechanism()
	c.WaitFor(20*time.Second, "the new password on every broker", func() bool {
		return loginsWith(changed) == len(addrs["SASL_PLAINTEXT"]) && loginsWith(sha256) == 0
	})

	// Deleted: no broker logs alice in any more.
	if altered, err := admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}, {User: "alice", Mechanism: kadm.ScramSha512}}, nil); err != nil || altered["alice"].Err != nil {
		t.Fatalf("deleting alice: %v %+v", err, altered)
	}
	c.WaitFor(20*time.Second, "alice gone from every broker", func() bool { return loginsWith(changed) == 0 })
	if d, _ := admin.DescribeUserSCRAMs(ctx); len(d) != 0 {
		t.Fatalf("users left: %+v", d)
	}
	clustertest.ProduceSync(t, alice, "orders-1", "o3") // logged in before: carries on
}

// kcat (librdkafka) logs in with SCRAM-SHA-512 over SASL_PLAINTEXT, lists,
// produces and consumes; with a wrong password it gets nothing.
func TestKcatLogsInWithSCRAM(t *testing.T) {
	kcat := testenv.RequireCommand(t, "kcat", "apt-get install kcat (CI installs it)", "kcat")
	adjust, addrs := saslListeners(t, "PLAINTEXT", "SASL_PLAINTEXT")
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Adjust: adjust})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs["PLAINTEXT"]...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx := clustertest.CtxFor(t, 2*time.Minute)
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "kcat-user", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "s3cret pass"}}); err != nil || altered["kcat-user"].Err != nil {
		t.Fatalf("creating the user: %v %+v", err, altered)
	}
	c.KafkaCreate(adm, "kcat-sasl", 1, 3, nil)
	boot := strings.Join(addrs["SASL_PLAINTEXT"], ",")
	kcatAs := func(password, stdin string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.CommandContext(clustertest.CtxFor(t, 60*time.Second), kcat, append([]string{"-b", boot, "-X", "security.protocol=SASL_PLAINTEXT",
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=kcat-user", "-X", "sasl.password=" + password}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Every broker learns the user from the controller's push.
	c.WaitFor(30*time.Second, "kcat listing the cluster", func() bool {
		out, err := kcatAs("s3cret pass", "", "-L", "-t", "kcat-sasl", "-m", "5")
		return err == nil && strings.Contains(out, "3 brokers")
	})
	if out, err := kcatAs("s3cret pass", "one\ntwo\n", "-P", "-t", "kcat-sasl", "-X", "acks=all"); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	out, err := kcatAs("s3cret pass", "", "-C", "-t", "kcat-sasl", "-o", "beginning", "-e", "-q", "-f", "%s\n")
	if err != nil || out != "one\ntwo\n" {
		t.Fatalf("kcat -C: %v %q", err, out)
	}
	if out, err := kcatAs("wrong", "", "-L", "-m", "5"); err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
	}
}

// A new controller loads the users with the cluster and sends them with
// its first pushes: users created under the old one still log in on
// every broker after a failover, beside one created under the new one.
func TestKafkaSASLUsersSurviveControllerFailover(t *testing.T) {
	adjust, addrs := saslListeners(t, "PLAINTEXT", "SASL_PLAINTEXT")
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Controllers: 2, Adjust: adjust})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs["PLAINTEXT"]...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx := clustertest.CtxFor(t, 2*time.Minute)
	create := func(user string) {
		t.Helper()
		altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: user + "-pw"}})
		if err != nil || altered[user].Err != nil {
			t.Fatalf("creating %s: %v %+v", user, err, altered)
		}
	}
	logsInEverywhere := func(user string) bool {
		for _, addr := range addrs["SASL_PLAINTEXT"] {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second),
				kgo.SASL(scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism()))
			if err != nil {
				t.Fatal(err)
			}
			err = cl.Ping(ctx)
			cl.Close()
			if err != nil {
				return false
			}
		}
		return true
	}
	create("bob")
	c.WaitFor(20*time.Second, "bob on every broker", func() bool { return logsInEverywhere("bob") })

	old, epoch := c.ActiveController()
	c.StopController(old)
	c.WaitFor(20*time.Second, "a new controller", func() bool {
		id, e := c.ActiveController()
		return id >= 0 && id != old && e > epoch
	})
	c.WaitFor(30*time.Second, "the new controller creating carol", func() bool {
		altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-pw"}})
		return err == nil && altered["carol"].Err == nil
	})
	c.WaitFor(20*time.Second, "carol on every broker", func() bool { return logsInEverywhere("carol") })
	if !logsInEverywhere("bob") {
		t.Fatal("bob, created under the old controller, no longer logs in after the failover")
	}

	// A user deleted in etcd behind the controller (etcdctl, a restore)
	// is noticed by its watch and gone from every broker.
	if _, err := c.Etcd.Client(t).Delete(ctx, metastore.DefaultPrefix+"/config/users/bob"); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(20*time.Second, "bob gone from every broker", func() bool {
		for _, addr := range addrs["SASL_PLAINTEXT"] {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second),
				kgo.SASL(scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism()))
			if err != nil {
				t.Fatal(err)
			}
			err = cl.Ping(ctx)
			cl.Close()
			if err == nil {
				return false
			}
		}
		return true
	})
}
