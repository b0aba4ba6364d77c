package aclsync

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/internal/etcdtest"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/authz"
)

type target struct {
	mu  sync.Mutex
	acl *authz.ACL
	n   int
}

func (t *target) SetStored(a *authz.ACL) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acl, t.n = a, t.n+1
}

func (t *target) rules() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.acl == nil {
		return nil
	}
	var out []string
	for _, r := range t.acl.Rules {
		out = append(out, r.String())
	}
	return out
}

// waitRules waits until the target holds exactly want (bounded).
func waitRules(t *testing.T, tg *target, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := tg.rules()
		if equalSets(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rules in force %q, want %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s] == 0 {
			return false
		}
		seen[s]--
	}
	return true
}

func binding(name, op, perm string) authz.Binding {
	return authz.Binding{ResourceType: "TOPIC", ResourceName: name, PatternType: "PREFIXED", Principal: "User:alice", Host: "*", Operation: op, PermissionType: perm}
}

// The controller writes bindings fenced by its term; a follower sees every
// change; a value in etcd that does not decode, or a binding that is not
// valid, grants nothing and does not stop the others from applying.
func TestFollowerSeesBindingsAndIgnoresBadOnes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
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
	if err := sess.CreateACLs(ctx, []authz.Binding{binding("orders-", "READ", "ALLOW")}); err != nil {
		t.Fatal(err)
	}
	tg := &target{}
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, store, tg, nil, slog.Default()) }()
	waitRules(t, tg, "allow User:alice Read Topic:orders-*")

	// Written behind tidemark's back: neither may grant anything.
	if _, err := cli.Put(ctx, store.ACLsPrefix()+"garbage", "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, store.ACLsPrefix()+"invalid", `{"resource_type":"TOPIC","resource_name":"x","pattern_type":"ANY","principal":"User:alice","host":"*","operation":"ALL","permission_type":"ALLOW"}`); err != nil {
		t.Fatal(err)
	}
	if err := sess.CreateACLs(ctx, []authz.Binding{binding("orders-frozen", "READ", "DENY")}); err != nil {
		t.Fatal(err)
	}
	waitRules(t, tg, "allow User:alice Read Topic:orders-*", "deny User:alice Read Topic:orders-frozen*")

	stored, _, err := store.ACLs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range stored {
		if s.Binding.PermissionType == "ALLOW" && s.Binding.PatternType == "PREFIXED" {
			keys = append(keys, s.Key)
		}
	}
	if err := sess.DeleteACLs(ctx, keys); err != nil {
		t.Fatal(err)
	}
	waitRules(t, tg, "deny User:alice Read Topic:orders-frozen*")

	// A term that has ended writes nothing.
	if err := sess.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.CreateACLs(ctx, []authz.Binding{binding("x", "READ", "ALLOW")}); !errors.Is(err, metastore.ErrControllerMoved) {
		t.Fatalf("a resigned controller's write: %v, want ErrControllerMoved", err)
	}
	cancel()
	<-done
}
