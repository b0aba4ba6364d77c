package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
)

// Quiet moments: containers restarted, paused or replaced while nothing is
// produced. Without traffic no produce error prompts anyone to look again,
// so whatever a peer cached about a container (its connection, its IP
// address on the compose network, its session) must heal by itself.

// quietBound bounds the cluster's way back to full health after a quiet fault.
const quietBound = 60 * time.Second

// ip is a service container's address on the compose network.
func (s *stack) ip(svc string) string { return s.ipOf(s.id(svc)) }

// ipOf is a container's address on the compose network.
func (s *stack) ipOf(id string) string {
	out, _ := s.docker(30*time.Second, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id)
	return out
}

// holdAddress starts an idle container on the compose network (a
// loopback-only etcd from the stack's etcd image), which takes the lowest
// free address; it is removed when the test ends.
func (s *stack) holdAddress(t *testing.T) string {
	t.Helper()
	image, err := s.docker(30*time.Second, "inspect", "-f", "{{.Config.Image}}", s.id("etcd"))
	if err != nil {
		t.Fatal(err)
	}
	name := project + "-address-holder"
	_, _ = s.docker(30*time.Second, "rm", "-f", name)
	local := "http://127.0.0.1:"
	if _, err := s.docker(60*time.Second, "run", "-d", "--rm", "--name", name, "--network", s.network,
		"--label", "com.docker.compose.project="+project, image, "/usr/local/bin/etcd", "--data-dir", "/tmp/holder",
		"--listen-client-urls", local+"2379", "--advertise-client-urls", local+"2379",
		"--listen-peer-urls", local+"2380", "--initial-advertise-peer-urls", local+"2380",
		"--initial-cluster", "default="+local+"2380"); err != nil {
		t.Fatalf("starting a container to hold an address: %v", err)
	}
	t.Cleanup(func() { _, _ = s.docker(30*time.Second, "rm", "-f", name) })
	return name
}

// restartSvc restarts a service's container (SIGTERM, then start).
func (s *stack) restartSvc(t *testing.T, svc string) {
	t.Helper()
	if _, err := s.docker(60*time.Second, "restart", "-t", "30", s.id(svc)); err != nil {
		t.Fatalf("docker restart %s: %v", svc, err)
	}
}

// caughtUp is the condition of a quiet cluster: every partition has a
// leader and a full ISR, and every replica's log end offset, as its broker
// reported it to the active controller, equals the leader's high watermark.
func caughtUp(parts []*adminv1.PartitionView) (bool, string) {
	if len(parts) == 0 {
		return false, "no partitions"
	}
	for _, p := range parts {
		if p.GetLeader() < 0 || len(p.GetIsr()) != len(p.GetReplicas()) || !p.GetHighWatermarkKnown() {
			return false, fmt.Sprintf("p%d leader=%d isr=%s hw known=%v", p.GetPartition(), p.GetLeader(), ids(p.GetIsr()), p.GetHighWatermarkKnown())
		}
		for _, r := range p.GetReplicaViews() {
			if !r.GetReported() || r.GetLogEndOffset() != p.GetHighWatermark() {
				return false, fmt.Sprintf("p%d hw=%d: broker %d reported=%v leo=%d", p.GetPartition(), p.GetHighWatermark(), r.GetBrokerId(), r.GetReported(), r.GetLogEndOffset())
			}
		}
	}
	return true, ""
}

