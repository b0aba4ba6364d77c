package ctrl

import (
	"testing"

	"github.com/cockroachdb/datadriven"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// step runs one script command (input: the lines under it) and returns the
// LeaderAndIsr requests it pushed, by broker.
func (h *harness) step(t *testing.T, line, input string) map[int32][]*controlv1.LeaderAndIsrRequest {
	t.Helper()
	cmd, args, err := datadriven.ParseLine(line)
	if err != nil {
		t.Fatal(err)
	}
	h.t, h.pushed = t, nil
	if _, err := h.run(&datadriven.TestData{Pos: line, Cmd: cmd, CmdArgs: args, Input: input}); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	out := map[int32][]*controlv1.LeaderAndIsrRequest{}
	for _, p := range h.pushed {
		if p.req.LeaderAndIsr != nil {
			out[p.to] = append(out[p.to], p.req.LeaderAndIsr)
		}
	}
	return out
}

// The LeaderAndIsr that tells a registered incarnation all its roles is
// marked full, and no other: a broker that registered again stays fenced
// until the full one, so an incremental push marked full (a partition
// created on it) would let it lead on the stale roles it was not told.
func TestOnlyTheRegistrationPushIsAFullLeaderAndIsr(t *testing.T) {
	h := newHarness()
	h.setupScript(t, `
broker id=1 epoch=10
----
ok

broker id=2 epoch=11
----
ok

partition t/0 replicas=(1,2) leader=1 le=0 isr=(1,2) pe=0
----
ok

partition t/1 replicas=(2,1) leader=2 le=0 isr=(2,1) pe=0
----
ok
`)
	// Broker 2 bounces: the old incarnation's departure (an election, then
	// an ISR removal) is written and pushed to broker 1, then the new
	// incarnation is told its roles.
	h.step(t, "register id=2 epoch=30", "")
	elected := h.step(t, "write ok", "")
	registered := h.step(t, "write ok", "")
	if len(elected[1]) == 0 {
		t.Fatal("the departure's election was not pushed to broker 1")
	}
	for id, reqs := range elected {
		for _, r := range reqs {
			if r.GetFull() {
				t.Fatalf("the departure's election was pushed to broker %d as a full LeaderAndIsr", id)
			}
		}
	}
	if n := len(registered[2]); n != 1 {
		t.Fatalf("the new incarnation was pushed %d LeaderAndIsr requests, want 1", n)
	}
	roles := registered[2][0]
	if !roles.GetFull() || roles.GetBrokerEpoch() != 30 || len(roles.GetPartitions()) != 2 {
		t.Fatalf("the new incarnation's roles: full=%t broker epoch %d, %d partitions; want full, 30, both of t",
			roles.GetFull(), roles.GetBrokerEpoch(), len(roles.GetPartitions()))
	}
	for _, r := range registered[1] {
		if r.GetFull() {
			t.Fatal("the ISR removal pushed to broker 1 was marked full")
		}
	}

	// A topic created on it afterwards is an incremental push.
	h.step(t, "create", "n assign=(2,1)")
	created := h.step(t, "write ok", "")
	if len(created[2]) == 0 {
		t.Fatal("the new topic's leader was sent no LeaderAndIsr")
	}
	for id, reqs := range created {
		for _, r := range reqs {
			if r.GetFull() {
				t.Fatalf("the new topic's LeaderAndIsr to broker %d was marked full", id)
			}
		}
	}
}
