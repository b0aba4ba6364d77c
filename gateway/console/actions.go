package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"tidemark.io/gateway/internal/restauth"
	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// Limits of the actions.
const (
	maxProduceCount = 10000
	maxFaultDelayMs = 60000
	maxActionBody   = 64 << 10
	actionTimeout   = 30 * time.Second
	nodeTimeout     = 45 * time.Second // a graceful stop may take 30 s
)

// The topic configs the console changes.
const (
	cfgMinISR  = "min.insync.replicas"
	cfgUnclean = "unclean.leader.election.enable"
)

// action wraps an action endpoint: refused (403) unless actions are
// enabled, JSON only, same origin only, bounded body and time. The result
// is answered as JSON; an error as a resterr.Body.
func (c *Console) action(fn func(ctx context.Context, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !c.opts.EnableActions {
			writeRefusal(w, http.StatusForbidden, kerr.New(kerr.PolicyViolation,
				"console actions are disabled; the gateway enables them with --console.actions"))
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				writeRefusal(w, http.StatusForbidden, kerr.New(kerr.PolicyViolation, "cross-origin action refused (origin %s)", o))
				return
			}
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			writeRefusal(w, http.StatusUnsupportedMediaType, kerr.New(kerr.InvalidRequest,
				"actions take a JSON body (Content-Type: application/json)"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxActionBody)
		ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
		defer cancel()
		start := time.Now()
		res, err := fn(ctx, r)
		if err != nil {
			ae := toAPIError(err)
			c.log.Info("console action refused", "path", r.URL.Path, "code", ae.body.Name, "err", ae.body.Message)
			writeError(w, ae.status, ae.body)
			return
		}
		c.log.Info("console action", "path", r.URL.Path, "took", time.Since(start))
		writeJSON(w, http.StatusOK, res)
	}
}

// decode reads a JSON body into v; an empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return refuse(kerr.RecordListTooLarge, "request body is larger than %d bytes", mbe.Limit)
		}
		return badRequest("", "bad JSON body: %v", err)
	}
	return nil
}

// partitionKnown checks a partition against the latest snapshot (when there
// is one), so that a typo fails at once rather than after metadata retries.
func (c *Console) partitionKnown(topic string, partition int32) error {
	snap := c.hub.current()
	if snap == nil {
		return nil
	}
	for _, p := range snap.Partitions {
		if p.Topic == topic && p.Partition == partition {
			return nil
		}
	}
	return refuse(kerr.UnknownTopicOrPartition, "no partition %s-%d in the cluster", topic, partition)
}

// --- produce ---

type produceRequest struct {
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	Count     int    `json:"count"`
	// Acks is "all" (or "-1"), "1" or "0"; default all.
	Acks string `json:"acks"`
	// Value prefixes each record's value; default "console".
	Value string `json:"value"`
}

type produceResult struct {
	Topic       string         `json:"topic"`
	Partition   int32          `json:"partition"`
	Acks        string         `json:"acks"`
	Requested   int            `json:"requested"`
	Succeeded   int            `json:"succeeded"`
	Failed      int            `json:"failed"`
	FirstOffset int64          `json:"firstOffset"`
	LastOffset  int64          `json:"lastOffset"`
	LeaderEpoch int32          `json:"leaderEpoch"`
	Errors      map[string]int `json:"errors"`
	FirstError  *errorBody     `json:"firstError,omitempty"`
	TookMs      int64          `json:"tookMs"`
}

func parseAcks(s string) (client.Acks, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "all", "-1":
		return client.AcksAll, nil
	case "1":
		return client.AcksLeader, nil
	case "0":
		return client.AcksNone, nil
	}
	return 0, badRequest("acks", "acks must be all, 1 or 0, not %q", s)
}