// snapshot is the active controller's view of the topic's partitions: the
// first message of a WatchCluster stream.
func (c *cluster) snapshot(topic string) ([]*adminv1.PartitionView, error) {
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	for resp, err := range c.admin.WatchCluster(ctx, &adminv1.WatchClusterRequest{}) {
		if err != nil {
			return nil, err
		}
		var out []*adminv1.PartitionView
		for _, p := range resp.GetPartitions() {
			if p.GetTopic() == topic {
				out = append(out, p)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("watch ended without a snapshot")
}

// waitCaughtUp waits, producing nothing, until the topic is caughtUp.
func (c *cluster) waitCaughtUp(tl *timeline, topic, after string) {
	c.t.Helper()
	begin := time.Now()
	var why string
	for time.Since(begin) < quietBound {
		parts, err := c.snapshot(topic)
		if err != nil {
			why = err.Error()
		} else if ok, w := caughtUp(parts); ok {
			tl.mark("%s: every partition led, full ISR, HW = LEO on every replica, %s later", after, secs(time.Since(begin)))
			return
		} else {
			why = w
		}
		time.Sleep(250 * time.Millisecond)
	}
	c.t.Fatalf("%s: topic %s not caught up within %v, without traffic: %s", after, topic, quietBound, why)
}

// rest calls the gateway's REST API as admin (client certificate).
func (c *cluster) rest(method, path, body string) (int, string, error) {
	tc, err := c.s.clientTLS("admin")
	if err != nil {
		return 0, "", err
	}
	scheme := "https"
	if tc == nil {
		scheme = "http"
	}
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	req, err := http.NewRequest(method, scheme+"://127.0.0.1:"+stackPorts["GATEWAY_PORT"]+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// firstTry writes one record to every partition and reads it back, each at
// the first attempt: through the gateway's REST API (a client inside the
// compose network) and with a host client whose producer does not retry.
func (c *cluster) firstTry(tl *timeline, topic, tag string) {
	c.t.Helper()
	for p := range 3 {
		value := fmt.Sprintf("%s-rest-%d", tag, p)
		b, _ := json.Marshal(map[string]any{"acks": -1, "timeoutMs": 10000,
			"records": map[string]any{"records": []any{map[string]any{"value": base64.StdEncoding.EncodeToString([]byte(value))}}}})
		path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records", topic, p)
		if code, body, err := c.rest(http.MethodPost, path, string(b)); err != nil || code != http.StatusOK {
			c.t.Errorf("REST produce to p%d at the first attempt: %d %s %v", p, code, body, err)
			continue
		}
		code, body, err := c.rest(http.MethodGet, path+"?offset=0&maxWaitMs=100", "")
		if err != nil || code != http.StatusOK || !strings.Contains(body, base64.StdEncoding.EncodeToString([]byte(value))) {
			c.t.Errorf("REST fetch of p%d at the first attempt: %d %.300s %v", p, code, body, err)
		}
	}
	// A new client: one that cached the leaders before the fault is told
	// NOT_LEADER once, which is Kafka's way, not a fault of the cluster.
	fresh := newCluster(c.t, c.s)
	pr, err := client.NewProducer(fresh.cl, client.ProducerOptions{Acks: client.AcksAll, Retries: -1,
		DeliveryTimeout: 20 * time.Second, MaxBlock: 10 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	defer func() {
		ctx, cancel := ctxFor(10 * time.Second)
		defer cancel()
		_ = pr.Close(ctx)
	}()
	for p := range int32(3) {
		value := fmt.Sprintf("%s-client-%d", tag, p)
		ctx, cancel := ctxFor(20 * time.Second)
		res, err := pr.Produce(ctx, client.Record{Topic: topic, Partition: p, ManualPartition: true, Value: []byte(value)})
		cancel()
		if err != nil {
			c.t.Errorf("produce to p%d without retries: %v", p, err)
			continue
		}
		recs, err := consume(fresh, topic, p, res.Offset+1, 15*time.Second)
		if err != nil || len(recs) == 0 || recs[len(recs)-1].value != value {
			c.t.Errorf("read back p%d: %v (%d records)", p, err, len(recs))
		}
	}
	tl.mark("%s: a write and a read on every partition succeeded at the first attempt (REST and client)", tag)
}

// quietTopic creates a topic, writes a record to each partition and waits
// until the cluster is caughtUp: the idle state the tests start from.
func (c *cluster) quietTopic(tl *timeline, base string) string {
	c.t.Helper()
	topic := topicName(base)
	c.createTopic(tl, topic, nil)
	c.firstTry(tl, topic, "before")
	c.waitCaughtUp(tl, topic, "idle")
	return topic
}

// TestQuietBrokerRestarts: while nothing is produced, a broker is
// restarted twice in quick succession; another is stopped and started on
// another address and made leader again, so its followers, the controller
// and the gateway must find it by name; a third is frozen (docker pause)
// for longer than its session, is fenced, and must rejoin every ISR after
// it thaws, without traffic.
func TestQuietBrokerRestarts(t *testing.T) {
	s, c, tl := begin(t, "quiet broker restarts and pause")
	topic := c.quietTopic(tl, "e2e.quiet-broker")
	defer c.deleteTopic(topic)
	t.Cleanup(func() { _, _ = s.docker(30*time.Second, "unpause", s.id("broker-2")) })

	svc := "broker-1"
	before := s.ip(svc)
	tl.mark("docker restart %s twice in quick succession (ip %s)", svc, before)
	s.restartSvc(t, svc)
	mid := s.ip(svc)
	s.restartSvc(t, svc)
	tl.mark("%s restarted: ip %s -> %s -> %s", svc, before, mid, s.ip(svc))
	if err := s.waitHealthy([]string{svc}, quietBound); err != nil {
		t.Fatal(err)
	}
	c.waitCaughtUp(tl, topic, "after the restarts")
	c.firstTry(tl, topic, "restarts")
	c.waitCaughtUp(tl, topic, "after the writes")

	// docker gives a restarted container its old address back when it is
	// free: a container started meanwhile takes it, so the broker comes
	// back on another one and the old address answers nothing.
	svc = "broker-3"
	before = s.ip(svc)
	s.stop(t, svc)
	holder := s.holdAddress(t)
	s.startSvc(t, svc)
	tl.mark("%s stopped and started while another container took its address: ip %s -> %s (%s now holds %s)",
		svc, before, s.ip(svc), holder, s.ipOf(holder))
	if s.ip(svc) == before {
		t.Logf("%s came back on its old address %s: the check below does not cover re-resolution", svc, before)
	}
	if err := s.waitHealthy([]string{svc}, quietBound); err != nil {
		t.Fatal(err)
	}
	c.waitCaughtUp(tl, topic, "after the new address")
	// Leading again, it is dialled by its followers and the gateway.
	c.electPreferred(topic, 3)
	c.waitTopic(tl, topic, "broker 3 leading again", quietBound, func(ps []*adminv1.PartitionDescription) bool {
		for _, p := range ps {
			if p.GetReplicas()[0] == 3 && p.GetLeader() != 3 {
				return false
			}
		}
		return true
	})
	c.waitCaughtUp(tl, topic, "after the preferred election")
	c.firstTry(tl, topic, "new address")
	c.waitCaughtUp(tl, topic, "after the writes")

	svc = "broker-2"
	session, _ := time.ParseDuration(sessionTimeoutMs + "ms")
	freeze := session + lagTime
	tl.mark("docker pause %s for %s (session %sms, lag time %s)", svc, freeze, sessionTimeoutMs, lagTime)
	pausedAt := time.Now()
	if _, err := s.docker(30*time.Second, "pause", s.id(svc)); err != nil {
		t.Fatal(err)
	}
	c.waitTopic(tl, topic, "broker 2 out of every ISR", quietBound, func(ps []*adminv1.PartitionDescription) bool {
		for _, p := range ps {
			for _, r := range p.GetIsr() {
				if r == 2 {
					return false
				}
			}
		}
		return true
	})
	time.Sleep(time.Until(pausedAt.Add(freeze)))
	if _, err := s.docker(30*time.Second, "unpause", s.id(svc)); err != nil {
		t.Fatal(err)
	}
	tl.mark("docker unpause %s", svc)
	c.waitCaughtUp(tl, topic, "after the thaw")
	c.firstTry(tl, topic, "thaw")
}

// TestQuietControlPlaneRestarts: the active controller's container
// restarted while idle, then the other one's, then the gateway's. The
// cluster stays whole, and the gateway's REST API answers as soon as it is
// healthy again.
func TestQuietControlPlaneRestarts(t *testing.T) {
	s, c, tl := begin(t, "quiet controller and gateway restarts")
	topic := c.quietTopic(tl, "e2e.quiet-control")
	defer c.deleteTopic(topic)

	dc, err := c.describeCluster()
	if err != nil {
		t.Fatal(err)
	}
	first := dc.GetController().GetId()
	for _, id := range []int32{first, 3 - first} {
		svc := controllerSvc(id)
		tl.mark("docker restart %s (ip %s)", svc, s.ip(svc))
		s.restartSvc(t, svc)
		tl.mark("%s restarted (ip %s)", svc, s.ip(svc))
		if err := s.waitHealthy([]string{svc}, quietBound); err != nil {
			t.Fatal(err)
		}
		c.ready(tl)
		c.waitCaughtUp(tl, topic, "after restarting "+svc)
		c.firstTry(tl, topic, svc)
	}

	tl.mark("docker restart gateway (ip %s)", s.ip("gateway"))
	s.restartSvc(t, "gateway")
	if err := s.waitHealthy([]string{"gateway"}, quietBound); err != nil {
		t.Fatal(err)
	}
	tl.mark("gateway healthy again (ip %s)", s.ip("gateway"))
	if code, body, err := c.rest(http.MethodGet, "/v1/cluster", ""); err != nil || code != http.StatusOK {
		t.Errorf("GET /v1/cluster right after the gateway is healthy: %d %.300s %v", code, body, err)
	}
	c.firstTry(tl, topic, "gateway")
}

// TestQuietBrokerMovesToAnotherAddress: a running broker's container is cut
// off for a moment and joins the network again on another address (a
// container started meanwhile took its old one), with nothing produced.
// Its connections from the old address are dead without a reset, its
// etcd connection among them: its lease lapses and the registration must
// be made again on a new connection. Before, the broker sent its
// re-registration into the dead connection, and stayed out of the cluster
// for TCP's 15 minutes of retransmissions.
func TestQuietBrokerMovesToAnotherAddress(t *testing.T) {
	s, c, tl := begin(t, "quiet broker moves to another address")
	topic := c.quietTopic(tl, "e2e.quiet-move")
	defer c.deleteTopic(topic)

	svc := "broker-2"
	before := s.ip(svc)
	cutAt := time.Now()
	s.disconnect(t, svc)
	holder := s.holdAddress(t)
	s.connect(t, svc)
	tl.mark("%s cut off and back on another address: %s -> %s (%s holds %s)", svc, before, s.ip(svc), holder, s.ipOf(holder))
	if s.ip(svc) == before {
		t.Fatalf("%s came back on its old address %s", svc, before)
	}
	// Its lease lapses within a session timeout of the cut, unless
	// renewed over a new connection.
	session, _ := time.ParseDuration(sessionTimeoutMs + "ms")
	time.Sleep(time.Until(cutAt.Add(session + 2*time.Second)))
	tl.mark("a session timeout (%s) after the cut", session)
	c.waitCaughtUp(tl, topic, "after the move")
	dc, err := c.describeCluster()
	if err != nil {
		t.Fatal(err)
	}
	tl.mark("%s", fmtCluster(dc))
	c.firstTry(tl, topic, "moved")
}
