package ctrl

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/controller/internal/election"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
)

// Scripted tests of the controller's decisions (core.go), run by
// cockroachdb/datadriven like the broker's partition scripts: each
// testdata/*.txt file is a sequence of commands, each followed by "----"
// and the effects it must produce, ended by a blank line. Lines starting
// with "#" are comments. Run with -rewrite to regenerate the expected
// output.
//
// The harness plays etcd: a write the core asks for stays in flight until a
// "write" command settles it (ok, with conflicts, fenced, unknown), so a
// script shows that nothing is pushed before a write is confirmed.
//
// Commands:
//
//	broker id=1 epoch=10 [shutting]      a live broker, no effects (setup)
//	partition t/0 replicas=(1,2,3) leader=1 le=0 isr=(1,2,3) pe=0 [adding=(..) removing=(..)]
//	                                     a partition's assignment and state (setup)
//	unclean topic=t                      unclean.leader.election.enable=true for t
//	register id=4 epoch=20               a registration seen in etcd
//	depart id=1 [epoch=10]               a registration gone
//	alter broker=1 epoch=10              AlterPartition; one item a line:
//	                                       t/0 le=0 pe=0 isr=(1,2) [bepochs=(10,11)]
//	shutdown broker=1 epoch=10           ControlledShutdown
//	reassign                             AlterPartitionReassignments; one item a line:
//	                                       t/0 replicas=(1,2,4)   or   t/0 cancel
//	resume                               a new term's look at reassignments in flight
//	rebalance [enabled] [percent=10]     the auto leader rebalance configuration (setup)
//	topic-config topic=t [unclean]       t's overrides changed (unclean election on or off)
//	broker-config [rebalance] [every=60] the cluster-wide dynamic broker config changed
//	                                       (every: leader.imbalance.check.interval.seconds)
//	timer rebalance                      the rebalance timer fires
//	elect type=preferred|unclean [all]   ElectLeaders; partitions one a line
//	write ok|moved|unknown|resigning [conflict=(t/0,...)]
//	                                     settles the partition-state write in flight
//	write ok|refused|moved|unknown       settles the assignment write in flight
//	read ok|fail                         answers the topic read in flight (ok: the
//	                                     topic as the controller has it, at a newer revision)
//	open id=1 epoch=10                   a BrokerSession opening
//	report id=1 [full] [replaced]        a session message (of the session it replaced);
//	                                       one line each: t/0 leo=10 [hw=8 le=4 leader] | removed t/0 |
//	                                       offline /dir t/0 t/1 | event <reason>
//	close id=1                           the session's stream breaks
//	yielded broker=2 ok|timeout|refused  the oldest YieldLeadership to broker 2 answered
//	                                       (ok), not answered in time, or refused
//	probe id=1 [healthy|refused|replaced]
//	                                     the fast-failover probe's outcome
//	timer grace=1                        the broker's grace period ends
//	write ok|refused|moved|unknown       settles the lease revocation in flight
//	progress                             the progress reports held
//	delete                               DeleteTopics; topic names in the input
//	acked topic=t                        t's StopReplica requests were answered
//	load                                 a new term loads what the setup commands
//	                                     described, as etcd holds it
//	state                                the partitions and brokers
//	gauges                               the partition-state gauges as the shell
//	                                     last refreshed them (offline_partitions_count)
//	create [validate]                    CreateTopics; one topic a line:
//	                                       t p=3 rf=2 [cfg=key:value ...] | t assign=(1,2) assign=(2,3)
//	write ok|refused|moved|unknown       settles the topic creation in flight
//	offsets broker=1 epoch=10            a broker asking for the offsets topic
//	defaults key=value ...               the cluster-wide dynamic broker config (setup)
//	grow [validate]                      CreatePartitions; one topic a line:
//	                                       t count=3 [assign=(1,2) ...]
//	configure [validate]                 AlterConfigs; one resource a line:
//	                                       topic t|broker 1|broker default, then
//	                                       set key=value | delete key, repeated
//	write ok|refused|moved|unknown       settles the config write in flight
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := newHarness()
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				h.t = t
				out, err := h.run(d)
				if err != nil {
					t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
				}
				if len(out) == 0 {
					return "ok\n"
				}
				return strings.Join(out, "\n") + "\n"
			})
		})
	}
}

type harness struct {
	t         *testing.T
	c         *core
	rev       int64 // the fake etcd's revision
	unclean   map[string]bool
	rebalance rebalancePolicy
	// inflight is the write or read the core waits for.
	inflight effect
	// sessions are the open sessions by broker; gens the last fast-failover
	// check's gen by broker.
	sessions map[int32]*session
	replaced map[int32]*session
	gens     map[int32]uint64
	// awaiting are the deleting topics whose acks the core waits for.
	awaiting map[string]*topic
	// yields are the YieldLeadership requests not answered yet, oldest
	// first.
	yields []effYield
	// pushed are the requests pushed to brokers, for Go tests to inspect.
	pushed []effPush
	// offline is the offline partition gauge, recounted after an event
	// that marked the state dirty, as the shell does (afterEvent).
	offline int
}

func newHarness() *harness {
	h := &harness{rev: 100, unclean: map[string]bool{}, rebalance: rebalancePolicy{percent: 10, every: 300 * time.Second},
		sessions: map[int32]*session{}, replaced: map[int32]*session{}, gens: map[int32]uint64{},
		awaiting: map[string]*topic{}}
	h.c = newCore(&commonv1.Node{Id: 100, Address: "ctrl:1"}, 7, slog.New(slog.DiscardHandler),
		policy{unclean: func(t *topic) bool { return h.unclean[t.name] || t.config["unclean.leader.election.enable"] == "true" },
			rebalance: h.rebalancePolicy, grace: 3 * time.Second},
		rand.New(rand.NewPCG(1, 2)))
	return h
}

