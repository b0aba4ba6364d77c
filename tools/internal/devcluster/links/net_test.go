package links

import (
	"os"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
)

// TestNetCutIsSymmetric: cutting a node holds what reaches it, its etcd
// link, and its own connections to the other nodes (identified as its
// through /proc: this test process plays node "a"); CutBetween cuts one
// pair only; Heal and HealAll undo them.
func TestNetCutIsSymmetric(t *testing.T) {
	testenv.RequireFile(t, "/proc/net/tcp", "/proc/net/tcp (the links name a connection's process through it)", "run on Linux with /proc mounted")
	ident := ProcIdentifier(func() map[int]string { return map[int]string{os.Getpid(): "a"} })
	n := NewNet()
	defer n.Close()
	echo := echoServer(t)
	for _, name := range []string{"a", "b"} {
		p, err := Listen(name, "127.0.0.1:0", echo, ident)
		if err != nil {
			t.Fatal(err)
		}
		n.AddInbound(name, p)
		e, err := Listen(name+"→etcd", "127.0.0.1:0", echo, nil)
		if err != nil {
			t.Fatal(err)
		}
		n.AddEtcd(name, e)
	}
	addr := func(m map[string]*Proxy, name string) string { return m[name].Addr() }
	works := func(what, to string) {
		t.Helper()
		if err := roundTrip(dial(t, to), what, 2*time.Second); err != nil {
			t.Fatalf("%s: %v, want it to pass", what, err)
		}
	}
	held := func(what, to string) {
		t.Helper()
		if err := roundTrip(dial(t, to), what, 300*time.Millisecond); !timedOut(err) {
			t.Fatalf("%s: %v, want it held", what, err)
		}
	}
	if err := n.Cut("a", Blackhole); err != nil {
		t.Fatal(err)
	}
	held("a's outbound to b while a is cut", addr(n.inbound, "b"))
	held("to a while a is cut", addr(n.inbound, "a"))
	held("a to etcd while a is cut", addr(n.etcd, "a"))
	works("b's etcd link while a is cut", addr(n.etcd, "b"))
	if got := strings.Join(n.Cuts(), ", "); got != "a→b blackhole, a→etcd blackhole, →a blackhole" {
		t.Errorf("Cuts() = %q", got)
	}
	if err := n.Heal("a"); err != nil {
		t.Fatal(err)
	}
	works("a to b after the heal", addr(n.inbound, "b"))
	works("to a after the heal", addr(n.inbound, "a"))
	works("a to etcd after the heal", addr(n.etcd, "a"))
	if err := n.CutBetween("a", "b", Blackhole); err != nil {
		t.Fatal(err)
	}
	held("a to b cut apart", addr(n.inbound, "b"))
	works("a's etcd link with a and b cut apart", addr(n.etcd, "a"))
	if err := n.CutEtcd("b", Blackhole); err != nil {
		t.Fatal(err)
	}
	held("b to etcd", addr(n.etcd, "b"))
	n.HealAll()
	if cuts := n.Cuts(); len(cuts) != 0 {
		t.Fatalf("cuts left after HealAll: %v", cuts)
	}
	works("a to b after HealAll", addr(n.inbound, "b"))
	works("b to etcd after HealAll", addr(n.etcd, "b"))
	if err := n.Cut("c", Blackhole); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("cutting an unknown node: %v, want an error naming it", err)
	}
}
