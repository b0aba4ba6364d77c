package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	brokerv1 "tidemark.io/proto/gen/tidemark/broker/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// stackHosts are the names brokers and controllers advertise. They resolve
// on the compose network; on the host each is published on 127.0.0.1 under
// the same port, which is what dialStack does with them (as a hosts-file
// line "127.0.0.1 broker-1 ..." would).
var stackHosts = map[string]bool{
	"broker-1": true, "broker-2": true, "broker-3": true,
	"controller-1": true, "controller-2": true,
}

func dialStack(ctx context.Context, addr string) (net.Conn, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil && stackHosts[host] {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// clientOptions: short request timeouts and reconnect backoff, so that the
// client notices a dead or restarted broker within a second or two; on a
// secure stack the client presents the admin certificate.
func clientOptions(t *testing.T) client.Options {
	t.Helper()
	tc, err := st.clientTLS("admin")
	if err != nil {
		t.Fatalf("admin certificate: %v", err)
	}
	return client.Options{
		TLS:             tc,
		Dialer:          dialStack,
		RequestTimeout:  5 * time.Second,
		RetryBackoff:    100 * time.Millisecond,
		RetryBackoffMax: 500 * time.Millisecond,
		APITimeout:      20 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 3 * time.Second,
		})},
	}
}

// transportCreds is the gRPC dial option of a client presenting name's
// certificate (insecure on a plaintext stack).
func (s *stack) transportCreds(t *testing.T, name string) grpc.DialOption {
	t.Helper()
	tc, err := s.clientTLS(name)
	if err != nil {
		t.Fatalf("%s certificate: %v", name, err)
	}
	if tc == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(tc))
}

// cluster is one test's view of the stack: a broker client and an admin
// client, both on the host.
type cluster struct {
	t     *testing.T
	s     *stack
	cl    *client.Client
	admin *client.Admin
}

func newCluster(t *testing.T, s *stack) *cluster {
	t.Helper()
	cl, err := client.New(brokerAddrs, clientOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.NewAdmin(controllerAddrs, clientOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.Close()
		_ = cl.Close()
	})
	return &cluster{t: t, s: s, cl: cl, admin: admin}
}

