package console

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	devclusterv1 "tidemark.io/proto/gen/tidemark/devcluster/v1"
	faultv1 "tidemark.io/proto/gen/tidemark/fault/v1"
)

// snapshot is the cluster as the page draws it: one WatchCluster message
// plus what the console adds (topic configs, dev-launcher node states,
// injected faults). It travels as JSON in the "snapshot" event.
type snapshot struct {
	Time        int64            `json:"time"`
	ClusterID   string           `json:"clusterId"`
	Controller  controllerView   `json:"controller"`
	Controllers []controllerView `json:"controllers"`
	Brokers     []brokerView     `json:"brokers"`
	Topics      []topicView      `json:"topics"`
	Partitions  []partitionView  `json:"partitions"`
}

type controllerView struct {
	ID      int32  `json:"id"`
	Address string `json:"address,omitempty"`
	Epoch   int32  `json:"epoch,omitempty"`
	Active  bool   `json:"active"`
}

// Broker states.
const (
	stateUp           = "up"
	stateDown         = "down"
	stateShuttingDown = "shutting-down"
	stateFenced       = "fenced"
)

type brokerView struct {
	ID      int32  `json:"id"`
	Address string `json:"address"`
	Rack    string `json:"rack,omitempty"`
	// State is up, shutting-down (a controlled shutdown under way), fenced
	// (its process runs, as the dev launcher reports, but the controller
	// counts it out: no session or registration, so it can neither lead nor
	// be in an ISR; also while a started broker registers) or down.
	State        string `json:"state"`
	StateReason  string `json:"stateReason,omitempty"`
	Alive        bool   `json:"alive"`
	Epoch        int64  `json:"epoch"`
	ShuttingDown bool   `json:"shuttingDown"`
	LeaderCount  int32  `json:"leaderCount"`
	ReplicaCount int32  `json:"replicaCount"`
	// Leads names the partitions it leads ("topic-0").
	Leads []string `json:"leads"`
	// Process is the dev launcher's view of the process (running, stopping,
	// stopped, paused, exited), when a launcher is configured.
	Process string      `json:"process,omitempty"`
	Faults  []faultView `json:"faults"`
	// CutLinks names the brokers this broker's requests cannot reach
	// (fault cut); Isolated, that it is cut off from etcd and the
	// controllers (fault isolate), and IsolatedFromPeers, from the other
	// brokers too (fault isolate --peers).
	CutLinks          []int32 `json:"cutLinks"`
	Isolated          bool    `json:"isolated"`
	IsolatedFromPeers bool    `json:"isolatedFromPeers"`
}

type faultView struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	DelayMs   int32  `json:"delayMs"`
	Stall     bool   `json:"stall"`
}

type topicView struct {
	Name              string `json:"name"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replicationFactor"`
	MinISR            int32  `json:"minIsr"`
	// Unclean is unclean.leader.election.enable; nil until the configs are known.
	Unclean *bool             `json:"unclean"`
	Configs map[string]string `json:"configs,omitempty"`
}

type partitionView struct {
	Topic           string        `json:"topic"`
	Partition       int32         `json:"partition"`
	Leader          int32         `json:"leader"`
	LeaderEpoch     int32         `json:"leaderEpoch"`
	PartitionEpoch  int32         `json:"partitionEpoch"`
	Replicas        []int32       `json:"replicas"`
	ISR             []int32       `json:"isr"`
	MinISR          int32         `json:"minIsr"`
	HW              int64         `json:"hw"`
	HWKnown         bool          `json:"hwKnown"` // false: no report from the leader yet, HW unknown
	UnderReplicated bool          `json:"underReplicated"`
	AtMinISR        bool          `json:"atMinIsr"`
	UnderMinISR     bool          `json:"underMinIsr"`
	Offline         bool          `json:"offline"`
	Views           []replicaView `json:"views"`
	// Adding and Removing are a reassignment in flight.
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}

