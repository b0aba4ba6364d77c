package etcdconn_test

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore/etcdauth"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/pki"
)

func TestFlagsAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := etcdconn.Defaults()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.AddFlags(fs)
	env := map[string]string{"TIDEMARK_ETCD_USERNAME": "broker-1", "TIDEMARK_ETCD_PASSWORD_FILE": pwFile}
	if err := config.Parse(fs, []string{"--etcd.endpoints", "a:1,b:2", "--etcd.prefix", "/tm/"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.Endpoints, ","); got != "a:1,b:2" || o.Username != "broker-1" || o.PasswordFile != pwFile || o.KeyPrefix() != "/tm" {
		t.Fatalf("parsed %+v", o)
	}
}

// Each bad setting is refused naming the flag (as registered) and its
// environment twin.
func TestValidateNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  func(*etcdconn.Options)
		want string
	}{
		{"no endpoints", func(o *etcdconn.Options) { o.Endpoints = nil }, "--etcd.endpoints (TIDEMARK_ETCD_ENDPOINTS): at least one endpoint"},
		{"relative prefix", func(o *etcdconn.Options) { o.Prefix = "tidemark" }, "--etcd.prefix (TIDEMARK_ETCD_PREFIX): must start with /"},
		{"root prefix", func(o *etcdconn.Options) { o.Prefix = "/" }, "--etcd.prefix"},
		{"password without user", func(o *etcdconn.Options) { o.Password = "x" }, "--etcd.username (TIDEMARK_ETCD_USERNAME): is needed with a password"},
		{"user without password", func(o *etcdconn.Options) { o.Username = "u" }, `--etcd.password (TIDEMARK_ETCD_PASSWORD): user "u" needs a password`},
		{"both passwords", func(o *etcdconn.Options) { o.Username, o.Password, o.PasswordFile = "u", "x", empty }, "give --etcd.password or --etcd.password.file, not both"},
		{"empty password file", func(o *etcdconn.Options) { o.Username, o.PasswordFile = "u", empty }, "--etcd.password.file (TIDEMARK_ETCD_PASSWORD_FILE): the file is empty"},
		{"missing password file", func(o *etcdconn.Options) { o.Username, o.PasswordFile = "u", filepath.Join(dir, "nope") }, "--etcd.password.file (TIDEMARK_ETCD_PASSWORD_FILE): cannot read"},
		{"cert without key", func(o *etcdconn.Options) { o.Cert = empty }, "--etcd.tls.cert and --etcd.tls.key go together"},
		{"missing CA", func(o *etcdconn.Options) { o.CA = filepath.Join(dir, "nope.pem") }, "--etcd.tls.ca (TIDEMARK_ETCD_TLS_CA): cannot read"},
		{"http with TLS", func(o *etcdconn.Options) { o.CA, o.Endpoints = empty, []string{"http://e:2379"} }, "an http:// endpoint would skip the TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := etcdconn.Defaults()
			tc.set(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want it to contain %q", err, tc.want)
			}
			if _, derr := o.Dial(context.Background()); derr == nil || derr.Error() != err.Error() {
				t.Fatalf("Dial() = %v, want the same refusal as Validate", derr)
			}
		})
	}
}

// The CLI spells the flags with dashes; errors name them so.
func TestSpelledFlags(t *testing.T) {
	o := etcdconn.Defaults()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.AddFlagsSpelled(fs, func(n string) string { return strings.ReplaceAll(n, ".", "-") })
	if err := fs.Parse([]string{"--etcd-password", "x"}); err != nil {
		t.Fatal(err)
	}
	err := o.Validate()
	if want := "--etcd-username (TIDEMARK_ETCD_USERNAME): is needed with a password"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Validate() = %v, want %q", err, want)
	}
}