// produce writes count records to one partition with the chosen acks. All
// refused: the error of the first (NOT_ENOUGH_REPLICAS, say); some refused:
// the counts by error name.
func (c *Console) produce(ctx context.Context, r *http.Request) (any, error) {
	var req produceRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Topic == "" {
		return nil, badRequest("topic", "topic is required")
	}
	if req.Partition == nil || *req.Partition < 0 {
		return nil, badRequest("partition", "partition is required (>= 0)")
	}
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count < 0 || req.Count > maxProduceCount {
		return nil, badRequest("count", "count must be 1..%d", maxProduceCount)
	}
	acks, err := parseAcks(req.Acks)
	if err != nil {
		return nil, err
	}
	if req.Value == "" {
		req.Value = "console"
	}
	part := *req.Partition
	if err := c.partitionKnown(req.Topic, part); err != nil {
		return nil, err
	}
	user, _ := restauth.UserFrom(r.Context())
	p, err := c.producer(user, acks)
	if err != nil {
		return nil, err
	}
	res := &produceResult{Topic: req.Topic, Partition: part, Acks: acks.String(), Requested: req.Count,
		FirstOffset: -1, LastOffset: -1, LeaderEpoch: -1, Errors: map[string]int{}}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	start := time.Now()
	stamp := start.Format("15:04:05.000")
	wg.Add(req.Count)
	for i := range req.Count {
		p.ProduceAsync(client.Record{Topic: req.Topic, Partition: part, ManualPartition: true,
			Value: []byte(fmt.Sprintf("%s %s #%d", req.Value, stamp, i))},
			func(out client.Result, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					res.Failed++
					res.Errors[kerr.CodeOf(err).String()]++
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				res.Succeeded++
				if out.Offset >= 0 && (res.FirstOffset < 0 || out.Offset < res.FirstOffset) {
					res.FirstOffset = out.Offset
				}
				res.LastOffset = max(res.LastOffset, out.Offset)
				res.LeaderEpoch = max(res.LeaderEpoch, out.LeaderEpoch)
			})
	}
	if err := p.Flush(ctx); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, refuse(kerr.RequestTimedOut, "records still unacknowledged after %s", actionTimeout)
	}
	res.TookMs = time.Since(start).Milliseconds()
	if firstErr != nil {
		ae := toAPIError(firstErr)
		if res.Succeeded == 0 {
			ae.body.Message = fmt.Sprintf("none of %d records written (acks=%s): %s", req.Count, acks, ae.body.Message)
			return nil, ae
		}
		res.FirstError = &ae.body
	}
	return res, nil
}

// producerKey: one producer per REST user and acks.
type producerKey struct {
	user string
	acks client.Acks
}