func (h *harness) run(d *datadriven.TestData) ([]string, error) {
	c := h.c
	switch d.Cmd {
	case "broker":
		id, epoch := int32(h.intArg(d, "id")), h.intArg(d, "epoch")
		c.brokers[id] = &broker{info: brokerInfo(id, epoch), shuttingDown: d.HasArg("shutting")}
		c.seen[id] = brokerInfo(id, epoch).BrokerInfo
		return nil, nil
	case "partition":
		return nil, h.partition(d)
	case "unclean":
		var name string
		d.ScanArgs(h.t, "topic", &name)
		h.unclean[name] = true
		return nil, nil
	case "topic-config":
		var name string
		d.ScanArgs(h.t, "topic", &name)
		cfg := map[string]string{}
		if d.HasArg("unclean") {
			cfg["unclean.leader.election.enable"] = "true"
		}
		c.handle(evTopicConfig{topic: name, cfg: cfg})
	case "broker-config":
		h.rebalance.enabled = d.HasArg("rebalance")
		cfg := map[string]string{"auto.leader.rebalance.enable": strconv.FormatBool(h.rebalance.enabled)}
		if d.HasArg("every") {
			cfg[intervalKey] = strconv.FormatInt(h.intArg(d, "every"), 10)
		}
		c.handle(evBrokerConfig{entity: "<default>", cfg: cfg})
	case "rebalance":
		h.rebalance.enabled = d.HasArg("enabled")
		if d.HasArg("percent") {
			h.rebalance.percent = int(h.intArg(d, "percent"))
		}
		return nil, nil
	case "timer":
		if d.HasArg("grace") {
			id := int32(h.intArg(d, "grace"))
			c.handle(evTimer{key: timerKey{kind: timerGrace, broker: id}, gen: h.gens[id]})
			break
		}
		if d.HasArg("reassign") {
			c.handle(evTimer{key: timerKey{kind: timerReassign}})
			break
		}
		if !d.HasArg("rebalance") {
			return nil, fmt.Errorf("timer rebalance|reassign|grace=<id>")
		}
		c.handle(evTimer{key: timerKey{kind: timerRebalance}})
	case "elect":
		req, err := h.electReq(d)
		if err != nil {
			return nil, err
		}
		c.handle(evElectLeaders{req: req, reply: func(any, error) {}})
	case "open":
		id, epoch := int32(h.intArg(d, "id")), h.intArg(d, "epoch")
		c.handle(evSessionOpened{first: &controlv1.BrokerSessionRequest{BrokerId: id, BrokerEpoch: epoch},
			reply: func(m any, err error) {
				if s, ok := m.(*session); ok {
					h.replaced[id] = h.sessions[id]
					h.sessions[id] = s
				}
			}})
	case "report":
		id := int32(h.intArg(d, "id"))
		s := h.sessions[id]
		if d.HasArg("replaced") {
			s = h.replaced[id]
		}
		if s == nil {
			return nil, fmt.Errorf("no such session of broker %d", id)
		}
		m, err := reportMsg(d, s)
		if err != nil {
			return nil, err
		}
		c.handle(evSessionReport{s: s, m: m, now: 1000})
	case "close":
		id := int32(h.intArg(d, "id"))
		s := h.sessions[id]
		if s == nil {
			return nil, fmt.Errorf("no open session of broker %d", id)
		}
		c.handle(evSessionClosed{s: s, cause: fmt.Errorf("stream broke")})
	case "probe":
		id := int32(h.intArg(d, "id"))
		r := evProbeResult{id: id, gen: h.gens[id], healthy: d.HasArg("healthy"), refused: d.HasArg("refused"),
			replaced: d.HasArg("replaced"), why: "scripted"}
		c.handle(r)
	case "yielded":
		id := int32(h.intArg(d, "broker"))
		i := slices.IndexFunc(h.yields, func(y effYield) bool { return y.to == id })
		if i < 0 {
			return nil, fmt.Errorf("no YieldLeadership to broker %d waits for an answer", id)
		}
		y := h.yields[i]
		h.yields = slices.Delete(h.yields, i, i+1)
		var err error
		switch {
		case d.HasArg("timeout"):
			err = kerr.New(kerr.RequestTimedOut, "no answer from broker %d within 5s", id)
		case d.HasArg("refused"):
			err = kerr.New(kerr.FencedLeaderEpoch, "scripted refusal")
		}
		c.handle(evYielded{id: y.id, err: err})
	case "progress":
		return h.progress(), nil
	case "load":
		c.handle(h.loadEvent())
	case "delete":
		req := &adminv1.DeleteTopicsRequest{Topics: strings.Fields(d.Input)}
		c.handle(evDeleteTopics{req: req, reply: func(any, error) {}})
	case "acked":
		var name string
		d.ScanArgs(h.t, "topic", &name)
		t := h.awaiting[name]
		if t == nil {
			return nil, fmt.Errorf("no deletion of %s waits for acks", name)
		}
		delete(h.awaiting, name)
		c.handle(evDeletionAcked{t: t})
	case "register":
		id, epoch := int32(h.intArg(d, "id")), h.intArg(d, "epoch")
		c.handle(evBrokerRegistered{info: brokerInfo(id, epoch)})
	case "depart":
		id := int32(h.intArg(d, "id"))
		var epoch int64
		if d.HasArg("epoch") {
			epoch = h.intArg(d, "epoch")
		}
		c.handle(evBrokerDeparted{id: id, epoch: epoch, why: "lease expired"})
	case "alter":
		req, err := alterReq(d, int32(h.intArg(d, "broker")), h.intArg(d, "epoch"))
		if err != nil {
			return nil, err
		}
		c.handle(evAlterPartition{req: req, reply: func(any, error) {}})
	case "shutdown":
		c.handle(evControlledShutdown{req: &controlv1.ControlledShutdownRequest{
			BrokerId: int32(h.intArg(d, "broker")), BrokerEpoch: h.intArg(d, "epoch")},
			reply: func(any, error) {}})
	case "reassign":
		req, err := reassignReq(d)
		if err != nil {
			return nil, err
		}
		c.handle(evReassign{req: req, reply: func(any, error) {}})
	case "resume":
		c.resumeReassignments(func() {})
	case "write":
		ev, err := h.settle(d)
		if err != nil {
			return nil, err
		}
		c.handle(ev)
	case "read":
		ev, err := h.read(d)
		if err != nil {
			return nil, err
		}
		c.handle(ev)
	case "state":
		return h.state(), nil
	case "gauges":
		return []string{fmt.Sprintf("offline_partitions_count=%d", h.offline)}, nil
	case "create":
		req, err := createReq(d)
		if err != nil {
			return nil, err
		}
		c.handle(evCreateTopics{req: req, reply: func(any, error) {}})
	case "defaults":
		cfg := map[string]string{}
		for _, a := range d.CmdArgs {
			cfg[a.Key] = strings.Join(a.Vals, ",")
		}
		c.brokerConfigs[metastore.DefaultBrokerEntity] = cfg
		return nil, nil
	case "offsets":
		c.handle(evCreateOffsetsTopic{req: &controlv1.CreateOffsetsTopicRequest{
			BrokerId: int32(h.intArg(d, "broker")), BrokerEpoch: h.intArg(d, "epoch")}, reply: func(any, error) {}})
	case "grow":
		req, err := growReq(d)
		if err != nil {
			return nil, err
		}
		c.handle(evCreatePartitions{req: req, reply: func(any, error) {}})
	case "configure":
		req, err := configureReq(d)
		if err != nil {
			return nil, err
		}
		c.handle(evAlterConfigs{req: req, reply: func(any, error) {}})
	default:
		return nil, fmt.Errorf("unknown command %q", d.Cmd)
	}
	return h.effects(), nil
}