// secureEtcd is a real etcd with TLS, client-certificate authentication and
// tidemark's roles, with certificates in dir for etcd, root, broker-1,
// broker-2, controller-1, admin and a stranger etcd has no user for.
func secureEtcd(t *testing.T) (srv *etcdtest.Server, dir string) {
	t.Helper()
	dir = t.TempDir()
	names := []string{"root", "broker-1", "broker-2", "controller-1", "admin", "stranger"}
	var leaves []pki.Leaf
	for _, n := range names {
		leaves = append(leaves, pki.Leaf{Name: n})
	}
	if _, err := pki.Ensure(dir, leaves...); err != nil {
		t.Fatal(err)
	}
	srv = etcdtest.Start(t, etcdtest.WithClientTLS(t, dir, true))
	root, err := as(srv, dir, "root").Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	plan := etcdauth.Plan{Prefix: "/tidemark", Brokers: []int32{1, 2}, Controllers: []int32{1}, Admins: []string{"admin"},
		Passwords: map[string]string{"admin": "right"}}
	for range 2 { // idempotent: the second run (as root, auth on) changes nothing and fails on nothing
		if err := etcdauth.Setup(context.Background(), root, plan); err != nil {
			t.Fatal(err)
		}
	}
	return srv, dir
}

// as is the Options of name's certificate from dir.
func as(srv *etcdtest.Server, dir, name string) etcdconn.Options {
	o := etcdconn.Defaults()
	o.Endpoints = []string{srv.Endpoint()}
	o.CA, o.Cert, o.Key = pki.CAPath(dir), pki.CertPath(dir, name), pki.KeyPath(dir, name)
	return o
}

