package quiet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"tidemark.io/services/client"
	"tidemark.io/services/clustertest"
	"tidemark.io/services/clustertest/history"
)

// A consumer tails an idle partition while its leader changes (crash,
// restart as follower, preferred election back), with quiet moments: it
// reads every record written afterwards exactly once, soon after it is
// acknowledged (here: within 15 s, a bound only a stuck consumer misses).
func TestQuietConsumerFollowsLeaderChanges(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3})
	clustertest.CreateAssigned(t, c, "idle", [][]int32{{1, 2, 3}}, nil)
	cl := c.ClientWith(client.Options{RequestTimeout: 5 * time.Second})
	pcl := c.ClientWith(client.Options{RequestTimeout: 5 * time.Second})
	p, err := client.NewProducer(pcl, client.ProducerOptions{Linger: -1, DeliveryTimeout: 30 * time.Second, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	cs, err := client.NewConsumer(cl, client.ConsumerOptions{Topic: "idle", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	seenAt := map[string]time.Time{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			recs, err := cs.Poll(ctx)
			cancel()
			if err != nil {
				t.Logf("poll: %v", err)
			}
			mu.Lock()
			for _, r := range recs {
				got = append(got, string(r.Value))
				seenAt[string(r.Value)] = time.Now()
			}
			mu.Unlock()
		}
	}()
	n := 0
	produce := func(k int) {
		for range k {
			v := fmt.Sprintf("v%d", n)
			n++
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := p.Produce(ctx, client.Record{Topic: "idle", Partition: 0, ManualPartition: true, Value: []byte(v)})
			cancel()
			if err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			deadline := time.Now().Add(15 * time.Second)
			for {
				mu.Lock()
				_, ok := seenAt[v]
				mu.Unlock()
				if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s not read within 15 s of its ack (read so far %v)", v, got)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	produce(3)
	time.Sleep(time.Second)

	c.CrashBroker(1)
	c.WaitFor(15*time.Second, "new leader", func() bool { l := c.Partition("idle", 0).GetLeader(); return l == 2 || l == 3 })
	time.Sleep(3 * time.Second)
	produce(3)

	c.StartBroker(1)
	c.WaitFor(20*time.Second, "broker 1 back in the ISR", func() bool {
		isr := c.Partition("idle", 0).GetIsr()
		for _, r := range isr {
			if r == 1 {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second)
	produce(2)
	if err := c.ElectPreferred([]history.TP{{Topic: "idle", Partition: 0}}); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(10*time.Second, "broker 1 leading", func() bool { return c.Leads(1, "idle", 0) })
	time.Sleep(3 * time.Second)
	produce(3)
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	for i, v := range got {
		if v != fmt.Sprintf("v%d", i) {
			t.Fatalf("read %v", got)
		}
	}
	if len(got) != n {
		t.Fatalf("read %d records, produced %d: %v", len(got), n, got)
	}
}