// intervalKey is the rebalance interval a script's broker-config sets.
const intervalKey = "leader.imbalance.check.interval.seconds"

// rebalancePolicy is the script's policy, with the interval the dynamic
// cluster default sets, if any (broker-config every=<s>).
func (h *harness) rebalancePolicy() rebalancePolicy {
	p := h.rebalance
	if s := h.c.brokerConfigs["<default>"][intervalKey]; s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			h.t.Fatalf("%s=%q: %v", intervalKey, s, err)
		}
		p.every = time.Duration(n) * time.Second
	}
	return p
}

func (h *harness) intArg(d *datadriven.TestData, key string) int64 {
	var s string
	d.ScanArgs(h.t, key, &s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(h.t, "%s=%q: %v", key, s, err)
	}
	return n
}

func brokerInfo(id int32, epoch int64) metastore.Broker {
	return metastore.Broker{BrokerInfo: metastore.BrokerInfo{ID: id, Address: fmt.Sprintf("b%d:9092", id)}, Epoch: epoch}
}

func ids(d *datadriven.TestData, key string) []int32 {
	if !d.HasArg(key) {
		return nil
	}
	var vals []string
	for _, a := range d.CmdArgs {
		if a.Key == key {
			vals = a.Vals
		}
	}
	return parseIDs(vals)
}

func parseIDs(vals []string) []int32 {
	var out []int32
	for _, v := range vals {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				panic(fmt.Sprintf("id %q: %v", f, err))
			}
			out = append(out, int32(n))
		}
	}
	return out
}

func parseTP(s string) (election.TopicPartition, error) {
	name, part, ok := strings.Cut(s, "/")
	n, err := strconv.ParseInt(part, 10, 32)
	if !ok || err != nil {
		return election.TopicPartition{}, fmt.Errorf("partition %q: want topic/index", s)
	}
	return election.TopicPartition{Topic: name, Partition: int32(n)}, nil
}

// partition adds a partition; its topic is created on first use and its
// index must be the topic's next.
func (h *harness) partition(d *datadriven.TestData) error {
	if len(d.CmdArgs) == 0 {
		return fmt.Errorf("partition needs topic/index")
	}
	tp, err := parseTP(d.CmdArgs[0].Key)
	if err != nil {
		return err
	}
	t := h.c.topics[tp.Topic]
	if t == nil {
		t = &topic{name: tp.Topic, id: "id-" + tp.Topic, modRev: h.rev}
		h.c.topics[tp.Topic] = t
	}
	if int(tp.Partition) != len(t.parts) {
		return fmt.Errorf("partition %s: next index of %s is %d", tp, tp.Topic, len(t.parts))
	}
	p := &partition{t: t, id: tp.Partition, replicas: ids(d, "replicas"), adding: ids(d, "adding"), removing: ids(d, "removing"),
		rec: metastore.PartitionRecord{Topic: tp.Topic, Partition: tp.Partition}}
	if d.HasArg("leader") {
		h.rev++
		p.rec.ModRevision = h.rev
		p.rec.State = metastore.PartitionState{Leader: int32(h.intArg(d, "leader")), LeaderEpoch: int32(h.intArg(d, "le")),
			ISR: ids(d, "isr"), PartitionEpoch: int32(h.intArg(d, "pe")), ControllerEpoch: h.c.epoch}
	}
	t.parts = append(t.parts, p)
	return nil
}

// alterReq reads AlterPartition items, one a line.
func alterReq(d *datadriven.TestData, broker int32, epoch int64) (*controlv1.AlterPartitionRequest, error) {
	req := &controlv1.AlterPartitionRequest{BrokerId: broker, BrokerEpoch: epoch}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		tp, err := parseTP(f[0])
		if err != nil {
			return nil, err
		}
		it := &controlv1.AlterPartitionItem{Topic: tp.Topic, Partition: tp.Partition}
		var isr, bepochs []int32
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, "()")
			switch k {
			case "le", "pe":
				n, err := strconv.ParseInt(v, 10, 32)
				if err != nil {
					return nil, err
				}
				if k == "le" {
					it.LeaderEpoch = int32(n)
				} else {
					it.PartitionEpoch = int32(n)
				}
			case "isr":
				isr = parseIDs([]string{v})
			case "bepochs":
				bepochs = parseIDs([]string{v})
			default:
				return nil, fmt.Errorf("alter item: unknown %q", k)
			}
		}
		for i, id := range isr {
			m := &controlv1.IsrMember{BrokerId: id}
			if i < len(bepochs) {
				m.BrokerEpoch = int64(bepochs[i])
			}
			it.NewIsr = append(it.NewIsr, m)
		}
		req.Partitions = append(req.Partitions, it)
	}
	return req, nil
}