func TestSecureEtcdRefusals(t *testing.T) {
	srv, dir := secureEtcd(t)
	ctx := context.Background()
	ctrl, err := as(srv, dir, "controller-1").Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	if _, err := ctrl.Put(ctx, "/tidemark/controller_epoch", "7"); err != nil {
		t.Fatalf("controller writes controller_epoch: %v", err)
	}
	epochIs := func(want string) {
		t.Helper()
		resp, err := ctrl.Get(ctx, "/tidemark/controller_epoch")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Fatalf("controller_epoch = %v, %v; want %s", resp, err, want)
		}
	}

	t.Run("broker cannot write the controller's keys or another broker's", func(t *testing.T) {
		b, err := as(srv, dir, "broker-1").Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.Put(ctx, "/tidemark/controller_epoch", "2147483647"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("broker-1 put controller_epoch: %v, want %v", err, rpctypes.ErrPermissionDenied)
		}
		epochIs("7")
		if _, err := b.Put(ctx, "/tidemark/brokers/ids/2", "{}"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("broker-1 put broker 2's key: %v, want %v", err, rpctypes.ErrPermissionDenied)
		}
		if _, err := b.Get(ctx, "/tidemark/brokers/topics/", clientv3.WithPrefix()); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("broker-1 reads the topics: %v, want %v", err, rpctypes.ErrPermissionDenied)
		}
		if _, err := b.Put(ctx, "/tidemark/brokers/ids/1", "{}"); err != nil {
			t.Fatalf("broker-1 writes its own registration: %v", err)
		}
		if resp, err := ctrl.Get(ctx, "/tidemark/brokers/ids/2"); err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("broker 2's key: %v, %v; want none", resp, err)
		}
	})

	t.Run("admin reads but does not write", func(t *testing.T) {
		a, err := as(srv, dir, "admin").Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if _, err := a.Get(ctx, "/tidemark/", clientv3.WithPrefix()); err != nil {
			t.Fatalf("admin reads: %v", err)
		}
		if _, err := a.Delete(ctx, "/tidemark/controller_epoch"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("admin deletes controller_epoch: %v, want %v", err, rpctypes.ErrPermissionDenied)
		}
		epochIs("7")
	})

	for _, tc := range []struct {
		name string
		opts func() etcdconn.Options
		kind etcdconn.ErrorKind
		want []string
	}{
		{"no certificate", func() etcdconn.Options {
			o := as(srv, dir, "broker-1")
			o.Cert, o.Key = "", ""
			return o
		}, etcdconn.TLSFailed, []string{"TLS with etcd at " + srv.Endpoint() + " failed", "--etcd.tls.cert"}},
		{"certificate from another CA", func() etcdconn.Options {
			other := t.TempDir()
			if _, err := pki.Ensure(other, pki.Leaf{Name: "broker-1"}); err != nil {
				t.Fatal(err)
			}
			o := as(srv, dir, "broker-1")
			o.Cert, o.Key = pki.CertPath(other, "broker-1"), pki.KeyPath(other, "broker-1")
			return o
		}, etcdconn.TLSFailed, []string{"TLS with etcd", "--etcd.tls.cert"}},
		{"etcd's certificate not trusted", func() etcdconn.Options {
			other := t.TempDir()
			if _, err := pki.LoadOrCreateCA(other); err != nil {
				t.Fatal(err)
			}
			o := as(srv, dir, "broker-1")
			o.CA = pki.CAPath(other)
			return o
		}, etcdconn.TLSFailed, []string{"TLS with etcd", "--etcd.tls.ca"}},
		{"plaintext client", func() etcdconn.Options {
			o := etcdconn.Defaults()
			o.Endpoints = []string{strings.TrimPrefix(srv.Endpoint(), "https://")}
			o.DialTimeout = time.Second
			return o
		}, etcdconn.TLSFailed, []string{"wants TLS: give --etcd.tls.ca"}},
		{"wrong password", func() etcdconn.Options {
			o := as(srv, dir, "admin")
			o.Username, o.Password = "admin", "wrong"
			return o
		}, etcdconn.AuthFailed, []string{`refused user "admin": wrong --etcd.username or --etcd.password/--etcd.password.file`}},
		{"certificate of no etcd user", func() etcdconn.Options { return as(srv, dir, "stranger") },
			etcdconn.PermissionDenied, []string{`user "stranger" (Common Name of --etcd.tls.cert`, "may not read /tidemark/controller"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, err := tc.opts().Dial(ctx)
			if err == nil {
				cli.Close()
				t.Fatal("Dial succeeded")
			}
			var e *etcdconn.Error
			if !errors.As(err, &e) || e.Kind != tc.kind {
				t.Fatalf("Dial() = %v (%T), want an etcdconn.Error of kind %d", err, err, tc.kind)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("Dial() = %v, want it to contain %q", err, w)
				}
			}
			epochIs("7")
		})
	}

	t.Run("right password", func(t *testing.T) {
		o := as(srv, dir, "admin")
		pw := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(pw, []byte("right\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		o.Username, o.PasswordFile = "admin", pw
		cli, err := o.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cli.Close()
	})
}

func TestTLSClientOfPlaintextEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	dir := t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "broker-1"}); err != nil {
		t.Fatal(err)
	}
	o := as(srv, dir, "broker-1")
	o.Endpoints = []string{strings.TrimPrefix(srv.Endpoint(), "http://")}
	_, err := o.Dial(context.Background())
	var e *etcdconn.Error
	if !errors.As(err, &e) || e.Kind != etcdconn.TLSFailed || !strings.Contains(err.Error(), "hung up on the TLS handshake: it may serve plaintext only (then drop --etcd.tls.ca") {
		t.Fatalf("Dial() = %v, want a TLS failure", err)
	}
}

// An etcd that does not answer fails Dial, naming the endpoints, but not
// Connect: a server process starts and waits for it.
func TestUnreachableEtcd(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	o := etcdconn.Defaults()
	o.Endpoints = []string{dead}
	o.DialTimeout = 300 * time.Millisecond
	_, err = o.Dial(context.Background())
	var e *etcdconn.Error
	if !errors.As(err, &e) || e.Kind != etcdconn.Unreachable || !strings.Contains(err.Error(), "etcd at "+dead+" (--etcd.endpoints) did not answer") {
		t.Fatalf("Dial() = %v, want Unreachable naming %s", err, dead)
	}
	cli, err := o.Connect(context.Background())
	if err != nil {
		t.Fatalf("Connect() = %v, want a client that keeps trying", err)
	}
	cli.Close()
}
