package chaos

import (
	"context"
	"fmt"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/clustertest/history"
)

// viewsBound is how long the controller's views may take to agree with
// the brokers once every partition is whole: a report interval (500 ms)
// and a watch interval, with room to spare.
const viewsBound = 10 * time.Second

// checkViews compares what an operator sees, the active controller's
// WatchCluster views (tidemark watch, the console), with the brokers' own
// positions once every partition is whole and nothing is written: every
// replica reported, at the LEO and HW its broker shows, and each
// partition's HW known and the leader's. A broker whose progress reports
// stopped reaching the controller in office (a session left on a frozen
// controller) shows only here: the brokers themselves are fine. It polls
// until they agree or viewsBound passes, and returns the last
// disagreements (none: they agreed).
func (r *runner) checkViews(ctx context.Context, last observation) []string {
	deadline := time.Now().Add(viewsBound)
	var diffs []string
	for {
		msg, err := r.viewSnapshot(ctx)
		if err != nil {
			diffs = []string{fmt.Sprintf("no view from the active controller: %v", err)}
		} else if diffs = viewDisagreements(last, msg); len(diffs) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return diffs
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// viewSnapshot is the first message of a WatchCluster stream: the views
// as they are now.
func (r *runner) viewSnapshot(ctx context.Context) (*adminv1.WatchClusterResponse, error) {
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for msg, err := range r.admin.WatchCluster(wctx, &adminv1.WatchClusterRequest{Topics: r.topicNames()}) {
		return msg, err
	}
	return nil, fmt.Errorf("the watch ended without a message")
}

// viewDisagreements lists where the controller's views differ from the
// brokers' positions in obs (replicas obs could not read are skipped).
func viewDisagreements(obs observation, msg *adminv1.WatchClusterResponse) []string {
	views := map[history.TP]*adminv1.PartitionView{}
	for _, v := range msg.GetPartitions() {
		views[history.TP{Topic: v.GetTopic(), Partition: v.GetPartition()}] = v
	}
	var out []string
	for _, ps := range obs.partitions {
		v := views[ps.TP]
		if v == nil {
			out = append(out, fmt.Sprintf("%s: not in the controller's view", ps.TP))
			continue
		}
		shown := map[int32]*adminv1.ReplicaView{}
		for _, rv := range v.GetReplicaViews() {
			shown[rv.GetBrokerId()] = rv
		}
		for _, rs := range ps.Replicas {
			rv := shown[rs.Broker]
			switch {
			case !rs.Readable:
			case rv == nil:
				out = append(out, fmt.Sprintf("%s: replica %d not in the controller's view", ps.TP, rs.Broker))
			case !rv.GetReported():
				out = append(out, fmt.Sprintf("%s: replica %d unreported in the controller's view (its broker: LEO %d HW %d)",
					ps.TP, rs.Broker, rs.LEO, rs.HW))
			case rv.GetLogEndOffset() != rs.LEO || rv.GetHighWatermark() != rs.HW:
				out = append(out, fmt.Sprintf("%s: replica %d at LEO %d HW %d in the controller's view, LEO %d HW %d on its broker",
					ps.TP, rs.Broker, rv.GetLogEndOffset(), rv.GetHighWatermark(), rs.LEO, rs.HW))
			case rs.Broker == ps.Leader && (!v.GetHighWatermarkKnown() || v.GetHighWatermark() != rs.HW):
				out = append(out, fmt.Sprintf("%s: HW %d (known %v) in the controller's view, %d on the leader",
					ps.TP, v.GetHighWatermark(), v.GetHighWatermarkKnown(), rs.HW))
			}
		}
	}
	return out
}
