package ctrl

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"strings"
	"testing"

	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
)

// oneWrite is a core with a partition-state write in flight.
func oneWrite(t *testing.T) *core {
	t.Helper()
	c := newCore(&commonv1.Node{Id: 100}, 1, slog.New(slog.DiscardHandler), policy{}, nil)
	tp := &topic{name: "t"}
	p := &partition{t: tp, id: 0, replicas: election.Assignment{1, 2},
		rec: metastore.PartitionRecord{Topic: "t", State: metastore.PartitionState{Leader: 1, ISR: []int32{1, 2}}, ModRevision: 5}}
	tp.parts = []*partition{p}
	c.topics["t"] = tp
	c.brokers[2] = &broker{info: metastore.Broker{BrokerInfo: metastore.BrokerInfo{ID: 2}, Epoch: 7}}
	c.commit([]change{{p: p, d: election.Decision{State: election.PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}}, Changed: true},
		cause: causeOffline}}, func([]*partition, error) {})
	if c.wait == nil {
		t.Fatal("commit did not wait for its write")
	}
	return c
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	f()
}

// Write, then push, enforced: while a write is in flight the core emits
// nothing and takes no other event.
func TestCoreRefusesToActWhileAWriteIsInFlight(t *testing.T) {
	c := oneWrite(t)
	mustPanic(t, "a push while a write is in flight", func() { c.pushUpdateMetadata(nil, nil, true, nil) })
	c = oneWrite(t)
	mustPanic(t, "an event while a write is in flight", func() { c.handle(evBrokerDeparted{id: 1}) })
	c = oneWrite(t)
	mustPanic(t, "the wrong result for the write in flight", func() { c.handle(evTopicRead{}) })
	c = newCore(&commonv1.Node{Id: 100}, 1, slog.New(slog.DiscardHandler), policy{}, nil)
	mustPanic(t, "a result with nothing in flight", func() { c.handle(evWriteResult{}) })
}

// The core is pure: no method of it starts a goroutine, reads the clock,
// sleeps, arms a timer, sends, receives or closes, or draws randomness from
// anything but the source it was given (core.rng, which scripts seed). (It has no field that
// reaches etcd or a broker.) It may make channels, a session's kick and a
// topic's done, for the shell to close.
func TestCoreMethodsDoNoIOAndReadNoClock(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{"time.Now": true, "time.Since": true, "time.Sleep": true, "time.After": true,
		"time.AfterFunc": true, "time.NewTimer": true, "time.NewTicker": true, "context.WithTimeout": true,
		"context.Background": true,
		// math/rand's global, self-seeded source, and new sources.
		"rand.Int": true, "rand.IntN": true, "rand.N": true, "rand.Int32": true, "rand.Int32N": true,
		"rand.Int64": true, "rand.Int64N": true, "rand.Uint32": true, "rand.Uint64": true, "rand.UintN": true,
		"rand.Uint32N": true, "rand.Uint64N": true, "rand.Float32": true, "rand.Float64": true, "rand.Perm": true,
		"rand.Shuffle": true, "rand.ExpFloat64": true, "rand.NormFloat64": true, "rand.New": true, "rand.NewPCG": true,
		"rand.NewChaCha8": true, "rand.Intn": true, "rand.Seed": true}
	methods := 0
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
					continue
				}
				star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
				if !ok {
					continue
				}
				if id, ok := star.X.(*ast.Ident); !ok || id.Name != "core" {
					continue
				}
				methods++
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if n == nil {
						return false
					}
					where := fmt.Sprintf("%s (core.%s)", fset.Position(n.Pos()), fn.Name.Name)
					switch n := n.(type) {
					case *ast.GoStmt:
						t.Errorf("%s starts a goroutine", where)
					case *ast.SendStmt:
						t.Errorf("%s sends on a channel", where)
					case *ast.UnaryExpr:
						if n.Op == token.ARROW {
							t.Errorf("%s receives from a channel", where)
						}
					case *ast.SelectStmt:
						t.Errorf("%s selects", where)
					case *ast.SelectorExpr:
						if x, ok := n.X.(*ast.Ident); ok && forbidden[x.Name+"."+n.Sel.Name] {
							t.Errorf("%s calls %s.%s", where, x.Name, n.Sel.Name)
						}
					case *ast.CallExpr:
						if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "close" {
							t.Errorf("%s closes a channel", where)
						}
					}
					return true
				})
			}
		}
	}
	if methods < 50 {
		t.Fatalf("found only %d core methods: the scan is looking in the wrong place", methods)
	}
}