// settle plays etcd for the write in flight.
func (h *harness) settle(d *datadriven.TestData) (event, error) {
	if len(d.CmdArgs) == 0 {
		return nil, fmt.Errorf("write ok|refused|moved|unknown|resigning")
	}
	var err error
	resigning := false
	switch d.CmdArgs[0].Key {
	case "ok", "refused":
	case "moved":
		err = &metastore.ControllerMovedError{Epoch: h.c.epoch, CurrentEpoch: h.c.epoch + 1,
			Current: &metastore.ControllerInfo{ControllerID: 200, Address: "ctrl:2", Epoch: h.c.epoch + 1}}
	case "unknown":
		err = context.DeadlineExceeded
	case "resigning":
		err, resigning = context.Canceled, true
	default:
		return nil, fmt.Errorf("write %q: want ok, refused, moved, unknown or resigning", d.CmdArgs[0].Key)
	}
	switch w := h.inflight.(type) {
	case effWriteStates:
		if err != nil {
			h.inflight = nil
			return evWriteResult{err: err, resigning: resigning}, nil
		}
		return h.writeStates(d, w)
	case effMarkDeletion, effDeleteTopic:
		h.inflight = nil
		if d.CmdArgs[0].Key == "refused" {
			err = kerr.New(kerr.UnknownTopicOrPartition, "topic is gone")
		}
		return evMetaWriteResult{err: err, resigning: resigning}, nil
	case effPutConfig:
		h.inflight = nil
		if d.CmdArgs[0].Key == "refused" {
			err = kerr.New(kerr.UnknownTopicOrPartition, "topic is gone")
		}
		return evMetaWriteResult{err: err, resigning: resigning}, nil
	case effCreateTopic:
		h.inflight = nil
		if d.CmdArgs[0].Key == "refused" {
			err = kerr.New(kerr.TopicAlreadyExists, "topic %q already exists", w.topic.Name)
		}
		if err != nil {
			return evCreateTopicResult{err: err, resigning: resigning}, nil
		}
		h.rev++
		nt := w.topic
		mt := &metastore.Topic{Name: nt.Name, ModRevision: h.rev, Config: nt.Config, Partitions: map[int32]metastore.PartitionRecord{},
			Assignment: metastore.TopicAssignment{TopicID: "id-" + nt.Name, Partitions: nt.Replicas}}
		for id, st := range nt.States {
			st.ControllerEpoch = h.c.epoch
			mt.Partitions[id] = metastore.PartitionRecord{Topic: nt.Name, Partition: id, State: st, ModRevision: h.rev}
		}
		return evCreateTopicResult{topic: mt}, nil
	case effRevokeBroker:
		h.inflight = nil
		if d.CmdArgs[0].Key == "refused" {
			err = kerr.New(kerr.StaleBrokerEpoch, "broker %d re-registered", w.id)
		}
		return evRevokeResult{err: err, resigning: resigning}, nil
	case effWriteAssignment:
		h.inflight = nil
		if d.CmdArgs[0].Key == "refused" {
			err = kerr.New(kerr.InvalidUpdateVersion, "topic %q changed", w.update.Topic)
		}
		if err != nil {
			return evAssignmentResult{err: err, resigning: resigning}, nil
		}
		h.rev++
		res := metastore.AssignmentResult{ModRevision: h.rev, Assignment: w.update.Assignment}
		for _, u := range w.update.States {
			res.States = append(res.States, h.written(u))
		}
		return evAssignmentResult{res: res}, nil
	}
	return nil, fmt.Errorf("no write in flight")
}

// written is the record the fake etcd stores for u at the current revision.
func (h *harness) written(u metastore.PartitionUpdate) metastore.PartitionRecord {
	st := metastore.PartitionState{Leader: u.Next.Leader, LeaderEpoch: u.Next.LeaderEpoch,
		ISR: slices.Clone(u.Next.ISR), ControllerEpoch: h.c.epoch}
	if u.Current.ModRevision != 0 {
		st.PartitionEpoch = u.Current.State.PartitionEpoch + 1
	}
	return metastore.PartitionRecord{Topic: u.Current.Topic, Partition: u.Current.Partition, State: st, ModRevision: h.rev}
}

// writeStates plays UpdatePartitionStates: everything but the conflicts is
// written in one revision, as metastore does after dropping them.
func (h *harness) writeStates(d *datadriven.TestData, w effWriteStates) (event, error) {
	h.inflight = nil
	conflict := map[election.TopicPartition]bool{}
	for _, a := range d.CmdArgs {
		if a.Key == "conflict" {
			for _, v := range a.Vals {
				tp, err := parseTP(v)
				if err != nil {
					return nil, err
				}
				conflict[tp] = true
			}
		}
	}
	var ev evWriteResult
	if len(conflict) > 0 {
		h.rev++ // someone else's write
	}
	other := h.rev
	h.rev++
	for _, u := range w.updates {
		cur := u.Current
		tp := election.TopicPartition{Topic: cur.Topic, Partition: cur.Partition}
		if conflict[tp] {
			// Someone else wrote the state first: the same leader and ISR
			// with the next partition epoch.
			now := cur
			now.State.PartitionEpoch++
			now.ModRevision = other
			ev.res.Conflicts = append(ev.res.Conflicts, metastore.PartitionConflict{Topic: tp.Topic, Partition: tp.Partition,
				Expected: cur.ModRevision, Current: &now})
			continue
		}
		ev.res.Updated = append(ev.res.Updated, h.written(u))
	}
	return ev, nil
}

// read plays Store.Topic for the read in flight.
func (h *harness) read(d *datadriven.TestData) (event, error) {
	rd, ok := h.inflight.(effReadTopic)
	if !ok {
		return nil, fmt.Errorf("no read in flight")
	}
	h.inflight = nil
	if d.HasArg("fail") {
		return evTopicRead{err: context.DeadlineExceeded}, nil
	}
	t := h.c.topics[rd.name]
	h.rev++
	mt := &metastore.Topic{Name: t.name, ModRevision: h.rev, Config: t.config, Partitions: map[int32]metastore.PartitionRecord{},
		Assignment: t.assignmentWith(-1, election.Reassignment{})}
	for _, p := range t.parts {
		if p.hasState() {
			mt.Partitions[p.id] = p.rec
		}
	}
	return evTopicRead{topic: mt}, nil
}