type replicaView struct {
	Broker    int32 `json:"broker"`
	Alive     bool  `json:"alive"`
	InISR     bool  `json:"inIsr"`
	Leader    bool  `json:"leader"`
	Preferred bool  `json:"preferred"`
	LEO       int64 `json:"leo"`
	HW        int64 `json:"hw"`
	LogStart  int64 `json:"logStart"`
	LagMs     int64 `json:"lagMs"`
	// Reported is false while the controller has no report of this replica
	// (a dead broker, or a controller just in office): LEO, HW and LogStart
	// are then unknown, not 0.
	Reported bool `json:"reported"`
	// LeaderLEO is a follower's LEO as its leader knows it (the offset of
	// its last fetch); LEO is what the follower reports. Nil when the
	// leader reports none.
	LeaderLEO *int64 `json:"leaderLeo,omitempty"`
	// Fault is the fetch fault injected on this replica's broker for this
	// partition, if any.
	Fault *faultView `json:"fault,omitempty"`
}

// eventView is one timeline entry.
type eventView struct {
	Seq         uint64  `json:"seq"`
	Time        int64   `json:"time"`
	Kind        string  `json:"kind"`
	Topic       string  `json:"topic,omitempty"`
	Partition   int32   `json:"partition"`
	Node        int32   `json:"node"`
	Reason      string  `json:"reason"`
	TraceID     string  `json:"traceId,omitempty"`
	TraceURL    string  `json:"traceUrl,omitempty"`
	LeaderEpoch int32   `json:"leaderEpoch,omitempty"`
	ISR         []int32 `json:"isr,omitempty"`
}

// statusView says whether the console hears from the cluster.
type statusView struct {
	Connected bool   `json:"connected"`
	Message   string `json:"message"`
	// Since is when the connection state last changed (ms since the epoch).
	Since int64 `json:"since"`
	// LastSnapshot is the time of the newest snapshot (0: none yet).
	LastSnapshot int64 `json:"lastSnapshot"`
}

var eventKinds = map[controlv1.EventKind]string{
	controlv1.EventKind_EVENT_KIND_ISR_SHRINK:                "isr-shrink",
	controlv1.EventKind_EVENT_KIND_ISR_EXPAND:                "isr-expand",
	controlv1.EventKind_EVENT_KIND_LEADER_ELECTION:           "election",
	controlv1.EventKind_EVENT_KIND_UNCLEAN_LEADER_ELECTION:   "unclean-election",
	controlv1.EventKind_EVENT_KIND_PREFERRED_LEADER_ELECTION: "preferred-election",
	controlv1.EventKind_EVENT_KIND_TRUNCATION:                "truncation",
	controlv1.EventKind_EVENT_KIND_CONTROLLER_CHANGE:         "controller-change",
	controlv1.EventKind_EVENT_KIND_BROKER_UP:                 "broker-up",
	controlv1.EventKind_EVENT_KIND_BROKER_DOWN:               "broker-down",
	controlv1.EventKind_EVENT_KIND_HW_ADVANCE:                "hw-advance",
	controlv1.EventKind_EVENT_KIND_FENCED:                    "fenced",
	controlv1.EventKind_EVENT_KIND_TOPIC_CREATED:             "topic-created",
	controlv1.EventKind_EVENT_KIND_TOPIC_DELETED:             "topic-deleted",
	controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED:            "config-changed",
	controlv1.EventKind_EVENT_KIND_UNSPECIFIED:               "event",
}

func kindName(k controlv1.EventKind) string {
	if s, ok := eventKinds[k]; ok {
		return s
	}
	return strings.ToLower(strings.TrimPrefix(k.String(), "EVENT_KIND_"))
}

// eventKey identifies an event across reconnections (a fresh stream
// repeats the recent ones).
func eventKey(e *controlv1.ClusterEvent) string {
	return fmt.Sprint(e.GetTime(), "|", int32(e.GetKind()), "|", e.GetTopic(), "|", e.GetPartition(), "|",
		e.GetNodeId(), "|", e.GetLeaderEpoch(), "|", e.GetReason())
}

func toEventView(e *controlv1.ClusterEvent, jaeger string) eventView {
	v := eventView{Time: e.GetTime(), Kind: kindName(e.GetKind()), Topic: e.GetTopic(), Partition: e.GetPartition(),
		Node: e.GetNodeId(), Reason: e.GetReason(), TraceID: e.GetTraceId(), LeaderEpoch: e.GetLeaderEpoch(),
		ISR: slices.Clone(e.GetIsr())}
	if jaeger != "" && v.TraceID != "" {
		v.TraceURL = jaeger + "/trace/" + v.TraceID
	}
	return v
}

