package console

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"tidemark.io/gateway/internal/restauth"
	"tidemark.io/gateway/internal/resterr"
	"tidemark.io/services/platform/kerr"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
)

// Retention of timeline events and the idle time before watching stops.
const (
	keepEvents    = 300 // events other than HW advances
	keepHWEvents  = 100 // HW advances (frequent under load)
	idleStop      = 30 * time.Second
	auxEvery      = time.Second // dev launcher and fault polling
	auxTimeout    = time.Second
	configTimeout = 2 * time.Second
	subBuffer     = 256
	// keepKeys is how many event keys are remembered to drop the events a
	// fresh WatchCluster stream repeats (the controller's ring holds 512):
	// more than the timeline keeps, so that an event evicted from the
	// timeline is not taken for a new one when a stream replays it.
	keepKeys = 4096
)

// message is one Server-Sent Event.
type message struct {
	event string
	data  []byte
}

// sub is one event stream. The hub drops a stream that falls behind (its
// buffer fills); the browser reconnects and starts from a fresh snapshot.
type sub struct {
	ch   chan message
	gone chan struct{}
	// primed: the stream has had a whole snapshot, so patches apply
	// (guarded by the hub's mu).
	primed bool
	// user and counted: a page's stream, counted in hub.streams.
	user    string
	counted bool
}

// hub follows the cluster with one WatchCluster stream shared by every open
// page, while at least one is open (and idleStop after the last closes).
type hub struct {
	c *Console

	mu      sync.Mutex
	subs    map[*sub]struct{}
	streams map[string]int // open page streams by user
	running bool
	stop    context.CancelFunc
	wg      sync.WaitGroup
	idle    *time.Timer
	closed  bool
	updated chan struct{} // closed and replaced on every snapshot

	last     *adminv1.WatchClusterResponse
	snap     *snapshot
	snapJSON []byte // the whole snapshot, encoded when a stream opens
	diff     differ // what streams already have (patch.go)
	patch    []byte // the last rebuild's patch; nil if the snapshot did not change
	status   statusView
	started  time.Time
	lastMsg  time.Time

	seq    uint64
	events []eventView // oldest first
	hws    []eventView
	seen   map[string]bool
	order  []string // keys of seen, oldest first (at most keepKeys)

	topics       map[string]topicConfig
	topicsStale  bool
	topicsLoaded time.Time
	process      map[int32]string
	faults       map[int32]brokerFaults
	poke         chan struct{}
}

func newHub(c *Console) *hub {
	return &hub{c: c, subs: map[*sub]struct{}{}, updated: make(chan struct{}), seen: map[string]bool{},
		topics: map[string]topicConfig{}, topicsStale: true,
		process: map[int32]string{}, faults: map[int32]brokerFaults{},
		poke: make(chan struct{}, 1)}
}

// Bounds on event streams: each costs a goroutine, a subBuffer queue, a
// writer and a share of every fan-out.
const (
	maxStreams        = 256
	maxStreamsPerUser = 16
)

// subscribeStream opens a page's event stream, refused (429
// THROTTLING_QUOTA_EXCEEDED, retriable, as a REST stream past its limits)
// past maxStreamsPerUser streams of one user, maxStreams in all, or when
// Options.Streams refuses it.
func (h *hub) subscribeStream(r *http.Request) (*sub, *apiError) {
	if take := h.c.opts.Streams; take != nil {
		if err := take(r.Context(), "console events"); err != nil {
			return nil, toAPIError(err)
		}
	}
	user, _ := restauth.UserFrom(r.Context())
	h.mu.Lock()
	if h.streams == nil {
		h.streams = map[string]int{}
	}
	total := 0
	for _, n := range h.streams {
		total += n
	}
	switch {
	case total >= maxStreams:
		h.mu.Unlock()
		return nil, &apiError{status: http.StatusTooManyRequests, body: resterr.Of(kerr.BadField(kerr.ThrottlingQuotaExceeded,
			"console.events", "%d console event streams are open, the most the gateway serves", total))}
	case h.streams[user] >= maxStreamsPerUser:
		h.mu.Unlock()
		return nil, &apiError{status: http.StatusTooManyRequests, body: resterr.Of(kerr.BadField(kerr.ThrottlingQuotaExceeded,
			"console.events", "this user has %d console event streams open, the most one user may hold", h.streams[user]))}
	}
	h.streams[user]++
	h.mu.Unlock()
	s := h.subscribe()
	s.user, s.counted = user, true
	return s, nil
}