// electReq reads ElectLeaders' partitions, one a line.
func (h *harness) electReq(d *datadriven.TestData) (*adminv1.ElectLeadersRequest, error) {
	var typ string
	d.ScanArgs(h.t, "type", &typ)
	req := &adminv1.ElectLeadersRequest{AllPartitions: d.HasArg("all")}
	switch typ {
	case "preferred":
		req.ElectionType = adminv1.ElectionType_ELECTION_TYPE_PREFERRED
	case "unclean":
		req.ElectionType = adminv1.ElectionType_ELECTION_TYPE_UNCLEAN
	case "none":
	default:
		return nil, fmt.Errorf("elect type=%q", typ)
	}
	for _, f := range strings.Fields(d.Input) {
		tp, err := parseTP(f)
		if err != nil {
			return nil, err
		}
		req.Partitions = append(req.Partitions, &commonv1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return req, nil
}

// reassignReq reads AlterPartitionReassignments items, one a line.
func reassignReq(d *datadriven.TestData) (*adminv1.AlterPartitionReassignmentsRequest, error) {
	req := &adminv1.AlterPartitionReassignmentsRequest{}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		tp, err := parseTP(f[0])
		if err != nil {
			return nil, err
		}
		it := &adminv1.ReassignablePartition{Topic: tp.Topic, Partition: tp.Partition}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "replicas":
				it.Replicas = parseIDs([]string{strings.Trim(v, "()")})
			case "cancel":
			default:
				return nil, fmt.Errorf("reassign item: unknown %q", k)
			}
		}
		req.Partitions = append(req.Partitions, it)
	}
	return req, nil
}

// effects renders and clears what the core emitted.
func (h *harness) effects() []string {
	var out []string
	for _, e := range h.c.take() {
		switch e := e.(type) {
		case effWriteStates, effWriteAssignment, effReadTopic, effRevokeBroker, effMarkDeletion, effDeleteTopic,
			effCreateTopic, effPutConfig:
			h.inflight = e
		case effAwaitAcks:
			if da, ok := e.then.(evDeletionAcked); ok {
				h.awaiting[da.t.name] = da.t
			}
		case effProbe:
			h.gens[e.id] = e.gen
		case effYield:
			h.yields = append(h.yields, e)
		case effPush:
			h.pushed = append(h.pushed, e)
		case effAnswer:
			e.reply(e.resp, e.err)
		}
		out = append(out, renderEffect(e)...)
	}
	if h.c.wait != nil {
		if _, ok := h.inflight.(effReadTopic); ok {
			out = append(out, "(read in flight)")
		} else {
			out = append(out, "(write in flight)")
		}
	}
	if h.c.stateDirty {
		h.offline, h.c.stateDirty = h.c.offlineCount(), false
	}
	return out
}

func renderEffect(e effect) []string {
	switch e := e.(type) {
	case effWriteStates:
		out := []string{"write " + e.what}
		for _, u := range e.updates {
			cur := u.Current
			out = append(out, fmt.Sprintf("  %s/%d rev=%d: leader %d->%d le %d->%d isr %v->%v",
				cur.Topic, cur.Partition, cur.ModRevision, cur.State.Leader, u.Next.Leader,
				cur.State.LeaderEpoch, u.Next.LeaderEpoch, cur.State.ISR, u.Next.ISR))
		}
		return out
	case effWriteAssignment:
		u := e.update
		a := u.Assignment
		out := []string{fmt.Sprintf("write %s: topic %s rev=%d", e.what, u.Topic, u.ModRevision)}
		for _, id := range slices.Sorted(maps.Keys(a.Partitions)) {
			line := fmt.Sprintf("  assignment %s/%d replicas=%v", u.Topic, id, a.Partitions[id])
			if add, rem := a.AddingReplicas[id], a.RemovingReplicas[id]; len(add) > 0 || len(rem) > 0 {
				line += fmt.Sprintf(" adding=%v removing=%v", add, rem)
			}
			out = append(out, line)
		}
		for _, st := range u.States {
			cur := st.Current
			out = append(out, fmt.Sprintf("  state %s/%d rev=%d: leader %d->%d le %d->%d isr %v->%v",
				cur.Topic, cur.Partition, cur.ModRevision, cur.State.Leader, st.Next.Leader,
				cur.State.LeaderEpoch, st.Next.LeaderEpoch, cur.State.ISR, st.Next.ISR))
		}
		return out
	case effReadTopic:
		return []string{"read topic " + e.name}
	case effArmTimer:
		return []string{fmt.Sprintf("arm timer %s in %s", timerName(e.key), e.after)}
	case effStopTimer:
		return []string{"stop timer " + timerName(e.key)}
	case effKick:
		return []string{fmt.Sprintf("kick session of broker %d epoch=%d", e.s.brokerID, e.s.epoch)}
	case effProbe:
		return []string{fmt.Sprintf("probe broker %d epoch=%d at %s within %s", e.id, e.epoch, e.addr, e.timeout)}
	case effRevokeBroker:
		return []string{fmt.Sprintf("revoke broker %d epoch=%d", e.id, e.epoch)}
	case effYield:
		return renderYield("yield", e.to, e.req)
	case effMarkDeletion:
		return []string{"mark topic " + e.topic + " for deletion"}
	case effDeleteTopic:
		return []string{"delete topic " + e.topic}
	case effCreateTopic:
		nt := e.topic
		out := []string{fmt.Sprintf("write %s configs=%v", e.what, renderConfig(nt.Config))}
		for _, id := range slices.Sorted(maps.Keys(nt.Replicas)) {
			st := nt.States[id]
			out = append(out, fmt.Sprintf("  %s/%d replicas=%v leader=%d le=%d isr=%v", nt.Name, id, nt.Replicas[id],
				st.Leader, st.LeaderEpoch, st.ISR))
		}
		return out
	case effPutConfig:
		if e.topic != "" {
			return []string{fmt.Sprintf("write config of topic %s: %s", e.topic, renderConfig(e.cfg))}
		}
		return []string{fmt.Sprintf("write config of broker entity %s: %s", e.entity, renderConfig(e.cfg))}
	case effAwaitAcks:
		return []string{fmt.Sprintf("await acks of group %d, then %T", e.group, e.then)}
	case effTopicGone:
		return []string{"topic " + e.t.name + " gone"}
	case effPush:
		return renderPush(e)
	case effBrokerUp:
		return []string{fmt.Sprintf("start sender %d epoch=%d", e.info.ID, e.info.Epoch)}
	case effBrokerGone:
		return []string{fmt.Sprintf("stop sender %d epoch=%d", e.info.ID, e.info.Epoch)}
	case effEvent:
		s := fmt.Sprintf("event %s node=%d: %s", eventName(e.ev.GetKind()), e.ev.GetNodeId(), e.ev.GetReason())
		if e.ev.GetTime() != 0 {
			s += fmt.Sprintf(" (time %d)", e.ev.GetTime())
		}
		return []string{s}
	case effDecision:
		s := fmt.Sprintf("decision %s %s/%d cause=%s leader %d->%d le=%d isr %v->%v pe=%d",
			eventName(e.kind), e.c.p.t.name, e.c.p.id, e.c.cause, e.old.Leader, e.now.Leader, e.now.LeaderEpoch, e.old.ISR, e.now.ISR,
			e.now.PartitionEpoch)
		if e.label != "" {
			s += " counted=" + string(e.label)
		}
		if e.unclean {
			s += " unclean"
		}
		if e.shrunk != "" {
			s += " isr_shrink=" + string(e.shrunk)
		}
		return []string{s}
	case effAnswer:
		return renderAnswer(e)
	case effStepDown:
		return []string{"step down: " + e.cause.Error()}
	}
	return []string{fmt.Sprintf("unknown effect %T", e)}
}

