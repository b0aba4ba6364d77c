package clustertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"tidemark.io/services/clustertest/history"
)

// The history checker must be able to fail: these tests run a real cluster
// in a configuration known to lose acknowledged writes, record what the
// clients saw, and pass only when the checker reports the loss by itself.

// KIP-101's scenario on the whole cluster (the recipe of the broker's
// TestKIP101AckedRecordLostOnlyWithHighWatermarkTruncation, with the real
// controller). The real controller fences a restarted follower out of the
// ISR, so here the follower truncates on a leader change instead of a
// restart: m0 is acknowledged by all three replicas of a min.insync 2
// partition but neither follower has learnt the HW yet; the followers are
// cut apart, the leader stops gracefully, and the second follower, told of
// the new leader, truncates to its HW (replica.truncation.mode=
// high-watermark) and cannot fetch m0 back; then the new leader dies and
// the truncated follower, still in the ISR, leads without m0. The checker
// must report m0 lost. With leader epochs the follower keeps m0 (it cannot
// ask the unreachable leader where to truncate) and the checker must
// report nothing.
func TestCheckerFindsKIP101LossWithHighWatermarkTruncation(t *testing.T) {
	for _, tc := range []struct {
		mode string
		lost bool
	}{
		{"high-watermark", true},
		{"leader-epoch", false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			c := Start(t, Options{BrokerSettings: map[string]string{
				"replica.truncation.mode":   tc.mode,
				"replica.fetch.wait.max.ms": "5000", // the followers learn the HW late
				"replica.lag.time.max.ms":   "30000",
			}})
			c.CreateTopic("k", 1, 3, map[string]string{"min.insync.replicas": "2"})
			tp := history.TP{Topic: "k"}
			rec := history.NewRecorder()
			reps := c.Partition("k", 0).GetReplicas()
			leader, next, last := reps[0], reps[1], reps[2]
			// The followers' fetches park for 5s once caught up; let them
			// get there before producing.
			c.WaitFor(10*time.Second, "every replica in the ISR", func() bool { return len(c.Partition("k", 0).GetIsr()) == 3 })
			time.Sleep(300 * time.Millisecond)
			if _, err := c.produceOnce(rec, tp, history.AcksAll, "m0"); err != nil {
				t.Fatalf("produce m0: %v", err)
			}
			for _, id := range []int32{next, last} {
				if rs := c.replicaState(id, tp); rs.HW != 0 || rs.LEO != 1 {
					t.Fatalf("precondition: follower %d hw=%d leo=%d, want 0/1", id, rs.HW, rs.LEO)
				}
			}
			rec.Event(history.Fault, "followers %d and %d cut apart", next, last)
			c.Net.Partition(BrokerName(next), BrokerName(last))
			rec.Event(history.Fault, "leader %d stopped gracefully", leader)
			if err := c.StopBroker(leader); err != nil {
				t.Fatalf("stop leader %d: %v", leader, err)
			}
			c.WaitFor(10*time.Second, fmt.Sprintf("broker %d to lead", next), func() bool {
				return c.Partition("k", 0).GetLeader() == next && c.Leads(next, "k", 0)
			})
			if tc.lost {
				c.WaitFor(10*time.Second, fmt.Sprintf("broker %d to truncate to its HW", last), func() bool {
					return c.replicaState(last, tp).LEO == 0
				})
			} else {
				time.Sleep(time.Second)
			}
			rec.Event(history.Fault, "new leader %d crashed", next)
			c.CrashBroker(next)
			c.Net.HealAll()
			stopped := rec.Event(history.Heal, "network healed")
			c.WaitFor(20*time.Second, fmt.Sprintf("broker %d to lead", last), func() bool {
				return c.Partition("k", 0).GetLeader() == last && c.Leads(last, "k", 0)
			})
			rep := history.Check(rec.History(), c.final([]history.TP{tp}, stopped, nil),
				history.Options{Durable: map[string]bool{"k": history.Promised(2, false)}})
			t.Logf("checker:\n%s", rep)
			if !tc.lost {
				if !rep.OK() {
					t.Fatalf("leader-epoch truncation kept m0, but the checker reported a violation")
				}
				return
			}
			if rep.Count(history.LostWrite) != 1 || rep.Violations[0].Offset != 0 || len(rep.Violations[0].Events) == 0 {
				t.Fatalf("the checker did not report m0 lost at offset 0 with the faults around it")
			}
		})
	}
}

// Unclean election with real brokers (the recipe of
// TestUncleanElectionOffThenOn): a follower is cut off and leaves the ISR
// while acknowledged acks=all writes continue; every ISR member dies and,
// the topic allowing unclean elections, the out-of-sync replica leads with
// only what it had. The test claims the topic's writes durable, as if its
// configuration promised so, and the checker must report the missing ones.
func TestCheckerFindsUncleanElectionLoss(t *testing.T) {
	c := Start(t, Options{BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
	c.CreateTopic("u", 1, 3, map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
	tp := history.TP{Topic: "u"}
	rec := history.NewRecorder()
	reps := c.Partition("u", 0).GetReplicas()
	leader, other, lagging := reps[0], reps[1], reps[2]
	if _, err := c.produceOnce(rec, tp, history.AcksAll, "a0"); err != nil {
		t.Fatal(err)
	}
	c.SameLogs("u", 0, reps...)
	rec.Event(history.Fault, "broker %d cut from leader %d", lagging, leader)
	c.Net.Partition(BrokerName(leader), BrokerName(lagging))
	var acked []string
	for i := 1; i <= 5; i++ {
		v := fmt.Sprintf("a%d", i)
		if _, err := c.produceOnce(rec, tp, history.AcksAll, v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		acked = append(acked, v)
	}
	c.WaitFor(10*time.Second, "the cut-off follower to leave the ISR", func() bool {
		return !slices.Contains(c.Partition("u", 0).GetIsr(), lagging)
	})
	rec.Event(history.Fault, "ISR members %d and %d crashed", leader, other)
	c.CrashBroker(leader)
	c.CrashBroker(other)
	c.Net.HealAll()
	stopped := rec.Event(history.Heal, "network healed")
	c.WaitFor(15*time.Second, "the out-of-sync replica to be elected", func() bool {
		return c.Partition("u", 0).GetLeader() == lagging && c.Leads(lagging, "u", 0)
	})
	final := c.final([]history.TP{tp}, stopped, nil)

	// As configured (unclean on), nothing was promised: only counted.
	rep := history.Check(rec.History(), final, history.Options{Durable: map[string]bool{"u": history.Promised(2, true)}})
	if !rep.OK() || rep.Stats.LostUnpromised != len(acked) {
		t.Fatalf("unclean topic, nothing promised: want %d lost writes counted and no violation, got\n%s", len(acked), rep)
	}
	// Claimed durable: every write the unclean leader lacks is reported.
	rep = history.Check(rec.History(), final, history.Options{Durable: map[string]bool{"u": true}})
	t.Logf("checker:\n%s", rep)
	if rep.Count(history.LostWrite)+rep.Count(history.MovedWrite) != len(acked) {
		t.Fatalf("want %d acknowledged writes reported lost (%v)", len(acked), acked)
	}
	for _, v := range rep.Violations {
		if v.Kind == history.LostWrite || v.Kind == history.MovedWrite {
			if v.Offset < 1 || v.Offset > int64(len(acked)) || len(v.Events) == 0 {
				t.Fatalf("violation %s: want offsets 1..%d with the crash around it", v, len(acked))
			}
		}
	}
}