// subscribe opens a stream: it starts watching if needed and queues the
// hello, the status, the latest snapshot and the retained events.
func (h *hub) subscribe() *sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &sub{ch: make(chan message, subBuffer), gone: make(chan struct{})}
	if h.closed {
		close(s.gone)
		return s
	}
	h.subs[s] = struct{}{}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if !h.running {
		h.startLocked()
	}
	s.ch <- message{"hello", mustJSON(h.c.features())}
	s.ch <- message{"status", mustJSON(h.status)}
	if h.snap != nil {
		if h.snapJSON == nil {
			h.snapJSON = mustJSON(h.snap)
		}
		s.ch <- message{"snapshot", h.snapJSON}
		s.primed = true
	}
	if all := h.retainedLocked(); len(all) > 0 {
		s.ch <- message{"events", mustJSON(all)}
	}
	if run := h.c.scen.runJSON(); run != nil {
		s.ch <- message{"scenario", run}
	}
	return s
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.counted {
		s.counted = false
		if h.streams[s.user]--; h.streams[s.user] <= 0 {
			delete(h.streams, s.user)
		}
	}
	delete(h.subs, s)
	if len(h.subs) == 0 && h.running && h.idle == nil && !h.closed {
		h.idle = time.AfterFunc(idleStop, h.stopIfIdle)
	}
}

func (h *hub) stopIfIdle() {
	h.mu.Lock()
	if len(h.subs) > 0 || !h.running {
		h.mu.Unlock()
		return
	}
	h.stopLocked() // its goroutines end on their own; close waits for them
	h.mu.Unlock()
}

func (h *hub) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	h.running, h.stop = true, cancel
	now := time.Now()
	h.started = now
	h.status = statusView{Connected: false, Message: "connecting to the cluster", Since: now.UnixMilli()}
	h.topicsStale = true
	h.wg.Add(2)
	go func() { defer h.wg.Done(); h.watch(ctx) }()
	go func() { defer h.wg.Done(); h.watchdog(ctx) }()
	if h.c.opts.EnableActions {
		h.wg.Add(1)
		go func() { defer h.wg.Done(); h.aux(ctx) }()
	}
}

// stopLocked stops watching and forgets the snapshot (a later page must not
// see old state as current); the timeline is kept.
func (h *hub) stopLocked() {
	h.stop()
	h.running = false
	h.last, h.snap, h.snapJSON = nil, nil, nil
	h.diff.reset()
}

func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	if h.idle != nil {
		h.idle.Stop()
	}
	if h.running {
		h.stopLocked()
	}
	for s := range h.subs {
		close(s.gone)
	}
	h.subs = map[*sub]struct{}{}
	h.mu.Unlock()
	h.wg.Wait()
}

// broadcast queues m on every stream.
func (h *hub) broadcast(m message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.broadcastLocked(m)
}

// broadcastLocked queues m on every stream, dropping those that lag.
func (h *hub) broadcastLocked(m message) {
	for s := range h.subs {
		h.sendLocked(s, m)
	}
}

func (h *hub) sendLocked(s *sub, m message) {
	select {
	case s.ch <- m:
	default:
		delete(h.subs, s)
		close(s.gone)
	}
}

// broadcastChangeLocked sends the last rebuild: the patch to streams that
// have a snapshot, the whole snapshot to those opened before the first.
func (h *hub) broadcastChangeLocked() {
	for s := range h.subs {
		if s.primed {
			h.sendLocked(s, message{"patch", h.patch})
			continue
		}
		if h.snapJSON == nil {
			h.snapJSON = mustJSON(h.snap)
		}
		h.sendLocked(s, message{"snapshot", h.snapJSON})
		s.primed = true
	}
}

// waitSnapshot returns the latest snapshot, waiting for the first one until
// ctx ends.
func (h *hub) waitSnapshot(ctx context.Context) (*snapshot, statusView) {
	for {
		h.mu.Lock()
		snap, st, ch := h.snap, h.status, h.updated
		h.mu.Unlock()
		if snap != nil {
			return snap, st
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if st.Message == "" {
				st.Message = "no snapshot from the cluster yet"
			}
			return nil, st
		}
	}
}

// current returns the latest snapshot, or nil.
func (h *hub) current() *snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snap
}

// refresh asks the aux loop to poll the launcher and faults now.
func (h *hub) refresh() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

