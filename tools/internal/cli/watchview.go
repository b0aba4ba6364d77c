package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// ANSI styles for the live view.
const (
	ansiReset  = "\033[0m"
	ansiBold   = "\033[1m"
	ansiDim    = "\033[2m"
	ansiRed    = "\033[31m"
	ansiGreen  = "\033[32m"
	ansiYellow = "\033[33m"
	ansiClear  = "\033[H\033[2J"
)

// maxWatchEvents is how many recent events the view keeps.
const maxWatchEvents = 8

// seg is a piece of a table cell with its style ("" for none).
type seg struct{ text, style string }

type cell []seg

func plain(s string) cell         { return cell{{s, ""}} }
func styled(s, style string) cell { return cell{{s, style}} }
func (c cell) width() (n int) {
	for _, s := range c {
		n += utf8.RuneCountInString(s.text)
	}
	return n
}

// watchView renders WatchCluster snapshots as a table per partition: the
// leader in yellow, in-sync replicas in green, out-of-sync ones in red,
// each replica with its LEO and HW, and a status column that warns about
// under-replicated and leaderless partitions. Without colour it writes the
// same text with no escape codes.
type watchView struct {
	color  bool
	clear  bool            // clear the screen before each snapshot
	topics map[string]bool // the watched topics; empty means all
	events []*controlv1.ClusterEvent
}

// addEvents keeps the recent events that concern the watched topics (or no
// topic: brokers, controllers). HW advances are left out: too many to read.
func (v *watchView) addEvents(evs []*controlv1.ClusterEvent) {
	for _, e := range evs {
		if e.GetKind() == controlv1.EventKind_EVENT_KIND_HW_ADVANCE {
			continue
		}
		if e.GetTopic() != "" && len(v.topics) > 0 && !v.topics[e.GetTopic()] {
			continue
		}
		v.events = append(v.events, e)
	}
	if n := len(v.events); n > maxWatchEvents {
		v.events = v.events[n-maxWatchEvents:]
	}
}

func (v *watchView) paint(s, style string) string {
	if !v.color || style == "" {
		return s
	}
	return style + s + ansiReset
}

// render writes one snapshot.
func (v *watchView) render(w io.Writer, msg *adminv1.WatchClusterResponse) {
	var b strings.Builder
	if v.clear {
		b.WriteString(ansiClear)
	}
	c := msg.GetCluster()
	ts := time.UnixMilli(msg.GetTime()).Format("15:04:05")
	fmt.Fprintf(&b, "%s  %s  cluster %s  controller %s  controller_epoch %d\n",
		v.paint("tidemark watch", ansiBold), ts, c.GetClusterId(), leaderText(c.GetController().GetId()), c.GetControllerEpoch())
	b.WriteString("brokers:")
	for _, br := range c.GetBrokers() {
		id := strconv.Itoa(int(br.GetNode().GetId()))
		if br.GetAlive() {
			b.WriteString(" " + v.paint(id+" up", ansiGreen))
		} else {
			b.WriteString(" " + v.paint(id+" down", ansiRed))
		}
	}
	b.WriteString("\n\n")

	rows := [][]cell{{plain("TOPIC"), plain("PARTITION"), plain("LEADER"), plain("EPOCH"), plain("ISR"), plain("HW"),
		plain("REPLICAS (id:LEO/HW, * leader)"), plain("STATUS")}}
	under, leaderless := 0, 0
	for _, p := range msg.GetPartitions() {
		leader := styled(leaderText(p.GetLeader()), ansiYellow)
		if p.GetLeader() < 0 {
			leader = styled("none", ansiRed)
		}
		hw := strconv.FormatInt(p.GetHighWatermark(), 10)
		switch {
		case p.GetLeader() < 0:
			hw = "-"
		case !p.GetHighWatermarkKnown():
			hw = "?" // the controller has no report from the leader yet
		}
		rows = append(rows, []cell{plain(p.GetTopic()), plain(strconv.Itoa(int(p.GetPartition()))), leader,
			plain(strconv.Itoa(int(p.GetLeaderEpoch()))), plain(joinIDs(p.GetIsr())), plain(hw),
			replicaChips(p), partitionStatus(p)})
		if p.GetUnderReplicated() {
			under++
		}
		if p.GetOffline() || p.GetLeader() < 0 {
			leaderless++
		}
	}
	if len(msg.GetPartitions()) == 0 {
		b.WriteString("no partitions to show\n")
	} else {
		v.table(&b, rows)
	}
	summary := fmt.Sprintf("%d partitions, %d under-replicated, %d without a leader", len(msg.GetPartitions()), under, leaderless)
	switch {
	case leaderless > 0:
		summary = v.paint(summary, ansiRed)
	case under > 0:
		summary = v.paint(summary, ansiYellow)
	}
	b.WriteString("\n" + summary + "\n")
	if v.color {
		b.WriteString(v.paint("yellow: leader  green: in sync  red: out of sync or down", ansiDim) + "\n")
	}
	if len(v.events) > 0 {
		b.WriteString("\nrecent events:\n")
		for _, e := range v.events {
			fmt.Fprintf(&b, "  %s  %-26s %-16s %s\n", time.UnixMilli(e.GetTime()).Format("15:04:05.000"),
				strings.TrimPrefix(e.GetKind().String(), "EVENT_KIND_"), eventSubject(e), e.GetReason())
		}
	}
	if v.clear {
		b.WriteString("\n" + v.paint("Ctrl-C to quit", ansiDim) + "\n")
	} else {
		b.WriteString("\n")
	}
	io.WriteString(w, b.String())
}