func ctxFor(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// describe returns the topic's partitions in partition order.
func (c *cluster) describe(topic string) ([]*adminv1.PartitionDescription, error) {
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	resp, err := c.admin.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	for _, td := range resp.GetTopics() {
		if td.GetName() != topic {
			continue
		}
		if err := client.ItemError(td.GetErrorCode(), td.GetErrorMessage(), "describe %s", topic); err != nil {
			return nil, err
		}
		parts := slices.Clone(td.GetPartitions())
		slices.SortFunc(parts, func(a, b *adminv1.PartitionDescription) int { return int(a.GetPartition() - b.GetPartition()) })
		return parts, nil
	}
	return nil, fmt.Errorf("describe %s: not in the answer", topic)
}

func (c *cluster) describeCluster() (*adminv1.DescribeClusterResponse, error) {
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	return c.admin.DescribeCluster(ctx)
}

// fmtPart is one partition as the timeline shows it.
func fmtPart(p *adminv1.PartitionDescription) string {
	return fmt.Sprintf("p%d leader=%d epoch=%d isr=%s replicas=%s", p.GetPartition(), p.GetLeader(),
		p.GetLeaderEpoch(), ids(p.GetIsr()), ids(p.GetReplicas()))
}

func ids(v []int32) string {
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(s, ",") + "]"
}

// waitTopic polls the topic until cond holds for its partitions, logging
// every change of leaders and ISRs on the timeline. It fails the test after
// timeout and returns the partitions and the time it took.
func (c *cluster) waitTopic(tl *timeline, topic, what string, timeout time.Duration,
	cond func(parts []*adminv1.PartitionDescription) bool) ([]*adminv1.PartitionDescription, time.Duration) {
	c.t.Helper()
	begin := time.Now()
	deadline := begin.Add(timeout)
	last := ""
	var lastErr error
	for {
		parts, err := c.describe(topic)
		if err == nil {
			snap := make([]string, len(parts))
			for i, p := range parts {
				snap[i] = fmt.Sprintf("p%d leader=%d isr=%s", p.GetPartition(), p.GetLeader(), ids(p.GetIsr()))
			}
			if s := strings.Join(snap, "  "); s != last {
				if last != "" {
					tl.mark("  %s", s)
				}
				last = s
			}
			if cond(parts) {
				return parts, time.Since(begin)
			}
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %v (last state: %s; last error: %v)", what, timeout, last, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitCluster polls DescribeCluster until cond holds; it fails the test after timeout.
func (c *cluster) waitCluster(what string, timeout time.Duration, cond func(*adminv1.DescribeClusterResponse) bool) (*adminv1.DescribeClusterResponse, time.Duration) {
	c.t.Helper()
	begin := time.Now()
	deadline := begin.Add(timeout)
	var lastErr error
	var last *adminv1.DescribeClusterResponse
	for {
		dc, err := c.describeCluster()
		if err == nil {
			last = dc
			if cond(dc) {
				return dc, time.Since(begin)
			}
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %v (last: %s; last error: %v)", what, timeout, fmtCluster(last), lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fmtCluster(dc *adminv1.DescribeClusterResponse) string {
	if dc == nil {
		return "none"
	}
	var alive []int32
	for _, b := range dc.GetBrokers() {
		if b.GetAlive() {
			alive = append(alive, b.GetNode().GetId())
		}
	}
	return fmt.Sprintf("controller=%d epoch=%d alive brokers=%s", dc.GetController().GetId(), dc.GetControllerEpoch(), ids(alive))
}

func aliveBrokers(dc *adminv1.DescribeClusterResponse) []int32 {
	var alive []int32
	for _, b := range dc.GetBrokers() {
		if b.GetAlive() {
			alive = append(alive, b.GetNode().GetId())
		}
	}
	slices.Sort(alive)
	return alive
}

func brokerEpoch(dc *adminv1.DescribeClusterResponse, id int32) int64 {
	for _, b := range dc.GetBrokers() {
		if b.GetNode().GetId() == id {
			return b.GetBrokerEpoch()
		}
	}
	return -1
}

// ready waits until the whole cluster is up: an active controller, three
// live brokers.
func (c *cluster) ready(tl *timeline) {
	c.t.Helper()
	dc, took := c.waitCluster("three live brokers and an active controller", 90*time.Second, func(dc *adminv1.DescribeClusterResponse) bool {
		return dc.GetController().GetId() > 0 && len(aliveBrokers(dc)) == 3
	})
	tl.mark("cluster ready after %s: %s", secs(took), fmtCluster(dc))
}

// fullISR is the condition: every partition has a leader and every replica in its ISR.
func fullISR(parts []*adminv1.PartitionDescription) bool {
	for _, p := range parts {
		if p.GetLeader() < 0 || len(p.GetIsr()) != len(p.GetReplicas()) {
			return false
		}
	}
	return len(parts) > 0
}

// createTopic creates a topic of 3 partitions, replication factor 3 and
// min.insync.replicas 2 (with the given assignment, if any) and waits until
// every partition has a leader and a full ISR.
func (c *cluster) createTopic(tl *timeline, topic string, assignment [][]int32) []*adminv1.PartitionDescription {
	c.t.Helper()
	spec := &adminv1.TopicSpec{Name: topic, Configs: map[string]string{"min.insync.replicas": "2"}}
	if assignment == nil {
		spec.NumPartitions, spec.ReplicationFactor = 3, 3
	}
	for i, r := range assignment {
		spec.Assignments = append(spec.Assignments, &adminv1.ReplicaAssignment{Partition: int32(i), Replicas: r})
	}
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	if _, err := c.admin.CreateTopic(ctx, spec); err != nil {
		c.t.Fatalf("create topic %s: %v", topic, err)
	}
	parts, took := c.waitTopic(tl, topic, "leaders and full ISRs of "+topic, 30*time.Second, fullISR)
	tl.mark("topic %s created (3 partitions, RF 3, min.insync.replicas 2) in %s", topic, secs(took))
	if took := c.waitMetadata(topic, parts, 20*time.Second); took > 100*time.Millisecond {
		tl.mark("every broker's metadata shows the topic after %s", secs(took))
	}
	for _, p := range parts {
		tl.mark("  %s", fmtPart(p))
		if p.GetMinInsyncReplicas() != 2 {
			c.t.Errorf("%s-%d: min.insync.replicas %d, want 2", topic, p.GetPartition(), p.GetMinInsyncReplicas())
		}
	}
	return parts
}

// waitMetadata waits until every broker answers Metadata for the topic with
// all its partitions and the leaders the controller chose: the controller
// pushes new topics to the brokers after it has written them, and a producer
// that meets a broker still without them fails its records for partitions
// it does not know of.
func (c *cluster) waitMetadata(topic string, parts []*adminv1.PartitionDescription, timeout time.Duration) time.Duration {
	c.t.Helper()
	begin := time.Now()
	creds := c.s.transportCreds(c.t, "admin")
	for _, addr := range brokerAddrs {
		cc, err := grpc.NewClient("passthrough:///"+addr, creds, grpc.WithContextDialer(dialStack))
		if err != nil {
			c.t.Fatal(err)
		}
		bc := brokerv1.NewBrokerServiceClient(cc)
		var last string
		for {
			ctx, cancel := ctxFor(5 * time.Second)
			resp, err := bc.Metadata(ctx, &brokerv1.MetadataRequest{Topics: []string{topic}})
			cancel()
			if err == nil {
				if ok, why := metadataMatches(resp, topic, parts); ok {
					break
				} else {
					last = why
				}
			} else {
				last = err.Error()
			}
			if time.Since(begin) > timeout {
				_ = cc.Close()
				c.t.Fatalf("%s: metadata of %s not complete within %v: %s", addr, topic, timeout, last)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cc.Close()
	}
	return time.Since(begin)
}

func metadataMatches(resp *brokerv1.MetadataResponse, topic string, parts []*adminv1.PartitionDescription) (bool, string) {
	for _, tm := range resp.GetTopics() {
		if tm.GetName() != topic {
			continue
		}
		if len(tm.GetPartitions()) != len(parts) {
			return false, fmt.Sprintf("%d partitions of %d", len(tm.GetPartitions()), len(parts))
		}
		for _, pm := range tm.GetPartitions() {
			i := int(pm.GetPartition())
			if i < 0 || i >= len(parts) || pm.GetLeader() != parts[i].GetLeader() {
				return false, fmt.Sprintf("p%d leader %d", i, pm.GetLeader())
			}
		}
		return true, ""
	}
	return false, "topic not listed"
}

// deleteTopic removes a test's topic; failures are only logged.
func (c *cluster) deleteTopic(topic string) {
	ctx, cancel := ctxFor(20 * time.Second)
	defer cancel()
	if err := c.admin.DeleteTopic(ctx, topic); err != nil {
		c.t.Logf("delete topic %s: %v", topic, err)
	}
}

// electPreferred runs a preferred leader election for every partition of
// the topic; ELECTION_NOT_NEEDED counts as success.
func (c *cluster) electPreferred(topic string, partitions int) []*adminv1.ElectLeadersResult {
	c.t.Helper()
	req := &adminv1.ElectLeadersRequest{ElectionType: adminv1.ElectionType_ELECTION_TYPE_PREFERRED, TimeoutMs: 10000}
	for p := range partitions {
		req.Partitions = append(req.Partitions, &commonv1.TopicPartition{Topic: topic, Partition: int32(p)})
	}
	ctx, cancel := ctxFor(20 * time.Second)
	defer cancel()
	resp, err := c.admin.ElectLeaders(ctx, req)
	if err != nil {
		c.t.Fatalf("preferred election for %s: %v", topic, err)
	}
	for _, r := range resp.GetResults() {
		if code := kerr.Code(r.GetErrorCode()); code != kerr.None && code != kerr.ElectionNotNeeded {
			c.t.Errorf("preferred election %s-%d: %v %s", r.GetTopic(), r.GetPartition(), code, r.GetErrorMessage())
		}
	}
	return resp.GetResults()
}

// brokerSvc is the compose service of a broker id.
func brokerSvc(id int32) string { return fmt.Sprintf("broker-%d", id) }

// controllerSvc is the compose service of a controller id.
func controllerSvc(id int32) string { return fmt.Sprintf("controller-%d", id) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// timeline prints what a test saw, stamped with the time since it began,
// and appends it to timelines.txt in the log directory.
type timeline struct {
	name  string
	begin time.Time
	mu    sync.Mutex
	lines []string
}

func newTimeline(t *testing.T, name string) *timeline {
	tl := &timeline{name: name, begin: time.Now()}
	fmt.Printf("--- timeline %s (%s)\n", name, tl.begin.Format("15:04:05"))
	t.Cleanup(func() {
		status := "passed"
		if t.Failed() {
			status = "FAILED"
		}
		tl.mark("%s %s", name, status)
		tl.save()
	})
	return tl
}

func (tl *timeline) mark(format string, args ...any) {
	line := fmt.Sprintf("%8s  %s", "+"+secs(time.Since(tl.begin)), fmt.Sprintf(format, args...))
	tl.mu.Lock()
	tl.lines = append(tl.lines, line)
	tl.mu.Unlock()
	fmt.Printf("    %s\n", line)
}

func (tl *timeline) save() {
	dir := os.Getenv("TIDEMARK_E2E_LOG_DIR")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "timelines.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	fmt.Fprintf(f, "--- %s (%s)\n%s\n", tl.name, tl.begin.Format(time.RFC3339), strings.Join(tl.lines, "\n"))
}