func (h *hub) watch(ctx context.Context) {
	req := &adminv1.WatchClusterRequest{IntervalMs: int32(h.c.opts.WatchInterval / time.Millisecond)}
	for ctx.Err() == nil {
		for m, err := range h.c.admin.WatchCluster(ctx, req) {
			if err != nil {
				h.mu.Lock()
				if ctx.Err() == nil {
					h.setStatusLocked(false, "the watch on the controllers failed: "+err.Error())
				}
				h.mu.Unlock()
				break
			}
			h.apply(ctx, m)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// watchdog reports a silent stream: the client retries unreachable
// controllers quietly, and the page should say so.
func (h *hub) watchdog(ctx context.Context) {
	t := time.NewTicker(h.c.opts.StaleAfter / 6)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		if ctx.Err() != nil {
			h.mu.Unlock()
			return
		}
		now := time.Now()
		since := h.lastMsg
		if since.Before(h.started) {
			since = h.started
		}
		if now.Sub(since) > h.c.opts.StaleAfter && (h.status.Connected || h.status.Message == "connecting to the cluster") {
			var msg string
			if h.lastMsg.Before(h.started) {
				msg = fmt.Sprintf("cannot reach the cluster: no answer from the active controller for %s%s; retrying",
					h.c.opts.StaleAfter, h.controllerList())
			} else {
				msg = fmt.Sprintf("the cluster stopped answering: no snapshot from the active controller since %s%s; retrying",
					h.lastMsg.Format("15:04:05"), h.controllerList())
			}
			h.setStatusLocked(false, msg)
		}
		h.mu.Unlock()
	}
}

func (h *hub) controllerList() string {
	if len(h.c.opts.Controllers) > 0 {
		return " (controllers " + strings.Join(h.c.opts.Controllers, ", ") + ")"
	}
	if a := h.c.admin.ActiveController(); a != "" {
		return " (last active controller " + a + ")"
	}
	return ""
}

func (h *hub) setStatusLocked(connected bool, msg string) {
	if h.status.Connected == connected && h.status.Message == msg {
		return
	}
	if h.status.Connected != connected {
		h.status.Since = time.Now().UnixMilli()
	}
	h.status.Connected, h.status.Message = connected, msg
	if !connected {
		h.c.log.Warn("console: cluster unreachable", "reason", msg)
	}
	h.broadcastLocked(message{"status", mustJSON(h.status)})
}

// apply takes one WatchCluster message: new events go to the timeline and
// every stream gets the events and the new snapshot.
func (h *hub) apply(ctx context.Context, m *adminv1.WatchClusterResponse) {
	h.maybeLoadTopics(ctx, m)
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() != nil { // stopped meanwhile; a later run owns the state
		return
	}
	h.lastMsg = time.Now()
	var fresh []eventView
	for _, e := range m.GetEvents() {
		k := eventKey(e)
		if h.seen[k] {
			continue
		}
		h.seq++
		h.seen[k] = true
		h.order = append(h.order, k)
		if len(h.order) > keepKeys {
			for _, old := range h.order[:len(h.order)-keepKeys] {
				delete(h.seen, old)
			}
			h.order = slices.Clone(h.order[len(h.order)-keepKeys:])
		}
		v := toEventView(e, h.c.jaeger)
		v.Seq = h.seq
		fresh = append(fresh, v)
		if e.GetKind() == controlv1.EventKind_EVENT_KIND_HW_ADVANCE {
			h.hws = h.appendBounded(h.hws, v, keepHWEvents)
		} else {
			h.events = h.appendBounded(h.events, v, keepEvents)
		}
		switch e.GetKind() {
		case controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED, controlv1.EventKind_EVENT_KIND_TOPIC_CREATED,
			controlv1.EventKind_EVENT_KIND_TOPIC_DELETED:
			h.topicsStale = true
		}
	}
	h.last = m
	h.status.LastSnapshot = m.GetTime()
	h.rebuildLocked()
	if len(fresh) > 0 {
		h.broadcastLocked(message{"events", mustJSON(fresh)})
	}
	h.broadcastChangeLocked()
	h.setStatusLocked(true, "live")
}

func (h *hub) appendBounded(list []eventView, v eventView, n int) []eventView {
	list = append(list, v)
	if len(list) > n {
		list = slices.Clone(list[len(list)-n:])
	}
	return list
}

// retainedLocked is the whole timeline, oldest first.
func (h *hub) retainedLocked() []eventView {
	all := append(slices.Clone(h.events), h.hws...)
	slices.SortFunc(all, func(a, b eventView) int { return int(a.Seq) - int(b.Seq) })
	return all
}

// rebuildLocked remakes the snapshot from the last message and the extras.
func (h *hub) rebuildLocked() {
	if h.last == nil {
		return
	}
	h.snap = buildSnapshot(h.last, extras{topics: h.topics, process: h.process, faults: h.faults})
	h.snapJSON = nil
	h.patch = mustJSON(h.diff.next(h.snap))
	close(h.updated)
	h.updated = make(chan struct{})
}

// maybeLoadTopics fetches topic configs (replication factor,
// min.insync.replicas, unclean.leader.election.enable) when they may have
// changed: at the start, after config and topic events, or when the set of
// topics differs.
func (h *hub) maybeLoadTopics(ctx context.Context, m *adminv1.WatchClusterResponse) {
	h.mu.Lock()
	need := h.topicsStale
	names := map[string]bool{}
	for _, p := range m.GetPartitions() {
		names[p.GetTopic()] = true
	}
	if len(names) != len(h.topics) {
		need = true
	}
	for n := range names {
		if _, ok := h.topics[n]; !ok {
			need = true
		}
	}
	for _, e := range m.GetEvents() {
		switch e.GetKind() {
		case controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED, controlv1.EventKind_EVENT_KIND_TOPIC_CREATED,
			controlv1.EventKind_EVENT_KIND_TOPIC_DELETED:
			need = true
		}
	}
	if need && time.Since(h.topicsLoaded) < 500*time.Millisecond {
		h.topicsStale = true // try again with a later message
		need = false
	}
	h.mu.Unlock()
	if !need {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, configTimeout)
	defer cancel()
	resp, err := h.c.admin.DescribeTopics(cctx, &adminv1.DescribeTopicsRequest{IncludeConfigs: true})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.topicsLoaded = time.Now()
	if err != nil {
		h.topicsStale = true
		h.c.log.Debug("console: describe topics", "err", err)
		return
	}
	topics := map[string]topicConfig{}
	for _, t := range resp.GetTopics() {
		if t.GetErrorCode() != 0 {
			continue
		}
		topics[t.GetName()] = topicConfig{rf: int(t.GetReplicationFactor()), configs: maps.Clone(t.GetConfigs())}
	}
	h.topics, h.topicsStale = topics, false
}

// aux polls, while actions are enabled, the dev launcher for process
// states and each live broker for injected faults.
func (h *hub) aux(ctx context.Context) {
	t := time.NewTicker(auxEvery)
	defer t.Stop()
	for {
		process := h.pollProcesses(ctx)
		faults := h.pollFaults(ctx)
		h.mu.Lock()
		if !maps.Equal(process, h.process) || !maps.EqualFunc(faults, h.faults, brokerFaults.equal) {
			h.process, h.faults = process, faults
			if h.last != nil && ctx.Err() == nil {
				h.rebuildLocked()
				h.broadcastChangeLocked()
			}
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.poke:
		}
	}
}

func (h *hub) pollProcesses(ctx context.Context) map[int32]string {
	out := map[int32]string{}
	if h.c.opts.DevControl == "" {
		return out
	}
	dc, err := h.c.devClient()
	if err != nil {
		return h.lastProcesses()
	}
	cctx, cancel := context.WithTimeout(ctx, auxTimeout)
	defer cancel()
	resp, err := dc.ListNodes(cctx, &devclusterv1.ListNodesRequest{})
	if err != nil {
		// Unknown is not "no process": keep what the launcher said last.
		return h.lastProcesses()
	}
	for _, n := range resp.GetNodes() {
		if n.GetKind() == "broker" {
			out[n.GetId()] = processState(n.GetState())
		}
	}
	return out
}

func (h *hub) pollFaults(ctx context.Context) map[int32]brokerFaults {
	out := map[int32]brokerFaults{}
	snap := h.current()
	if snap == nil {
		return out
	}
	for _, b := range snap.Brokers {
		// An isolated broker's lease lapses and the controller counts it
		// dead, but it still runs: it is asked until it says it is healed.
		if (!b.Alive && !h.lastFaults(b.ID).isolated) || b.Address == "" {
			continue
		}
		fc, err := h.c.faultClient(b.Address)
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, auxTimeout)
		resp, err := fc.ListFaults(cctx, &faultv1.ListFaultsRequest{})
		cancel()
		if err != nil {
			// A broker slow to answer (paused, busy) still has its
			// faults: keep the last ones it listed.
			if prev := h.lastFaults(b.ID); !prev.empty() {
				out[b.ID] = prev
			}
			continue
		}
		if f := toBrokerFaults(resp); !f.empty() {
			out[b.ID] = f
		}
	}
	return out
}

func (h *hub) lastProcesses() map[int32]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.process)
}

func (h *hub) lastFaults(id int32) brokerFaults {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.faults[id] // its slices are never changed once stored
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled
	}
	return b
}