func timerName(k timerKey) string {
	switch k.kind {
	case timerRebalance:
		return "rebalance"
	case timerGrace:
		return fmt.Sprintf("grace of broker %d", k.broker)
	case timerReassign:
		return "reassign"
	}
	return fmt.Sprintf("%d", k.kind)
}

// reportMsg reads a session message: "full" for a full report, then
// one line a replica ("t/0 leo=10", with "hw=8 le=4 leader" on a leader), "removed t/1", "offline /d1 t/0 t/1",
// "event <reason>".
func reportMsg(d *datadriven.TestData, s *session) (*controlv1.BrokerSessionRequest, error) {
	m := &controlv1.BrokerSessionRequest{BrokerId: s.brokerID, BrokerEpoch: s.epoch, FullReport: d.HasArg("full")}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "removed":
			tp, err := parseTP(f[1])
			if err != nil {
				return nil, err
			}
			m.Removed = append(m.Removed, &commonv1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		case "offline":
			dir := &controlv1.OfflineLogDir{Path: f[1]}
			for _, v := range f[2:] {
				tp, err := parseTP(v)
				if err != nil {
					return nil, err
				}
				dir.Partitions = append(dir.Partitions, &commonv1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
			}
			m.OfflineLogDirs = append(m.OfflineLogDirs, dir)
		case "event":
			m.Events = append(m.Events, &controlv1.ClusterEvent{Reason: strings.Join(f[1:], " ")})
		default:
			tp, err := parseTP(f[0])
			if err != nil {
				return nil, err
			}
			rp := &controlv1.ReplicaProgress{Topic: tp.Topic, Partition: tp.Partition}
			for _, kv := range f[1:] {
				if kv == "leader" {
					rp.Leader = true
					continue
				}
				k, v, _ := strings.Cut(kv, "=")
				n, err := strconv.ParseInt(v, 10, 64)
				switch {
				case err != nil:
					return nil, fmt.Errorf("replica progress: %q", kv)
				case k == "leo":
					rp.LogEndOffset = n
				case k == "hw":
					rp.HighWatermark = n
				case k == "le":
					rp.LeaderEpoch = int32(n)
				default:
					return nil, fmt.Errorf("replica progress: %q", kv)
				}
			}
			m.Replicas = append(m.Replicas, rp)
		}
	}
	return m, nil
}

// loadEvent turns the brokers and partitions set up so far into what a new
// term reads from etcd, and empties the core for it.
func (h *harness) loadEvent() evLoaded {
	c := h.c
	ev := evLoaded{clusterID: "cluster-1", brokers: map[int32]metastore.Broker{}, topics: map[string]*metastore.Topic{},
		reply: func(any, error) {}}
	for id, b := range c.brokers {
		ev.brokers[id] = b.info
	}
	for name, t := range c.topics {
		mt := &metastore.Topic{Name: name, ModRevision: t.modRev, Config: t.config,
			Assignment: t.assignmentWith(-1, election.Reassignment{}), Partitions: map[int32]metastore.PartitionRecord{}}
		for _, p := range t.parts {
			if p.hasState() {
				mt.Partitions[p.id] = p.rec
			}
		}
		ev.topics[name] = mt
	}
	c.brokers, c.seen, c.topics = map[int32]*broker{}, map[int32]metastore.BrokerInfo{}, map[string]*topic{}
	return ev
}

// progress lists the progress reports held, as broker:partition@leo.
func (h *harness) progress() []string {
	var out []string
	for k, p := range h.c.progress {
		out = append(out, fmt.Sprintf("%d:%s/%d@%d", k.broker, k.tp.Topic, k.tp.Partition, p.GetLogEndOffset()))
	}
	slices.Sort(out)
	if len(out) == 0 {
		return []string{"no progress"}
	}
	return []string{strings.Join(out, " ")}
}

func eventName(k controlv1.EventKind) string {
	return strings.TrimPrefix(k.String(), "EVENT_KIND_")
}

func renderState(s *commonv1.PartitionState) string {
	line := fmt.Sprintf("  %s/%d leader=%d le=%d isr=%v pe=%d replicas=%v", s.GetTopic(), s.GetPartition(), s.GetLeader(),
		s.GetLeaderEpoch(), s.GetIsr(), s.GetPartitionEpoch(), s.GetReplicas())
	if len(s.GetAddingReplicas()) > 0 {
		line += fmt.Sprintf(" adding=%v", s.GetAddingReplicas())
	}
	return line
}

func renderYield(kind string, to int32, r *controlv1.YieldLeadershipRequest) []string {
	out := []string{fmt.Sprintf("%s %d YieldLeadership cepoch=%d bepoch=%d", kind, to, r.GetControllerEpoch(), r.GetBrokerEpoch())}
	if r.GetResume() {
		out[0] += " resume"
	}
	for _, p := range r.GetPartitions() {
		line := fmt.Sprintf("  %s/%d le=%d pe=%d", p.GetTopic(), p.GetPartition(), p.GetLeaderEpoch(), p.GetPartitionEpoch())
		if !r.GetResume() {
			line += fmt.Sprintf(" next=%d", p.GetNextLeader())
		}
		out = append(out, line)
	}
	return out
}

