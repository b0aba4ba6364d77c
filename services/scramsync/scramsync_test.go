package scramsync

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/scram"
)

// logBuffer keeps what is logged.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// login is a SASL PLAIN login checked against what users hold.
func login(users *Users, user, password string) bool {
	conv, err := scram.NewConversation(scram.Plain, users.Lookup)
	if err != nil {
		return false
	}
	_, done, err := conv.Step([]byte("\x00" + user + "\x00" + password))
	return err == nil && done
}

// waitLogin waits until user's login with password succeeds or fails as
// want (bounded).
func waitLogin(t *testing.T, users *Users, user, password string, want bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for login(users, user, password) != want {
		if time.Now().After(deadline) {
			t.Fatalf("login of %s with %q: %v, want %v", user, password, !want, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func credsOf(t *testing.T, password string) metastore.UserCredentials {
	t.Helper()
	cr, err := scram.FromPassword(scram.SHA512, password, scram.NewSalt(), scram.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	return metastore.UserCredentials{scram.SHA512: cr}
}

// Users written by the controller reach a follower straight from etcd, no
// UpdateMetadata involved: a login made before the first load waits for
// it; users created, changed and deleted count from the next login; a
// value that does not decode logs nobody in; after a watch that failed
// (history compacted while it was cut off) everything is loaded again.
func TestLoginsFollowTheUsersInEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	store, err := metastore.New(cli, metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := store.Campaign(ctx, 1, "127.0.0.1:9001", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.PutUserCredentials(ctx, "alice", credsOf(t, "alice-secret")); err != nil {
		t.Fatal(err)
	}

	bridge := srv.NewBridge(t)
	dial := func(ctx context.Context) (*clientv3.Client, error) {
		o := etcdconn.Defaults()
		o.Endpoints = []string{bridge.Endpoint()}
		return o.Client(ctx)
	}
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	followed, err := metastore.New(srv.Client(t), metastore.Options{WatchClient: dial, WatchTimeout: time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	users := New(log, 30*time.Second)

	// A login that arrives before the first load waits for it.
	asking := make(chan struct{})
	early := make(chan bool, 1)
	go func() {
		close(asking)
		early <- login(users, "alice", "alice-secret")
	}()
	<-asking
	done := make(chan struct{})
	go func() { defer close(done); users.Run(ctx, followed, nil) }()
	if !<-early {
		t.Fatal("a login made during the first load failed")
	}

	if err := sess.PutUserCredentials(ctx, "bob/ops", credsOf(t, "bob-secret")); err != nil {
		t.Fatal(err)
	}
	waitLogin(t, users, "bob/ops", "bob-secret", true)
	if err := sess.PutUserCredentials(ctx, "alice", credsOf(t, "alice-new")); err != nil {
		t.Fatal(err)
	}
	waitLogin(t, users, "alice", "alice-new", true)
	if login(users, "alice", "alice-secret") {
		t.Fatal("alice still logs in with her old password")
	}
	if err := sess.PutUserCredentials(ctx, "bob/ops", nil); err != nil {
		t.Fatal(err)
	}
	waitLogin(t, users, "bob/ops", "bob-secret", false)
	// Written behind tidemark's back: logs nobody in, and alice's key
	// holding garbage takes her credentials away.
	if _, err := cli.Put(ctx, store.UsersPrefix()+"alice", "{not json"); err != nil {
		t.Fatal(err)
	}
	waitLogin(t, users, "alice", "alice-new", false)
	if err := sess.PutUserCredentials(ctx, "alice", credsOf(t, "alice-3")); err != nil {
		t.Fatal(err)
	}
	waitLogin(t, users, "alice", "alice-3", true)

	// Cut off while users change and the history is compacted: the watch
	// cannot resume where it was, and a full load brings the follower level.
	bridge.Blackhole()
	if err := sess.PutUserCredentials(ctx, "carol", credsOf(t, "carol-secret")); err != nil {
		t.Fatal(err)
	}
	if err := sess.PutUserCredentials(ctx, "alice", nil); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, "/elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	waitLogin(t, users, "carol", "carol-secret", true)
	waitLogin(t, users, "alice", "alice-3", false)
	if !strings.Contains(logs.String(), "following etcd failed; loading again") {
		t.Fatalf("the users came back without a reload:\n%s", logs.String())
	}
	cancel()
	<-done
}

// A login whose wait for the first load runs out fails as a failed
// authentication, and the log says why.
func TestLoginBeforeAnyLoadFailsAndSaysWhy(t *testing.T) {
	logs := &logBuffer{}
	users := New(slog.New(slog.NewTextHandler(logs, nil)), time.Millisecond)
	if login(users, "alice", "secret") {
		t.Fatal("a login with nothing loaded succeeded")
	}
	if got := logs.String(); !strings.Contains(got, "not loaded from etcd yet") || !strings.Contains(got, "user=alice") {
		t.Fatalf("the refusal is not logged with its reason:\n%s", got)
	}
}