// producer returns the console's producer for user and acks, made on first
// use: short timeouts and few retries, so a refusal is reported rather
// than retried for minutes. A producer sends its batches in the
// background, with no request's context, so a user's producer runs on a
// client whose connections always speak for that user.
func (c *Console) producer(user string, acks client.Acks) (*client.Producer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	key := producerKey{user, acks}
	if p := c.producers[key]; p != nil {
		return p, nil
	}
	cl, err := c.clientForLocked(user)
	if err != nil {
		return nil, err
	}
	p, err := client.NewProducer(cl, client.ProducerOptions{
		Acks:            acks,
		Retries:         2,
		RequestTimeout:  5 * time.Second,
		DeliveryTimeout: 15 * time.Second,
		MaxBlock:        5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	c.producers[key] = p
	return p, nil
}

// clientForLocked is the client to produce through for user ("" when
// authentication is off).
func (c *Console) clientForLocked(user string) (*client.Client, error) {
	if user == "" && c.cl != nil {
		return c.cl, nil
	}
	if cl := c.userClients[user]; user != "" && cl != nil {
		return cl, nil
	}
	var addrs []string
	switch {
	case c.cl != nil:
		addrs = c.cl.Bootstrap()
	case len(c.opts.Brokers) > 0:
		addrs = c.opts.Brokers
	default:
		if snap := c.hub.current(); snap != nil {
			for _, b := range snap.Brokers {
				if b.Alive && b.Address != "" {
					addrs = append(addrs, b.Address)
				}
			}
		}
	}
	if len(addrs) == 0 {
		return nil, refuse(kerr.BrokerNotAvailable, "no live broker known yet to produce through")
	}
	opts := c.opts.ClientOptions
	if user != "" {
		opts.DialOptions = append(slices.Clone(opts.DialOptions), restauth.ForwardFixedUser(user)...)
	}
	cl, err := client.New(addrs, opts)
	if err != nil {
		return nil, err
	}
	c.owned = append(c.owned, cl.Close)
	if user == "" {
		c.cl = cl
	} else {
		c.userClients[user] = cl
	}
	return cl, nil
}

// --- broker processes (dev launcher) ---

var nodeActions = map[string]devclusterv1.Action{
	"stop":    devclusterv1.Action_ACTION_STOP,
	"kill":    devclusterv1.Action_ACTION_KILL,
	"start":   devclusterv1.Action_ACTION_START,
	"restart": devclusterv1.Action_ACTION_RESTART,
	"pause":   devclusterv1.Action_ACTION_PAUSE,
	"resume":  devclusterv1.Action_ACTION_RESUME,
}

type nodeResult struct {
	Broker  int32  `json:"broker"`
	Action  string `json:"action"`
	Name    string `json:"name"`
	Process string `json:"process"`
	PID     int32  `json:"pid,omitempty"`
}

// nodeAction stops, kills, starts, restarts, pauses or resumes a broker's
// process through the dev launcher.
func (c *Console) nodeAction(ctx context.Context, r *http.Request) (any, error) {
	if c.opts.DevControl == "" {
		return nil, refuse(kerr.PolicyViolation,
			"broker actions need the dev launcher's control address (--console.dev.control, e.g. 127.0.0.1:9299)")
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || id < 0 {
		return nil, badRequest("id", "broker id %q is not a number", r.PathValue("id"))
	}
	name := r.PathValue("action")
	act, ok := nodeActions[name]
	if !ok {
		return nil, badRequest("action", "unknown action %q (stop, kill, start, restart, pause, resume)", name)
	}
	var body struct{}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	dc, err := c.devClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeTimeout)
	defer cancel()
	node := "broker-" + strconv.Itoa(int(id))
	resp, err := dc.NodeAction(ctx, &devclusterv1.NodeActionRequest{Name: node, Action: act})
	c.hub.refresh()
	if err != nil {
		return nil, devError(err)
	}
	return nodeResult{Broker: int32(id), Action: name, Name: resp.GetNode().GetName(),
		Process: processState(resp.GetNode().GetState()), PID: resp.GetNode().GetPid()}, nil
}

// --- fetch faults ---

type faultRequest struct {
	// Broker is the follower whose fetching is slowed or stalled.
	Broker int32 `json:"broker"`
	// Topic and Partition select what it fetches; empty topic and a
	// missing partition mean all.
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	Stall     bool   `json:"stall"`
	DelayMs   int32  `json:"delayMs"`
}

type faultResult struct {
	Broker int32       `json:"broker"`
	Faults []faultView `json:"faults"`
}

// brokerAddress is the address of a live broker in the latest snapshot.
func (c *Console) brokerAddress(id int32) (string, error) {
	snap := c.hub.current()
	if snap == nil {
		return "", refuse(kerr.NetworkException, "no snapshot of the cluster yet")
	}
	for _, b := range snap.Brokers {
		if b.ID == id {
			if !b.Alive || b.Address == "" {
				return "", refuse(kerr.BrokerNotAvailable, "broker %d is down", id)
			}
			return b.Address, nil
		}
	}
	return "", refuseAt(http.StatusNotFound, kerr.BrokerNotAvailable, "no broker %d in the cluster", id)
}

// setFault stalls or slows one broker's fetching of a partition (its
// FaultInjectionService, which the broker serves only when started with
// fault injection enabled: POLICY_VIOLATION otherwise).
func (c *Console) setFault(ctx context.Context, r *http.Request) (any, error) {
	var req faultRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if !req.Stall && req.DelayMs <= 0 {
		return nil, badRequest("delayMs", "give stall=true or delayMs > 0")
	}
	if req.DelayMs < 0 || req.DelayMs > maxFaultDelayMs {
		return nil, badRequest("delayMs", "delayMs must be 0..%d", maxFaultDelayMs)
	}
	part := int32(-1)
	if req.Partition != nil {
		part = *req.Partition
	}
	if req.Topic != "" && part >= 0 {
		if err := c.partitionKnown(req.Topic, part); err != nil {
			return nil, err
		}
	}
	addr, err := c.brokerAddress(req.Broker)
	if err != nil {
		return nil, err
	}
	fc, err := c.faultClient(addr)
	if err != nil {
		return nil, err
	}
	resp, err := fc.SetFetchFault(ctx, &faultv1.SetFetchFaultRequest{Fault: &faultv1.FetchFault{
		Topic: req.Topic, Partition: part, DelayMs: req.DelayMs, Stall: req.Stall}})
	c.hub.refresh()
	if err != nil {
		return nil, kerr.FromStatus(err)
	}
	return faultResult{Broker: req.Broker, Faults: toFaultViews(resp.GetFaults())}, nil
}

// clearFaults removes every fault injected on one broker.
func (c *Console) clearFaults(ctx context.Context, r *http.Request) (any, error) {
	var req struct {
		Broker int32 `json:"broker"`
	}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	addr, err := c.brokerAddress(req.Broker)
	if err != nil {
		return nil, err
	}
	fc, err := c.faultClient(addr)
	if err != nil {
		return nil, err
	}
	_, err = fc.ClearFaults(ctx, &faultv1.ClearFaultsRequest{})
	c.hub.refresh()
	if err != nil {
		return nil, kerr.FromStatus(err)
	}
	return faultResult{Broker: req.Broker, Faults: []faultView{}}, nil
}

// --- topic configs ---

type configRequest struct {
	// Configs maps min.insync.replicas and unclean.leader.election.enable
	// to new values; an empty value reverts to the default.
	Configs map[string]string `json:"configs"`
}

type configResult struct {
	Topic   string            `json:"topic"`
	Configs map[string]string `json:"configs"`
}

// alterConfigs changes min.insync.replicas and unclean.leader.election.enable
// of a topic (at run time; the controller applies them at once).
func (c *Console) alterConfigs(ctx context.Context, r *http.Request) (any, error) {
	topic := r.PathValue("topic")
	var req configRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if len(req.Configs) == 0 {
		return nil, badRequest("configs", "nothing to change")
	}
	var ops []*adminv1.ConfigOp
	for name, value := range req.Configs {
		value = strings.TrimSpace(value)
		switch name {
		case cfgMinISR:
			if n, err := strconv.Atoi(value); value != "" && (err != nil || n < 1) {
				return nil, badRequest(name, "%s must be a whole number >= 1, not %q", name, value)
			}
		case cfgUnclean:
			if value != "" && value != "true" && value != "false" {
				return nil, badRequest(name, "%s must be true or false, not %q", name, value)
			}
		default:
			return nil, badRequest(name, "the console changes only %s and %s", cfgMinISR, cfgUnclean)
		}
		op := &adminv1.ConfigOp{Name: name, Value: value, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}
		if value == "" {
			op = &adminv1.ConfigOp{Name: name, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE}
		}
		ops = append(ops, op)
	}
	resp, err := c.admin.AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{{
		Resource: &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: topic},
		Ops:      ops,
	}}})
	if err != nil {
		return nil, err
	}
	for _, res := range resp.GetResults() {
		if err := client.ItemError(res.GetErrorCode(), res.GetErrorMessage(), "alter configs of %s", topic); err != nil {
			return nil, err
		}
	}
	return configResult{Topic: topic, Configs: req.Configs}, nil
}