func renderPush(e effPush) []string {
	var out []string
	switch {
	case e.req.YieldLeadership != nil:
		return renderYield("push", e.to, e.req.YieldLeadership)
	case e.req.LeaderAndIsr != nil:
		r := e.req.LeaderAndIsr
		var leaders []int32
		for _, n := range r.GetLeaders() {
			leaders = append(leaders, n.GetId())
		}
		line := fmt.Sprintf("push %d LeaderAndIsr cepoch=%d bepoch=%d leaders=%v", e.to, r.GetControllerEpoch(),
			r.GetBrokerEpoch(), leaders)
		if r.GetFull() {
			line += " full"
		}
		if e.track {
			line += " (tracked)"
		}
		if e.group != 0 {
			line += fmt.Sprintf(" (group %d)", e.group)
		}
		out = append(out, line)
		for _, s := range r.GetPartitions() {
			out = append(out, renderState(s))
		}
	case e.req.UpdateMetadata != nil:
		r := e.req.UpdateMetadata
		var live, stopping []int32
		for _, b := range r.GetBrokers() {
			live = append(live, b.GetNode().GetId())
			if b.GetShuttingDown() {
				stopping = append(stopping, b.GetNode().GetId())
			}
		}
		s := fmt.Sprintf("push %d UpdateMetadata cepoch=%d bepoch=%d brokers=%v", e.to, r.GetControllerEpoch(),
			r.GetBrokerEpoch(), live)
		if len(stopping) > 0 {
			s += fmt.Sprintf(" shutting=%v", stopping)
		}
		if r.GetFull() {
			s += " full"
		}
		if len(r.GetDeletedTopics()) > 0 {
			s += fmt.Sprintf(" deleted=%v", r.GetDeletedTopics())
		}
		if e.track {
			s += " (tracked)"
		}
		out = append(out, s)
		if !r.GetFull() {
			for _, p := range r.GetPartitions() {
				out = append(out, renderState(p))
			}
		}
	case e.req.StopReplica != nil:
		r := e.req.StopReplica
		line := fmt.Sprintf("push %d StopReplica cepoch=%d bepoch=%d", e.to, r.GetControllerEpoch(), r.GetBrokerEpoch())
		if e.group != 0 {
			line += fmt.Sprintf(" (group %d)", e.group)
		}
		out = append(out, line)
		for _, p := range r.GetPartitions() {
			out = append(out, fmt.Sprintf("  %s/%d le=%d delete=%t", p.GetTopic(), p.GetPartition(), p.GetLeaderEpoch(), p.GetDelete()))
		}
	}
	return out
}

func renderAnswer(e effAnswer) []string {
	if e.err != nil {
		return []string{"answer error " + kerr.As(e.err).Code.String()}
	}
	if e.resp == nil {
		return []string{"answer ok"}
	}
	switch r := e.resp.(type) {
	case *controlv1.AlterPartitionResponse:
		out := []string{"answer AlterPartition"}
		for _, p := range r.GetPartitions() {
			if p.GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
				out = append(out, fmt.Sprintf("  %s/%d error %s", p.GetTopic(), p.GetPartition(), kerr.Code(p.GetErrorCode())))
				continue
			}
			out = append(out, fmt.Sprintf("  %s/%d leader=%d le=%d isr=%v pe=%d", p.GetTopic(), p.GetPartition(), p.GetLeader(),
				p.GetLeaderEpoch(), p.GetIsr(), p.GetPartitionEpoch()))
		}
		return out
	case *adminv1.AlterPartitionReassignmentsResponse:
		out := []string{"answer AlterPartitionReassignments"}
		for _, r := range r.GetResults() {
			code := "ok"
			if r.GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
				code = kerr.Code(r.GetErrorCode()).String()
			}
			out = append(out, fmt.Sprintf("  %s/%d %s", r.GetTopic(), r.GetPartition(), code))
		}
		return out
	case deleteAnswer:
		out := []string{"answer DeleteTopics"}
		for i, res := range r.resp.GetResults() {
			code := "ok"
			if res.GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
				code = kerr.Code(res.GetErrorCode()).String()
			} else if r.done[i] != nil {
				code += " (deleting)"
			}
			out = append(out, fmt.Sprintf("  %s %s", res.GetName(), code))
		}
		return out
	case createAnswer:
		out := []string{"answer CreateTopics"}
		for i, res := range r.resp.GetResults() {
			line := fmt.Sprintf("  %s %s", res.GetName(), resultCode(res.GetErrorCode()))
			if res.GetErrorCode() == commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
				line += fmt.Sprintf(" partitions=%d rf=%d", res.GetNumPartitions(), res.GetReplicationFactor())
				for _, a := range res.GetAssignments() {
					line += fmt.Sprintf(" %d:%v", a.GetPartition(), a.GetReplicas())
				}
				if v, ok := res.GetConfigs()["min.insync.replicas"]; ok {
					line += " min.insync.replicas=" + v
				}
			}
			if r.groups[i] != 0 {
				line += fmt.Sprintf(" (wait for group %d)", r.groups[i])
			}
			out = append(out, line)
		}
		return out
	case offsetsAnswer:
		line := fmt.Sprintf("answer CreateOffsetsTopic partitions=%d rf=%d created=%t", r.resp.GetNumPartitions(),
			r.resp.GetReplicationFactor(), r.resp.GetCreated())
		if r.group != 0 {
			line += fmt.Sprintf(" (wait for group %d)", r.group)
		}
		return []string{line}
	case partitionsAnswer:
		out := []string{"answer CreatePartitions"}
		for i, res := range r.resp.GetResults() {
			line := fmt.Sprintf("  %s %s", res.GetName(), resultCode(res.GetErrorCode()))
			for _, a := range res.GetAssignments() {
				line += fmt.Sprintf(" %d:%v", a.GetPartition(), a.GetReplicas())
			}
			if r.groups[i] != 0 {
				line += fmt.Sprintf(" (wait for group %d)", r.groups[i])
			}
			out = append(out, line)
		}
		return out
	case *adminv1.AlterConfigsResponse:
		out := []string{"answer AlterConfigs"}
		for _, res := range r.GetResults() {
			out = append(out, fmt.Sprintf("  %s %q %s", res.GetResource().GetType(), res.GetResource().GetName(),
				resultCode(res.GetErrorCode())))
		}
		return out
	case *session:
		return []string{fmt.Sprintf("answer session of broker %d epoch=%d", r.brokerID, r.epoch)}
	case electAnswer:
		out := []string{"answer ElectLeaders"}
		for _, r := range r.resp.GetResults() {
			code := "ok"
			if r.GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
				code = kerr.Code(r.GetErrorCode()).String()
			}
			out = append(out, fmt.Sprintf("  %s/%d %s leader=%d le=%d", r.GetTopic(), r.GetPartition(), code,
				r.GetLeader(), r.GetLeaderEpoch()))
		}
		for _, id := range slices.Sorted(maps.Keys(r.confirm)) {
			var tps []string
			for _, res := range r.confirm[id] {
				tps = append(tps, fmt.Sprintf("%s/%d", res.GetTopic(), res.GetPartition()))
			}
			out = append(out, fmt.Sprintf("  confirm by %d: %s", id, strings.Join(tps, " ")))
		}
		return out
	case *controlv1.ControlledShutdownResponse:
		var rem []string
		for _, tp := range r.GetRemainingPartitions() {
			rem = append(rem, fmt.Sprintf("%s/%d", tp.GetTopic(), tp.GetPartition()))
		}
		return []string{fmt.Sprintf("answer ControlledShutdown remaining=[%s]", strings.Join(rem, " "))}
	}
	return []string{fmt.Sprintf("answer %T", e.resp)}
}