// extras is what the console knows beside the WatchCluster message.
type extras struct {
	topics  map[string]topicConfig
	process map[int32]string       // dev launcher state by broker id
	faults  map[int32]brokerFaults // injected faults by broker id
}

// brokerFaults is what one broker's ListFaults answered.
type brokerFaults struct {
	fetch             []faultView
	cutTo             []int32
	isolated          bool
	isolatedFromPeers bool
}

func (f brokerFaults) empty() bool {
	return len(f.fetch) == 0 && len(f.cutTo) == 0 && !f.isolated
}

func (f brokerFaults) equal(g brokerFaults) bool {
	return slices.Equal(f.fetch, g.fetch) && slices.Equal(f.cutTo, g.cutTo) && f.isolated == g.isolated &&
		f.isolatedFromPeers == g.isolatedFromPeers
}

func toBrokerFaults(resp *faultv1.ListFaultsResponse) brokerFaults {
	f := brokerFaults{fetch: toFaultViews(resp.GetFaults()), isolated: resp.GetIsolated(), isolatedFromPeers: resp.GetIsolatedFromPeers()}
	for _, l := range resp.GetLinks() {
		f.cutTo = append(f.cutTo, l.GetToBrokerId())
	}
	slices.Sort(f.cutTo)
	return f
}

// topicConfig is what DescribeTopics said about a topic.
type topicConfig struct {
	rf      int
	configs map[string]string
}

