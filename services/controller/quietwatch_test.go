package controller

import (
	"context"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/internal/etcdtest"
)

// TestQuietControllerKeepsItsTermThroughCompactionAndEtcdBlip: a controller
// whose watched prefixes (brokers, configs, controllers) saw nothing since
// its load, while other keys changed and etcd's periodic compactor ran,
// must keep its term when its etcd link is cut and comes back: it missed
// nothing. Today its watches resume from the load's revision, fail with
// ErrCompacted, and the term ends (a failover for nothing).
func TestQuietControllerKeepsItsTermThroughCompactionAndEtcdBlip(t *testing.T) {
	c := newCluster(t, etcdtest.WithProgressNotify(100*time.Millisecond))
	ctl := c.startController(1)
	epoch := c.waitActive(ctl, 10*time.Second)
	c.startBrokers(ctl, 3)
	c.createTopic(ctl, "quiet", [][]int32{{1, 2, 3}}, nil)

	cli := c.etcd.Client(t)
	bg := context.Background()
	var last int64
	for range 5 { // writes outside the controller's watched prefixes
		resp, err := cli.Put(bg, "/tidemark/unrelated", "x")
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	time.Sleep(time.Second) // the quiet stretch (an hour in production)
	if _, err := cli.Compact(bg, last); err != nil {
		t.Fatal(err)
	}
	ctl.bridge.DropConnections() // an etcd restart or link blip

	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if got, ok := ctl.Active(); !ok || got != epoch {
			t.Fatalf("controller lost its term (active=%v epoch %d, was %d); logs mention watch failure %d times",
				ok, got, epoch, c.logs.count("watch failed"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := c.logs.count("watch failed"); n > 0 {
		t.Fatalf("%d watch failures logged", n)
	}
}

// TestBehindWatchCompactedThenResumedMatchesEtcd: the controller's link is
// paused while a broker registers and another deregisters and etcd compacts
// past the watch; after the resume the active controller (this term or the
// next) must know exactly the brokers etcd has.
func TestBehindWatchCompactedThenResumedMatchesEtcd(t *testing.T) {
	c := newCluster(t)
	ctl := c.startController(1, func(cfg *Config) { cfg.SessionTTL = 4 * time.Second })
	c.waitActive(ctl, 10*time.Second)
	c.startBrokers(ctl, 2)

	ctl.bridge.Pause()
	c.startBroker(3, "")
	c.brokers[2].stop()
	cli := c.etcd.Client(t)
	resp, err := cli.Put(context.Background(), "/tidemark/unrelated", "x")
	if err != nil {
		t.Fatal(err)
	}
	ctl.bridge.DropConnections() // the watch must resume from where it was
	if _, err := cli.Compact(context.Background(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	ctl.bridge.Resume()

	eventually(t, 15*time.Second, "controller knows brokers 1 and 3 only", func() bool {
		e := c.brokerIDsAtController(ctl)
		return len(e) == 2 && e[1] && e[3]
	})
	t.Logf("step-down logged: %d", c.logs.count("watch failed"))
}

func (c *cluster) brokerIDsAtController(ctl *testController) map[int32]bool {
	resp, err := c.admin(ctl).DescribeCluster(context.Background(), &adminv1.DescribeClusterRequest{})
	if err != nil {
		return nil
	}
	out := map[int32]bool{}
	for _, b := range resp.GetBrokers() {
		if b.GetAlive() {
			out[b.GetNode().GetId()] = true
		}
	}
	return out
}
