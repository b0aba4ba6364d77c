package ctrl

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/prometheus/client_golang/prometheus/testutil"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/logging"
)

// runLogged runs script on a new harness whose core logs to the returned
// buffer; every command must succeed (its effects are the scripts' concern).
func runLogged(t *testing.T, script string) *bytes.Buffer {
	t.Helper()
	h := newHarness()
	var logs bytes.Buffer
	h.c.log = slog.New(slog.NewTextHandler(&logs, nil))
	datadriven.RunTestFromString(t, script, func(t *testing.T, d *datadriven.TestData) string {
		h.t = t
		if _, err := h.run(d); err != nil {
			t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
		}
		return "ok\n"
	})
	return &logs
}

const uncleanSetup = `
broker id=1 epoch=10
----
ok

broker id=2 epoch=11
----
ok

partition t/0 replicas=(1,2) leader=1 le=4 isr=(1) pe=9
----
ok

unclean topic=t
----
ok
`

const uncleanElection = `
depart id=1 epoch=10
----
ok

write ok
----
ok
`

// An unclean election's error names how many committed offsets the new
// leader lacks: the last leader's reported high watermark less the new
// leader's reported log end offset.
func TestUncleanElectionLogsTheCommittedOffsetsLost(t *testing.T) {
	logs := runLogged(t, uncleanSetup+`
open id=1 epoch=10
----
ok

report id=1
t/0 leo=120 hw=100 le=4 leader
----
ok

open id=2 epoch=11
----
ok

report id=2
t/0 leo=70
----
ok
`+uncleanElection)
	line := uncleanLine(t, logs.String())
	for _, want := range []string{"last_leader_high_watermark=100", "last_leader_reporting=1", "new_leader_log_end_offset=70", "committed_offsets_lost=30"} {
		if !strings.Contains(line, want) {
			t.Errorf("unclean election line lacks %s:\n%s", want, line)
		}
	}
}

// Without the brokers' reports the loss is said to be unknown, not 0.
func TestUncleanElectionWithoutReportsSaysTheLossIsUnknown(t *testing.T) {
	line := uncleanLine(t, runLogged(t, uncleanSetup+uncleanElection).String())
	if !strings.Contains(line, `committed_offsets_lost="unknown: no leader reported`) {
		t.Fatalf("unclean election line does not say the loss is unknown:\n%s", line)
	}
}

func uncleanLine(t *testing.T, logs string) string {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "Unclean leader election") {
			return l
		}
	}
	t.Fatalf("no unclean election logged:\n%s", logs)
	return ""
}

// ISR members the controller removes itself (a broker gone, a controlled
// shutdown) are counted by cause: the leader's own counter never sees them.
func TestControllerISRShrinksAreCountedByCause(t *testing.T) {
	m := NewMetrics(nil)
	a := &Active{core: &core{}, d: Deps{Metrics: m}, ring: newRing(4)}
	a.decided(effDecision{shrunk: causeShutdown, ev: &controlv1.ClusterEvent{}})
	a.decided(effDecision{label: causeOffline, shrunk: causeOffline, ev: &controlv1.ClusterEvent{}})
	a.decided(effDecision{label: causePreferred, ev: &controlv1.ClusterEvent{}})
	for c, want := range map[cause]float64{causeShutdown: 1, causeOffline: 1, causePreferred: 0} {
		if n := testutil.ToFloat64(m.isrShrinks.WithLabelValues(string(c))); n != want {
			t.Errorf("ISR shrinks counted for %s: %v, want %v", c, n, want)
		}
	}
}

// A stale leader's ISR change (FENCED_LEADER_EPOCH) and a zombie broker's
// request (STALE_BROKER_EPOCH) are counted by code and logged, a broker
// retrying them every 200 ms at most once per alterRefusalWarnEvery.
func TestRefusedISRChangesAreCountedAndLoggedRateLimited(t *testing.T) {
	var logs bytes.Buffer
	m := NewMetrics(nil)
	a := &Active{core: &core{log: slog.New(slog.NewTextHandler(&logs, nil))}, d: Deps{Metrics: m},
		alterRefusals: logging.NewLimiter(alterRefusalWarnEvery)}
	req := &controlv1.AlterPartitionRequest{BrokerId: 2, BrokerEpoch: 7, Partitions: []*controlv1.AlterPartitionItem{{Topic: "t"}}}
	for range 3 {
		a.noteAlterRefused(req, "t-0", kerr.New(kerr.FencedLeaderEpoch, "request has leader epoch 3; current leader epoch is 4"))
	}
	a.noteAlterRefused(req, "", kerr.New(kerr.StaleBrokerEpoch, "broker 2 sent epoch 7; its live registration has epoch 9"))
	a.noteAlterRefused(req, "", kerr.New(kerr.NotController, "the term ended"))
	for code, want := range map[kerr.Code]float64{kerr.FencedLeaderEpoch: 3, kerr.StaleBrokerEpoch: 1, kerr.NotController: 0} {
		if n := testutil.ToFloat64(m.alterRefused.WithLabelValues(code.String())); n != want {
			t.Errorf("refusals counted for %s: %v, want %v", code, n, want)
		}
	}
	got := logs.String()
	if n := strings.Count(got, "Refused an ISR change"); n != 2 {
		t.Fatalf("%d lines, want 2 (one per code within %v):\n%s", n, alterRefusalWarnEvery, got)
	}
	if !strings.Contains(got, "broker=2 broker_epoch=7 partition=t-0 code=FENCED_LEADER_EPOCH") {
		t.Fatalf("the stale leader's refusal does not name the broker, partition and code:\n%s", got)
	}
}
