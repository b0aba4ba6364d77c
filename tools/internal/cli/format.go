package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/platform/kerr"
)

// joinIDs prints broker ids as Kafka's tools do: 1,2,3.
func joinIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

// leaderText is a leader id, or "none" for a partition without one.
func leaderText(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

// parseAssignment parses Kafka's --replica-assignment syntax: partitions
// separated by commas, each a colon-separated list of broker ids, preferred
// leader first ("1:2:3,2:3:1").
func parseAssignment(s string) ([]*adminv1.ReplicaAssignment, error) {
	var out []*adminv1.ReplicaAssignment
	for p, part := range strings.Split(s, ",") {
		ra := &adminv1.ReplicaAssignment{Partition: int32(p)}
		seen := map[int32]bool{}
		for _, b := range strings.Split(part, ":") {
			id, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
			if err != nil || id < 0 {
				return nil, usagef("--replica-assignment %q: partition %d: %q is not a broker id", s, p, b)
			}
			if seen[int32(id)] {
				return nil, usagef("--replica-assignment %q: partition %d names broker %d twice", s, p, id)
			}
			seen[int32(id)] = true
			ra.Replicas = append(ra.Replicas, int32(id))
		}
		if len(out) > 0 && len(ra.Replicas) != len(out[0].Replicas) {
			return nil, usagef("--replica-assignment %q: partition %d has %d replicas, partition 0 has %d", s, p, len(ra.Replicas), len(out[0].Replicas))
		}
		out = append(out, ra)
	}
	return out, nil
}

// parseConfigs parses key=value settings given to flag, each occurrence
// possibly holding several separated by commas. A comma-separated piece
// without '=' continues the previous value, so list values such as
// cleanup.policy=compact,delete survive.
func parseConfigs(flag string, vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		last := ""
		for _, piece := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(piece, "=")
			if !ok {
				if last == "" {
					return nil, usagef("%s %q: want key=value", flag, v)
				}
				out[last] += "," + piece
				continue
			}
			k = strings.TrimSpace(k)
			if k == "" {
				return nil, usagef("%s %q: empty config name", flag, v)
			}
			out[k], last = val, k
		}
	}
	return out, nil
}

// splitList splits comma-separated names, dropping blanks.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// formatConfigs prints configs as key=value,key=value in name order.
func formatConfigs(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// topicLine is the summary line of kafka-topics --describe.
func topicLine(td *adminv1.TopicDescription, partitions int, configs map[string]string) string {
	return fmt.Sprintf("Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s",
		td.GetName(), td.GetTopicId(), partitions, td.GetReplicationFactor(), formatConfigs(configs))
}

// partitionLine is one partition line of kafka-topics --describe, with the
// leader epoch added, and the offline replicas when there are any.
func partitionLine(topic string, pd *adminv1.PartitionDescription) string {
	s := fmt.Sprintf("\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s\tLeaderEpoch: %d",
		topic, pd.GetPartition(), leaderText(pd.GetLeader()), joinIDs(pd.GetReplicas()), joinIDs(pd.GetIsr()), pd.GetLeaderEpoch())
	if len(pd.GetOfflineReplicas()) > 0 {
		s += "\tOffline: " + joinIDs(pd.GetOfflineReplicas())
	}
	return s
}

// electionLine reports one partition's election result the way
// kafka-leader-election does, with the leader it ended with.
func electionLine(kind string, r *adminv1.ElectLeadersResult) (line string, failed bool) {
	tp := fmt.Sprintf("%s-%d", r.GetTopic(), r.GetPartition())
	switch code := kerr.Code(r.GetErrorCode()); code {
	case kerr.None:
		return fmt.Sprintf("Successfully completed leader election (%s) for partition %s: leader %s, leader epoch %d",
			kind, tp, leaderText(r.GetLeader()), r.GetLeaderEpoch()), false
	case kerr.ElectionNotNeeded:
		return fmt.Sprintf("Valid replica already elected for partition %s: leader %s", tp, leaderText(r.GetLeader())), false
	default:
		msg := code.String()
		if r.GetErrorMessage() != "" {
			msg += ": " + r.GetErrorMessage()
		}
		return fmt.Sprintf("Error completing leader election (%s) for partition %s: %s", kind, tp, msg), true
	}
}

// nodeText is "id (address)".
func nodeText(n *commonv1.Node) string {
	if n == nil || n.GetId() < 0 {
		return "none"
	}
	return fmt.Sprintf("%d (%s)", n.GetId(), n.GetAddress())
}

// brokerState is a broker's liveness in one word.
func brokerState(b *adminv1.BrokerInfo) string {
	switch {
	case !b.GetAlive():
		return "offline"
	case b.GetShuttingDown():
		return "shutting-down"
	}
	return "alive"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeCluster prints a DescribeCluster answer: the active controller and
// its epoch, the controllers, and a table of brokers.
func writeCluster(w io.Writer, c *adminv1.DescribeClusterResponse) error {
	fmt.Fprintf(w, "ClusterId: %s\n", c.GetClusterId())
	fmt.Fprintf(w, "ActiveController: %s\tControllerEpoch: %d\n", nodeText(c.GetController()), c.GetControllerEpoch())
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTROLLER\tADDRESS\tROLE")
	for _, ci := range c.GetControllers() {
		role := "standby"
		if ci.GetActive() {
			role = "active"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", ci.GetNode().GetId(), ci.GetNode().GetAddress(), role)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "BROKER\tADDRESS\tRACK\tSTATE\tEPOCH\tLEADERS\tREPLICAS")
	for _, b := range c.GetBrokers() {
		epoch := "-"
		if b.GetBrokerEpoch() > 0 {
			epoch = strconv.FormatInt(b.GetBrokerEpoch(), 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\n", b.GetNode().GetId(), orDash(b.GetNode().GetAddress()),
			orDash(b.GetNode().GetRack()), brokerState(b), epoch, b.GetLeaderCount(), b.GetReplicaCount())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Offline log dirs (Kafka's kafka-log-dirs.sh shows them as errors).
	var offline []string
	for _, b := range c.GetBrokers() {
		for _, d := range b.GetOfflineLogDirs() {
			offline = append(offline, fmt.Sprintf("%d\t%s\t%d\t%s", b.GetNode().GetId(), d.GetPath(), d.GetReplicas(), d.GetError()))
		}
	}
	if len(offline) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "BROKER\tOFFLINE LOG DIR\tREPLICAS\tERROR")
	for _, l := range offline {
		fmt.Fprintln(tw, l)
	}
	return tw.Flush()
}
