package controller

import (
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
)

// A config changed in etcd behind the controller (etcdctl, a restore) is
// re-read when its watch event comes. If that read fails (etcd slow for
// longer than the request timeout, but not for a whole lease) the term
// ends and the next one loads the config. Before, the change was dropped
// with a warning: the controller and the brokers kept the old value until
// the next change of that key or the next failover.
func TestAConfigChangedInEtcdIsAppliedWhenItsReReadFails(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1, func(cfg *Config) {
		cfg.SessionTTL = 4 * time.Second
		cfg.RequestTimeout = 300 * time.Millisecond
	})
	c.waitActive(c1, 5*time.Second)
	retention := func() string {
		resp, err := c.admin(c1).DescribeConfigs(ctx(t), &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{
			{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: ""}}})
		if err != nil || len(resp.GetResults()) != 1 {
			return ""
		}
		for _, e := range resp.GetResults()[0].GetEntries() {
			if e.GetName() == "log.retention.ms" {
				return e.GetValue()
			}
		}
		return ""
	}
	if v := retention(); v == "60000" {
		t.Fatalf("log.retention.ms is %s before the change", v)
	}

	// The watch event reaches the controller while its loop is stalled;
	// when the loop handles it, its etcd link is silent: the re-read
	// times out.
	release, ok := c1.office.current().StallForTest()
	if !ok {
		t.Fatal("the term ended before the stall")
	}
	if _, err := c.etcd.Client(t).Put(ctx(t), "/tidemark/config/brokers/<default>", `{"log.retention.ms":"60000"}`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	c1.bridge.Pause()
	release()
	time.Sleep(800 * time.Millisecond)
	c1.bridge.Resume()

	eventually(t, 15*time.Second, "the controller to apply the changed config", func() bool { return retention() == "60000" })
	if !strings.Contains(c.logs.String(), "cannot read the changed config of broker entity <default>") {
		t.Fatalf("no step-down for the failed re-read in the logs:\n%s", c.logs.String())
	}
}
