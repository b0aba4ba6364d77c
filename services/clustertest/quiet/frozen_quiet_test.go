package quiet

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"tidemark.io/services/clustertest"
)

// A broker frozen (as by SIGSTOP: every link of it stalls, etcd's too)
// for longer than its lease and replica.lag.time.max.ms, with nothing
// produced before, during or after, then let run again. Whether it led the
// partition or followed: it is dropped from the ISR while frozen; once
// resumed it must not go on leading on its stale state (a new leader, in
// a newer epoch, has it), and must rejoin the ISR with no write to carry
// it there, with HW = LEO and the same log on every replica. A write
// after that is acknowledged and replicated everywhere.
func TestFrozenIdleBrokerRejoinsWithoutTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes a broker past its lease")
	}
	for _, role := range []string{"leader", "follower"} {
		t.Run(role, func(t *testing.T) {
			c := clustertest.Start(t, clustertest.Options{Brokers: 3, BrokerSettings: map[string]string{"replica.lag.time.max.ms": "1000"}})
			c.CreateTopic("frozen", 1, 3, map[string]string{"min.insync.replicas": "2"})
			var want []string
			for i := range 3 {
				v := fmt.Sprintf("f%d", i)
				if _, err := c.Produce(context.Background(), "frozen", 0, -1, v); err != nil {
					t.Fatal(err)
				}
				want = append(want, v)
			}
			c.WaitSettled(15*time.Second, "frozen", 0, []int32{1, 2, 3})
			pd := c.Partition("frozen", 0)
			victim := pd.GetLeader()
			if role == "follower" {
				victim = pd.GetReplicas()[0]
				if victim == pd.GetLeader() {
					victim = pd.GetReplicas()[1]
				}
			}
			epoch := pd.GetLeaderEpoch()

			c.EtcdLink(victim).Pause()
			c.Net.Pause(clustertest.BrokerName(victim))
			c.WaitFor(4*c.BrokerConfig(victim).SessionTimeout, "the frozen broker out of the ISR", func() bool {
				pd := c.Partition("frozen", 0)
				return pd.GetLeader() > 0 && pd.GetLeader() != victim && !slices.Contains(pd.GetIsr(), victim)
			})
			time.Sleep(2 * time.Second) // frozen a while longer, nothing produced
			c.Net.Resume(clustertest.BrokerName(victim))
			c.EtcdLink(victim).Resume()

			c.WaitFor(30*time.Second, "the resumed broker back in the ISR with nothing produced", func() bool {
				return slices.Contains(c.Partition("frozen", 0).GetIsr(), victim)
			})
			leader := c.Partition("frozen", 0).GetLeader()
			if role == "leader" && (leader == victim || c.Partition("frozen", 0).GetLeaderEpoch() <= epoch) {
				t.Fatalf("after the freeze broker %d leads in epoch %d (was %d): want another leader in a newer epoch",
					leader, c.Partition("frozen", 0).GetLeaderEpoch(), epoch)
			}
			c.WaitFor(15*time.Second, "only the elected leader acting as leader", func() bool {
				for id := int32(1); id <= 3; id++ {
					if id != leader && c.Leads(id, "frozen", 0) {
						return false
					}
				}
				return c.Leads(leader, "frozen", 0)
			})
			c.WaitSettled(15*time.Second, "frozen", 0, []int32{1, 2, 3})
			if got := c.SameLogs("frozen", 0, 1, 2, 3); !slices.Equal(got, want) {
				t.Fatalf("replicas hold %v, want %v", got, want)
			}
			if _, err := c.Produce(context.Background(), "frozen", 0, -1, "after"); err != nil {
				t.Fatalf("acks=all produce after the freeze: %v", err)
			}
			want = append(want, "after")
			c.WaitHWAtLEO("frozen", 0, 1, 2, 3)
			if got := c.SameLogs("frozen", 0, 1, 2, 3); !slices.Equal(got, want) {
				t.Fatalf("replicas hold %v after the last write, want %v", got, want)
			}
		})
	}
}
