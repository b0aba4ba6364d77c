package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/controller/reassignplan"
	"tidemark.io/services/platform/kerr"
)

// The throttle settings --execute --throttle sets and --verify clears, as
// kafka-reassign-partitions does.
const (
	leaderRate     = "leader.replication.throttled.rate"
	followerRate   = "follower.replication.throttled.rate"
	leaderReplicas = "leader.replication.throttled.replicas"
	followReplicas = "follower.replication.throttled.replicas"
)

// reassignmentFile is kafka-reassign-partitions' JSON format.
type reassignmentFile struct {
	Version    int                `json:"version"`
	Partitions []reassignmentItem `json:"partitions"`
}

type reassignmentItem struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// topicsToMoveFile is --topics-to-move-json-file's format.
type topicsToMoveFile struct {
	Version int `json:"version"`
	Topics  []struct {
		Topic string `json:"topic"`
	} `json:"topics"`
}

type reassignOpts struct {
	generate, execute, verify, cancel, list bool
	topicsFile, planFile, brokerList        string
	throttle                                int64
	disableRackAware, preserveThrottles     bool
}

// newReassignCmd is kafka-reassign-partitions.
func newReassignCmd(g *globals) *cobra.Command {
	var o reassignOpts
	cmd := &cobra.Command{
		Use:   "reassign (--generate | --execute | --verify | --cancel | --list) [flags]",
		Short: "Move partition replicas between brokers (kafka-reassign-partitions)",
		Long: `Moves partition replicas between brokers while they serve (KIP-455).

  --generate --topics-to-move-json-file F --broker-list 2,3,4
      prints the current assignment and a balanced, rack-aware proposal
  --execute --reassignment-json-file F [--throttle BYTES_PER_SEC]
      starts the moves; with --throttle, replication of the moving replicas
      is limited to that rate (leader and follower side)
  --verify --reassignment-json-file F
      reports each move; once all are done, removes the throttles
  --cancel --reassignment-json-file F
      reverts the moves still in progress to their original replicas
  --list
      shows the moves in progress and the bytes each new replica has left

The files use Kafka's format: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,4]}]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, b := range []bool{o.generate, o.execute, o.verify, o.cancel, o.list} {
				if b {
					n++
				}
			}
			if n != 1 {
				return usagef("give exactly one of --generate, --execute, --verify, --cancel, --list")
			}
			if o.throttle != 0 && (!o.execute || o.throttle < 1) {
				return usagef("--throttle goes with --execute and must be at least 1 byte/s, got %d", o.throttle)
			}
			// The files and the broker list are read before dialling: their
			// mistakes are usage errors whether or not the cluster answers.
			var (
				plan   reassignmentFile
				topics []string
				ids    []int32
				err    error
			)
			switch {
			case o.generate:
				topics, ids, err = generateInput(o)
			case o.execute || o.verify || o.cancel:
				plan, err = readPlan(o.planFile)
			}
			if err != nil {
				return err
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				out := cmd.OutOrStdout()
				switch {
				case o.generate:
					return reassignGenerate(ctx, a, out, o, topics, ids)
				case o.list:
					return reassignList(ctx, a, out)
				case o.execute:
					return reassignExecute(ctx, a, out, plan, o.throttle)
				case o.verify:
					return reassignVerify(ctx, a, out, plan, o.preserveThrottles)
				default:
					return reassignCancel(ctx, a, out, plan, o.preserveThrottles)
				}
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.generate, "generate", false, "propose an assignment of the topics in --topics-to-move-json-file over --broker-list")
	f.BoolVar(&o.execute, "execute", false, "start the moves in --reassignment-json-file")
	f.BoolVar(&o.verify, "verify", false, "report the moves in --reassignment-json-file; clear the throttles once all are done")
	f.BoolVar(&o.cancel, "cancel", false, "cancel the moves in --reassignment-json-file still in progress")
	f.BoolVar(&o.list, "list", false, "list the moves in progress with the bytes each new replica has left")
	f.StringVar(&o.topicsFile, "topics-to-move-json-file", "", `{"version":1,"topics":[{"topic":"t"}]}`)
	f.StringVar(&o.brokerList, "broker-list", "", "brokers to place the topics on, e.g. 2,3,4")
	f.StringVar(&o.planFile, "reassignment-json-file", "", "the target assignment, in Kafka's format")
	f.Int64Var(&o.throttle, "throttle", 0, "replication rate limit in bytes/s for the moving replicas (with --execute)")
	f.BoolVar(&o.disableRackAware, "disable-rack-aware", false, "ignore racks in --generate")
	f.BoolVar(&o.preserveThrottles, "preserve-throttles", false, "leave the throttles in place (with --verify or --cancel)")
	return cmd
}

func readPlan(path string) (reassignmentFile, error) {
	var plan reassignmentFile
	if path == "" {
		return plan, usagef("--reassignment-json-file is required")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return plan, usagef("--reassignment-json-file: %v", err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil {
		return plan, usagef("--reassignment-json-file %s: %v", path, err)
	}
	if len(plan.Partitions) == 0 {
		return plan, usagef("--reassignment-json-file %s lists no partitions", path)
	}
	seen := map[string]bool{}
	for _, p := range plan.Partitions {
		key := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		if p.Topic == "" || seen[key] {
			return plan, usagef("--reassignment-json-file %s: partition %q is empty or listed twice", path, key)
		}
		seen[key] = true
	}
	return plan, nil
}

// currentAssignment reads the replicas of every partition of topics (all
// when empty); during a move the replicas given are the target's.
func currentAssignment(ctx context.Context, a *client.Admin, topics []string) (map[string]map[int32][]int32, error) {
	resp, err := a.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{Topics: topics})
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32][]int32{}
	for _, t := range resp.GetTopics() {
		if t.GetErrorCode() != 0 {
			return nil, kerr.New(kerr.Code(t.GetErrorCode()), "topic %s: %s", t.GetName(), t.GetErrorMessage())
		}
		out[t.GetName()] = map[int32][]int32{}
		for _, p := range t.GetPartitions() {
			var target []int32
			for _, id := range p.GetReplicas() {
				if !slices.Contains(p.GetRemovingReplicas(), id) {
					target = append(target, id)
				}
			}
			out[t.GetName()][p.GetPartition()] = target
		}
	}
	return out, nil
}

func toFile(asg map[string]map[int32][]int32) reassignmentFile {
	f := reassignmentFile{Version: 1, Partitions: []reassignmentItem{}}
	for _, t := range slices.Sorted(maps.Keys(asg)) {
		for _, p := range slices.Sorted(maps.Keys(asg[t])) {
			f.Partitions = append(f.Partitions, reassignmentItem{Topic: t, Partition: p, Replicas: asg[t][p]})
		}
	}
	return f
}

func jsonLine(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// generateInput reads --generate's topics file and broker list, before
// the cluster is asked anything.
func generateInput(o reassignOpts) (topics []string, ids []int32, err error) {
	if o.topicsFile == "" || o.brokerList == "" {
		return nil, nil, usagef("--generate needs --topics-to-move-json-file and --broker-list")
	}
	raw, err := os.ReadFile(o.topicsFile)
	if err != nil {
		return nil, nil, usagef("--topics-to-move-json-file: %v", err)
	}
	var tf topicsToMoveFile
	if err := json.Unmarshal(raw, &tf); err != nil || len(tf.Topics) == 0 {
		return nil, nil, usagef("--topics-to-move-json-file %s: want {\"version\":1,\"topics\":[{\"topic\":\"t\"}]} (%v)", o.topicsFile, err)
	}
	for _, s := range strings.Split(o.brokerList, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || id < 0 || slices.Contains(ids, int32(id)) {
			return nil, nil, usagef("--broker-list: %q is not a list of distinct broker ids", o.brokerList)
		}
		ids = append(ids, int32(id))
	}
	for _, t := range tf.Topics {
		topics = append(topics, t.Topic)
	}
	return topics, ids, nil
}

func reassignGenerate(ctx context.Context, a *client.Admin, out io.Writer, o reassignOpts, topics []string, ids []int32) error {
	cur, err := currentAssignment(ctx, a, topics)
	if err != nil {
		return err
	}
	cl, err := a.DescribeCluster(ctx)
	if err != nil {
		return err
	}
	racks := map[int32]string{}
	for _, b := range cl.GetBrokers() {
		racks[b.GetNode().GetId()] = b.GetNode().GetRack()
	}
	var brokers []reassignplan.Broker
	for _, id := range slices.Sorted(slices.Values(ids)) {
		rack, ok := racks[id]
		if !ok {
			return usagef("--broker-list: broker %d is not in the cluster", id)
		}
		brokers = append(brokers, reassignplan.Broker{ID: id, Rack: rack})
	}
	plan, err := reassignplan.Generate(cur, brokers, !o.disableRackAware, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Current partition replica assignment\n%s\n\nProposed partition reassignment configuration\n%s\n",
		jsonLine(toFile(cur)), jsonLine(toFile(plan)))
	return nil
}

func reassignExecute(ctx context.Context, a *client.Admin, out io.Writer, plan reassignmentFile, throttle int64) error {
	topics := map[string]bool{}
	for _, p := range plan.Partitions {
		topics[p.Topic] = true
	}
	cur, err := currentAssignment(ctx, a, slices.Sorted(maps.Keys(topics)))
	if err != nil {
		return err
	}
	rollback := map[string]map[int32][]int32{}
	for _, p := range plan.Partitions {
		reps, ok := cur[p.Topic][p.Partition]
		if !ok {
			return kerr.New(kerr.UnknownTopicOrPartition, "partition %s-%d does not exist", p.Topic, p.Partition)
		}
		if rollback[p.Topic] == nil {
			rollback[p.Topic] = map[int32][]int32{}
		}
		rollback[p.Topic][p.Partition] = reps
	}
	fmt.Fprintf(out, "Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file option during rollback\n",
		jsonLine(toFile(rollback)))
	if throttle > 0 {
		if err := setThrottles(ctx, a, out, plan, rollback, throttle); err != nil {
			return err
		}
	}
	return alterReassignments(ctx, a, out, plan, false)
}

// setThrottles is --throttle: the leader side on every current replica of
// a moving partition, the follower side on each replica it adds, and the
// rate on every broker involved.
func setThrottles(ctx context.Context, a *client.Admin, out io.Writer, plan reassignmentFile, cur map[string]map[int32][]int32, rate int64) error {
	leaders, followers := map[string][]string{}, map[string][]string{}
	brokers := map[int32]bool{}
	for _, p := range plan.Partitions {
		old := cur[p.Topic][p.Partition]
		for _, id := range old {
			leaders[p.Topic] = append(leaders[p.Topic], fmt.Sprintf("%d:%d", p.Partition, id))
			brokers[id] = true
		}
		for _, id := range p.Replicas {
			brokers[id] = true
			if !slices.Contains(old, id) {
				followers[p.Topic] = append(followers[p.Topic], fmt.Sprintf("%d:%d", p.Partition, id))
			}
		}
	}
	var res []*adminv1.AlterConfigsResource
	for _, t := range slices.Sorted(maps.Keys(leaders)) {
		ops := []*adminv1.ConfigOp{{Name: leaderReplicas, Value: strings.Join(leaders[t], ","), Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}
		if len(followers[t]) > 0 {
			ops = append(ops, &adminv1.ConfigOp{Name: followReplicas, Value: strings.Join(followers[t], ","), Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET})
		}
		res = append(res, &adminv1.AlterConfigsResource{Resource: topicResource(t), Ops: ops})
	}
	for _, id := range slices.Sorted(maps.Keys(brokers)) {
		v := strconv.FormatInt(rate, 10)
		res = append(res, &adminv1.AlterConfigsResource{Resource: brokerResource(id), Ops: []*adminv1.ConfigOp{
			{Name: leaderRate, Value: v, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET},
			{Name: followerRate, Value: v, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET}}})
	}
	if err := alterConfigs(ctx, a, res); err != nil {
		return err
	}
	fmt.Fprintf(out, "The inter-broker throttle limit was set to %d B/s on brokers %s\n", rate, joinIDs(slices.Sorted(maps.Keys(brokers))))
	return nil
}

// clearThrottles removes what setThrottles set, for the plan's topics and
// every broker of the cluster.
func clearThrottles(ctx context.Context, a *client.Admin, out io.Writer, plan reassignmentFile) error {
	topics := map[string]bool{}
	for _, p := range plan.Partitions {
		topics[p.Topic] = true
	}
	cl, err := a.DescribeCluster(ctx)
	if err != nil {
		return err
	}
	var res []*adminv1.AlterConfigsResource
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		res = append(res, &adminv1.AlterConfigsResource{Resource: topicResource(t), Ops: []*adminv1.ConfigOp{
			{Name: leaderReplicas, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE},
			{Name: followReplicas, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE}}})
	}
	var ids []int32
	for _, b := range cl.GetBrokers() {
		if b.GetAlive() {
			ids = append(ids, b.GetNode().GetId())
			res = append(res, &adminv1.AlterConfigsResource{Resource: brokerResource(b.GetNode().GetId()), Ops: []*adminv1.ConfigOp{
				{Name: leaderRate, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE},
				{Name: followerRate, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE}}})
		}
	}
	if err := alterConfigs(ctx, a, res); err != nil {
		return err
	}
	fmt.Fprintf(out, "Clearing broker-level throttles on brokers %s\nClearing topic-level throttles on topics %s\n",
		joinIDs(ids), strings.Join(slices.Sorted(maps.Keys(topics)), ","))
	return nil
}

func topicResource(t string) *adminv1.ConfigResource {
	return &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: t}
}

func brokerResource(id int32) *adminv1.ConfigResource {
	return &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: strconv.Itoa(int(id))}
}

func alterConfigs(ctx context.Context, a *client.Admin, res []*adminv1.AlterConfigsResource) error {
	resp, err := a.AlterConfigs(ctx, &adminv1.AlterConfigsRequest{Resources: res})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range resp.GetResults() {
		if r.GetErrorCode() != 0 {
			errs = append(errs, kerr.New(kerr.Code(r.GetErrorCode()), "%s %s: %s", r.GetResource().GetType(), r.GetResource().GetName(), r.GetErrorMessage()))
		}
	}
	return errors.Join(errs...)
}

// alterReassignments sends the plan (cancel: empty targets) and reports
// each partition.
func alterReassignments(ctx context.Context, a *client.Admin, out io.Writer, plan reassignmentFile, cancel bool) error {
	req := &adminv1.AlterPartitionReassignmentsRequest{}
	for _, p := range plan.Partitions {
		it := &adminv1.ReassignablePartition{Topic: p.Topic, Partition: p.Partition}
		if !cancel {
			it.Replicas = p.Replicas
		}
		req.Partitions = append(req.Partitions, it)
	}
	resp, err := a.AlterPartitionReassignments(ctx, req)
	if err != nil {
		return err
	}
	var ok []string
	var errs []error
	for _, r := range resp.GetResults() {
		name := fmt.Sprintf("%s-%d", r.GetTopic(), r.GetPartition())
		if r.GetErrorCode() != commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
			errs = append(errs, kerr.New(kerr.Code(r.GetErrorCode()), "%s: %s", name, r.GetErrorMessage()))
			continue
		}
		ok = append(ok, name)
	}
	what := "started"
	if cancel {
		what = "cancelled"
	}
	if len(ok) > 0 {
		fmt.Fprintf(out, "Successfully %s partition reassignments for %s\n", what, strings.Join(ok, ","))
	}
	return errors.Join(errs...)
}

func reassignVerify(ctx context.Context, a *client.Admin, out io.Writer, plan reassignmentFile, preserve bool) error {
	moving, err := a.ListPartitionReassignments(ctx, &adminv1.ListPartitionReassignmentsRequest{})
	if err != nil {
		return err
	}
	inFlight := map[string]bool{}
	for _, r := range moving.GetReassignments() {
		inFlight[fmt.Sprintf("%s-%d", r.GetTopic(), r.GetPartition())] = true
	}
	topics := map[string]bool{}
	for _, p := range plan.Partitions {
		topics[p.Topic] = true
	}
	cur, err := currentAssignment(ctx, a, slices.Sorted(maps.Keys(topics)))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "Status of partition reassignment:")
	done, mismatched := true, 0
	for _, p := range plan.Partitions {
		name := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		switch reps := cur[p.Topic][p.Partition]; {
		case inFlight[name]:
			done = false
			fmt.Fprintf(out, "Reassignment of partition %s is still in progress.\n", name)
		case slices.Equal(reps, p.Replicas):
			fmt.Fprintf(out, "Reassignment of partition %s is completed.\n", name)
		default:
			mismatched++
			fmt.Fprintf(out, "There is no active reassignment of partition %s, but replica set is %v rather than %v.\n", name, reps, p.Replicas)
		}
	}
	if done && !preserve {
		if err := clearThrottles(ctx, a, out, plan); err != nil {
			return err
		}
	}
	if mismatched > 0 {
		return fmt.Errorf("%d partitions are not on their target replicas", mismatched)
	}
	return nil
}

func reassignCancel(ctx context.Context, a *client.Admin, out io.Writer, plan reassignmentFile, preserve bool) error {
	if err := alterReassignments(ctx, a, out, plan, true); err != nil {
		return err
	}
	if !preserve {
		return clearThrottles(ctx, a, out, plan)
	}
	return nil
}

func reassignList(ctx context.Context, a *client.Admin, out io.Writer) error {
	resp, err := a.ListPartitionReassignments(ctx, &adminv1.ListPartitionReassignmentsRequest{})
	if err != nil {
		return err
	}
	if len(resp.GetReassignments()) == 0 {
		fmt.Fprintln(out, "No partition reassignments found.")
		return nil
	}
	fmt.Fprintln(out, "Current partition reassignments:")
	for _, r := range resp.GetReassignments() {
		fmt.Fprintf(out, "%s-%d: replicas: %s. adding: %s. removing: %s. leader: %d. isr: %s.\n", r.GetTopic(), r.GetPartition(),
			joinIDs(r.GetReplicas()), joinIDs(r.GetAddingReplicas()), joinIDs(r.GetRemovingReplicas()), r.GetLeader(), joinIDs(r.GetIsr()))
		for _, m := range r.GetProgress() {
			left := "unknown"
			if m.GetBytesLeft() >= 0 {
				left = strconv.FormatInt(m.GetBytesLeft(), 10)
			}
			fmt.Fprintf(out, "  broker %d: %d of %d bytes, offset %d of %d, %s bytes left, in ISR: %t\n", m.GetBrokerId(),
				m.GetSizeBytes(), m.GetLeaderSizeBytes(), m.GetLogEndOffset(), m.GetLeaderLogEndOffset(), left, m.GetInIsr())
		}
	}
	return nil
}