// table pads cells by their visible width, so styles do not break the
// alignment as they would with a tabwriter.
func (v *watchView) table(b *strings.Builder, rows [][]cell) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], c.width())
		}
	}
	for _, r := range rows {
		for i, c := range r {
			for _, s := range c {
				b.WriteString(v.paint(s.text, s.style))
			}
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-c.width()+2))
			}
		}
		b.WriteString("\n")
	}
}

// replicaChips shows each assigned replica with its LEO and HW (and a
// follower's LEO as the leader knows it when the two differ): the leader
// yellow and starred, in-sync followers green, the others red.
func replicaChips(p *adminv1.PartitionView) cell {
	var c cell
	for i, r := range p.GetReplicaViews() {
		if i > 0 {
			c = append(c, seg{"  ", ""})
		}
		id := strconv.Itoa(int(r.GetBrokerId()))
		style := ansiRed
		switch {
		case r.GetLeader():
			id, style = id+"*", ansiYellow
		case r.GetInIsr():
			style = ansiGreen
		}
		text := fmt.Sprintf("%s:%d/%d", id, r.GetLogEndOffset(), r.GetHighWatermark())
		if !r.GetReported() {
			text = id + ":?/?" // no report of it to this controller yet: not 0/0
		}
		// A follower's LEO as its leader knows it, when it trails the
		// follower's own: the fetch round trip the HW waits for. Below 0
		// (an older controller's "no fetch yet") it is not known.
		if k := r.LeaderKnownLogEndOffset; k != nil && *k >= 0 && *k != r.GetLogEndOffset() {
			text += fmt.Sprintf(" (leader: %d)", *k)
		}
		if !r.GetAlive() {
			text = id + ":down"
		}
		c = append(c, seg{text, style})
	}
	return c
}

// partitionStatus is the warning column.
func partitionStatus(p *adminv1.PartitionView) cell {
	var c cell
	add := func(text, style string) {
		if len(c) > 0 {
			c = append(c, seg{", ", ""})
		}
		c = append(c, seg{text, style})
	}
	if p.GetOffline() || p.GetLeader() < 0 {
		add("! NO LEADER", ansiRed)
	}
	if p.GetUnderMinIsr() {
		add(fmt.Sprintf("! under min ISR (%d<%d)", len(p.GetIsr()), p.GetMinInsyncReplicas()), ansiRed)
	} else if p.GetAtMinIsr() {
		add("at min ISR", ansiYellow)
	}
	if p.GetUnderReplicated() {
		add("! under-replicated", ansiYellow)
	}
	if len(c) == 0 {
		add("ok", ansiGreen)
	}
	return c
}

// eventSubject names what an event is about.
func eventSubject(e *controlv1.ClusterEvent) string {
	switch k := e.GetKind(); {
	case e.GetTopic() == "":
	case k == controlv1.EventKind_EVENT_KIND_TOPIC_CREATED || k == controlv1.EventKind_EVENT_KIND_TOPIC_DELETED ||
		k == controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED:
		return e.GetTopic()
	default:
		return fmt.Sprintf("%s-%d", e.GetTopic(), e.GetPartition())
	}
	switch id := e.GetNodeId(); {
	case id > 0:
		return fmt.Sprintf("node %d", id)
	case id < 0 && e.GetKind() == controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED:
		return "broker defaults"
	}
	return "-"
}