// --- elections ---

type electionRequest struct {
	// Type is preferred or unclean.
	Type      string `json:"type"`
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
}

type electionResult struct {
	Type        string `json:"type"`
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Leader      int32  `json:"leader"`
	LeaderEpoch int32  `json:"leaderEpoch"`
}

// elect runs a preferred or unclean election for one partition; refusals
// such as ELECTION_NOT_NEEDED or ELIGIBLE_LEADERS_NOT_AVAILABLE come back by
// name.
func (c *Console) elect(ctx context.Context, r *http.Request) (any, error) {
	var req electionRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	var typ adminv1.ElectionType
	switch req.Type {
	case "preferred":
		typ = adminv1.ElectionType_ELECTION_TYPE_PREFERRED
	case "unclean":
		typ = adminv1.ElectionType_ELECTION_TYPE_UNCLEAN
	default:
		return nil, badRequest("type", "election type must be preferred or unclean, not %q", req.Type)
	}
	if req.Topic == "" || req.Partition == nil || *req.Partition < 0 {
		return nil, badRequest("partition", "topic and partition are required")
	}
	if err := c.partitionKnown(req.Topic, *req.Partition); err != nil {
		return nil, err
	}
	resp, err := c.admin.ElectLeaders(ctx, &adminv1.ElectLeadersRequest{ElectionType: typ, TimeoutMs: 5000,
		Partitions: []*commonv1.TopicPartition{{Topic: req.Topic, Partition: *req.Partition}}})
	if err != nil {
		return nil, err
	}
	for _, res := range resp.GetResults() {
		if res.GetTopic() != req.Topic || res.GetPartition() != *req.Partition {
			continue
		}
		if err := client.ItemError(res.GetErrorCode(), res.GetErrorMessage(), "%s election for %s-%d", req.Type, req.Topic, *req.Partition); err != nil {
			return nil, err
		}
		return electionResult{Type: req.Type, Topic: req.Topic, Partition: *req.Partition, Leader: res.GetLeader(), LeaderEpoch: res.GetLeaderEpoch()}, nil
	}
	return nil, refuse(kerr.UnknownServerError, "no result for %s-%d in the answer", req.Topic, *req.Partition)
}
