package clustertest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/broker"
	"tidemark.io/services/metastore"
)

// A broker that heard no keepalive answer for a whole session timeout gives
// its registration up, though etcd may have kept the lease alive (the
// requests got through, the answers did not: a one-way stall). It then
// revokes that lease and registers again at once. Waiting it out instead
// left the controller counting the broker live under its old epoch, giving
// leaderships to replicas that had fenced themselves, for up to a session
// timeout (seen after a network cut shorter than the TTL).
func TestBrokerGivenUpByItselfRevokesItsOwnLeaseToRegisterAgain(t *testing.T) {
	const ttl = 4 * time.Second
	c := Start(t, Options{Brokers: 3, Adjust: func(cfg *broker.Config) { cfg.SessionTimeout = ttl }})
	const id = 3
	cli := c.Etcd.Client(t)
	key := metastore.DefaultPrefix + "/brokers/ids/" + metastore.BrokerEntity(id)
	held := func() (lease clientv3.LeaseID, epoch int64) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return 0, 0
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease), resp.Kvs[0].CreateRevision
	}
	oldLease, oldEpoch := held()
	if oldLease == 0 {
		t.Fatalf("broker %d is not registered", id)
	}

	// The broker's link to etcd stalls; etcd still hears the lease renewed
	// (here by the test, as by the broker's own requests getting through).
	c.EtcdLink(id).Pause()
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		tick := time.NewTicker(ttl / 8)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := cli.KeepAliveOnce(ctx, oldLease)
			cancel()
			if err != nil {
				t.Errorf("renewing the broker's lease at etcd: %v", err)
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	// Past the broker's own deadline (the TTL after its last answered
	// keepalive, checked every TTL/3): it has given the registration up.
	time.Sleep(ttl + ttl/3 + ttl/4)
	if l, _ := held(); l != oldLease {
		t.Fatalf("the old registration's key is not held by its lease any more (lease %x): the test did not keep it alive", l)
	}
	close(stop)
	<-renewed
	resumed := time.Now()
	c.EtcdLink(id).Resume()

	c.WaitFor(3*ttl, "broker registered again", func() bool {
		l, e := held()
		return l != 0 && l != oldLease && e > oldEpoch
	})
	// Waiting the old lease out would take about a TTL from the last
	// renewal; revoking it takes a round trip or two.
	if took := time.Since(resumed); took > ttl/3 {
		t.Errorf("registered again %v after etcd was reachable, want well under the %v the old lease had left", took, ttl)
	}
}