// state lists the brokers and every partition's assignment and state.
func (h *harness) state() []string {
	c := h.c
	var out []string
	for _, id := range c.sortedBrokerIDs() {
		b := c.brokers[id]
		s := fmt.Sprintf("broker %d epoch=%d", id, b.info.Epoch)
		if b.shuttingDown {
			s += " shutting"
		}
		out = append(out, s)
	}
	for _, t := range c.sortedTopics() {
		for _, p := range t.parts {
			s := p.rec.State
			line := fmt.Sprintf("%s/%d replicas=%v leader=%d le=%d isr=%v pe=%d rev=%d", t.name, p.id, []int32(p.replicas),
				s.Leader, s.LeaderEpoch, s.ISR, s.PartitionEpoch, p.rec.ModRevision)
			if p.reassigning() {
				line += fmt.Sprintf(" adding=%v removing=%v", p.adding, p.removing)
			}
			if t.deleting {
				line += " deleting"
			}
			out = append(out, line)
		}
	}
	if c.ended != nil {
		out = append(out, "ended: "+c.ended.Error())
	}
	return out
}

func resultCode(c commonv1.ErrorCode) string {
	if c == commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
		return "ok"
	}
	return kerr.Code(c).String()
}

// renderConfig prints a config map in key order.
func renderConfig(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k+"="+m[k])
	}
	return "{" + strings.Join(kv, " ") + "}"
}

// createReq reads CreateTopics' topics, one a line.
func createReq(d *datadriven.TestData) (*adminv1.CreateTopicsRequest, error) {
	req := &adminv1.CreateTopicsRequest{ValidateOnly: d.HasArg("validate")}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		spec := &adminv1.TopicSpec{Name: f[0]}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "p", "rf":
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", kv, err)
				}
				if k == "p" {
					spec.NumPartitions = int32(n)
				} else {
					spec.ReplicationFactor = int32(n)
				}
			case "cfg":
				ck, cv, _ := strings.Cut(v, ":")
				if spec.Configs == nil {
					spec.Configs = map[string]string{}
				}
				spec.Configs[ck] = cv
			case "assign":
				spec.Assignments = append(spec.Assignments, &adminv1.ReplicaAssignment{
					Partition: int32(len(spec.Assignments)), Replicas: parseIDs(strings.Split(strings.Trim(v, "()"), ","))})
			default:
				return nil, fmt.Errorf("unknown topic field %q", kv)
			}
		}
		req.Topics = append(req.Topics, spec)
	}
	return req, nil
}

// growReq reads CreatePartitions' topics, one a line.
func growReq(d *datadriven.TestData) (*adminv1.CreatePartitionsRequest, error) {
	req := &adminv1.CreatePartitionsRequest{ValidateOnly: d.HasArg("validate")}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		spec := &adminv1.CreatePartitionsTopic{Name: f[0]}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "count":
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", kv, err)
				}
				spec.Count = int32(n)
			case "assign":
				spec.Assignments = append(spec.Assignments, &adminv1.ReplicaAssignment{
					Replicas: parseIDs(strings.Split(strings.Trim(v, "()"), ","))})
			default:
				return nil, fmt.Errorf("unknown topic field %q", kv)
			}
		}
		req.Topics = append(req.Topics, spec)
	}
	return req, nil
}

// configureReq reads AlterConfigs' resources, one a line.
func configureReq(d *datadriven.TestData) (*adminv1.AlterConfigsRequest, error) {
	req := &adminv1.AlterConfigsRequest{ValidateOnly: d.HasArg("validate")}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 || len(f)%2 != 0 {
			return nil, fmt.Errorf("want topic|broker <name> then set k=v | delete k pairs: %q", line)
		}
		res := &adminv1.ConfigResource{Name: f[1]}
		switch f[0] {
		case "topic":
			res.Type = adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC
		case "broker":
			res.Type = adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER
			if f[1] == "default" {
				res.Name = ""
			}
		default:
			return nil, fmt.Errorf("unknown resource type %q", f[0])
		}
		r := &adminv1.AlterConfigsResource{Resource: res}
		for i := 2; i < len(f); i += 2 {
			k, v, _ := strings.Cut(f[i+1], "=")
			switch f[i] {
			case "set":
				r.Ops = append(r.Ops, &adminv1.ConfigOp{Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET, Name: k, Value: v})
			case "delete":
				r.Ops = append(r.Ops, &adminv1.ConfigOp{Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE, Name: k})
			default:
				return nil, fmt.Errorf("unknown op %q", f[i])
			}
		}
		req.Resources = append(req.Resources, r)
	}
	return req, nil
}