// buildSnapshot turns one WatchCluster message into the page's view.
func buildSnapshot(m *adminv1.WatchClusterResponse, x extras) *snapshot {
	cl := m.GetCluster()
	s := &snapshot{Time: m.GetTime(), ClusterID: cl.GetClusterId(),
		Controller:  controllerView{ID: -1},
		Controllers: []controllerView{}, Brokers: []brokerView{}, Topics: []topicView{}, Partitions: []partitionView{}}
	if n := cl.GetController(); n != nil && n.GetId() >= 0 {
		s.Controller = controllerView{ID: n.GetId(), Address: n.GetAddress(), Epoch: cl.GetControllerEpoch(), Active: true}
	}
	for _, ci := range cl.GetControllers() {
		s.Controllers = append(s.Controllers, controllerView{ID: ci.GetNode().GetId(), Address: ci.GetNode().GetAddress(), Active: ci.GetActive()})
	}
	leads := map[int32][]string{}
	for _, p := range m.GetPartitions() {
		if p.GetLeader() >= 0 {
			leads[p.GetLeader()] = append(leads[p.GetLeader()], p.GetTopic()+"-"+strconv.Itoa(int(p.GetPartition())))
		}
	}
	for _, b := range cl.GetBrokers() {
		id := b.GetNode().GetId()
		bv := brokerView{ID: id, Address: b.GetNode().GetAddress(), Rack: b.GetNode().GetRack(), Alive: b.GetAlive(),
			Epoch: b.GetBrokerEpoch(), ShuttingDown: b.GetShuttingDown(), LeaderCount: b.GetLeaderCount(),
			ReplicaCount: b.GetReplicaCount(), Leads: leads[id], Process: x.process[id],
			Faults: x.faults[id].fetch, CutLinks: x.faults[id].cutTo, Isolated: x.faults[id].isolated,
			IsolatedFromPeers: x.faults[id].isolatedFromPeers}
		if bv.Leads == nil {
			bv.Leads = []string{}
		}
		if bv.Faults == nil {
			bv.Faults = []faultView{}
		}
		if bv.CutLinks == nil {
			bv.CutLinks = []int32{}
		}
		switch {
		case !bv.Alive:
			bv.State = stateDown
		case bv.ShuttingDown:
			bv.State, bv.StateReason = stateShuttingDown, "controlled shutdown under way"
		default:
			bv.State = stateUp
		}
		if !bv.Alive && (bv.Process == "running" || bv.Process == "paused") {
			bv.State = stateFenced
			bv.StateReason = "its process is " + bv.Process + ", but the controller counts it out (no live session): it can neither lead nor be in an ISR"
		}
		s.Brokers = append(s.Brokers, bv)
	}
	topicIndex := map[string]int{}
	for _, p := range m.GetPartitions() {
		pv := partitionView{Topic: p.GetTopic(), Partition: p.GetPartition(), Leader: p.GetLeader(),
			LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch(),
			Replicas: nonNil(p.GetReplicas()), ISR: nonNil(p.GetIsr()), MinISR: p.GetMinInsyncReplicas(),
			HW: p.GetHighWatermark(), HWKnown: p.GetHighWatermarkKnown(), UnderReplicated: p.GetUnderReplicated(), AtMinISR: p.GetAtMinIsr(),
			UnderMinISR: p.GetUnderMinIsr(), Offline: p.GetOffline(), Views: []replicaView{},
			Adding: p.GetAddingReplicas(), Removing: p.GetRemovingReplicas()}
		for i, r := range p.GetReplicaViews() {
			rv := replicaView{Broker: r.GetBrokerId(), Alive: r.GetAlive(), InISR: r.GetInIsr(), Leader: r.GetLeader(),
				Preferred: i == 0, LEO: r.GetLogEndOffset(), HW: r.GetHighWatermark(), LogStart: r.GetLogStartOffset(),
				LagMs: r.GetLagMs(), Reported: r.GetReported()}
			if r.LeaderKnownLogEndOffset != nil && !rv.Leader {
				v := r.GetLeaderKnownLogEndOffset()
				rv.LeaderLEO = &v
			}
			if !rv.Leader {
				rv.Fault = faultFor(x.faults[rv.Broker].fetch, pv.Topic, pv.Partition)
			}
			pv.Views = append(pv.Views, rv)
		}
		s.Partitions = append(s.Partitions, pv)
		i, ok := topicIndex[pv.Topic]
		if !ok {
			i = len(s.Topics)
			topicIndex[pv.Topic] = i
			tv := topicView{Name: pv.Topic, MinISR: pv.MinISR, ReplicationFactor: len(pv.Replicas)}
			if tc, ok := x.topics[pv.Topic]; ok {
				tv.Configs = tc.configs
				if tc.rf > 0 {
					tv.ReplicationFactor = tc.rf
				}
				if v, ok := tc.configs["unclean.leader.election.enable"]; ok {
					b := v == "true"
					tv.Unclean = &b
				}
			}
			s.Topics = append(s.Topics, tv)
		}
		s.Topics[i].Partitions++
	}
	// Topic, then partition: the order pages keep when they apply patches.
	slices.SortFunc(s.Partitions, func(a, b partitionView) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return s
}

// faultFor is the fault that applies to a broker's fetching of one
// partition: the longest delay and any stall among the matching ones.
func faultFor(fs []faultView, topic string, partition int32) *faultView {
	var out *faultView
	for _, f := range fs {
		if (f.Topic != "" && f.Topic != topic) || (f.Partition >= 0 && f.Partition != partition) {
			continue
		}
		if out == nil {
			out = &faultView{Topic: topic, Partition: partition}
		}
		out.DelayMs = max(out.DelayMs, f.DelayMs)
		out.Stall = out.Stall || f.Stall
	}
	return out
}

func toFaultViews(fs []*faultv1.FetchFault) []faultView {
	out := []faultView{}
	for _, f := range fs {
		out = append(out, faultView{Topic: f.GetTopic(), Partition: f.GetPartition(), DelayMs: f.GetDelayMs(), Stall: f.GetStall()})
	}
	return out
}

func processState(s devclusterv1.NodeState) string {
	switch s {
	case devclusterv1.NodeState_NODE_STATE_RUNNING:
		return "running"
	case devclusterv1.NodeState_NODE_STATE_STOPPED:
		return "stopped"
	case devclusterv1.NodeState_NODE_STATE_PAUSED:
		return "paused"
	case devclusterv1.NodeState_NODE_STATE_EXITED:
		return "exited"
	case devclusterv1.NodeState_NODE_STATE_STOPPING:
		return "stopping"
	}
	return ""
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return slices.Clone(s)
}
