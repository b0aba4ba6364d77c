package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/controller/reassignplan"
	"tidemark.io/services/platform/kerr"
)

func newBrokersCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "brokers", Short: "Manage brokers: decommission one"}
	c.AddCommand(newDecommissionCmd(g))
	return c
}

// newDecommissionCmd moves every replica off a broker by reassignment.
func newDecommissionCmd(g *globals) *cobra.Command {
	var (
		id       int32
		throttle int64
		wait     bool
	)
	cmd := &cobra.Command{
		Use:   "decommission --broker N [--throttle BYTES_PER_SEC] [--wait]",
		Short: "Move every replica off a broker (live or gone for good), so it can be stopped and leave the cluster",
		Long: `Plans and starts a reassignment that replaces broker N in every replica list
holding it, by a broker in its rack where possible, the least loaded first.
The broker may be down for good: its replicas are rebuilt from the others.
With --wait the command follows the moves until the broker holds nothing,
then clears the throttles. Once it holds no replica, stop the broker: its
registration ends with its lease and it no longer appears in the cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("broker") || id < 0 {
				return usagef("--broker is required (a broker id)")
			}
			if throttle < 0 {
				return usagef("--throttle must be at least 1 byte/s, got %d", throttle)
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				return decommission(ctx, a, cmd.OutOrStdout(), id, throttle, wait)
			})
		},
	}
	f := cmd.Flags()
	f.Int32Var(&id, "broker", 0, "the broker to empty")
	f.Int64Var(&throttle, "throttle", 0, "replication rate limit in bytes/s for the moves")
	f.BoolVar(&wait, "wait", false, "follow the moves until the broker holds no replica (bounded by --command-timeout)")
	return cmd
}

func decommission(ctx context.Context, a *client.Admin, out io.Writer, id int32, throttle int64, wait bool) error {
	cur, err := currentAssignment(ctx, a, nil)
	if err != nil {
		return err
	}
	cl, err := a.DescribeCluster(ctx)
	if err != nil {
		return err
	}
	if !knownBroker(cl, cur, id) {
		return kerr.New(kerr.BrokerIDNotRegistered, "broker %d is not in the cluster", id)
	}
	var live []reassignplan.Broker
	for _, b := range cl.GetBrokers() {
		if b.GetAlive() && !b.GetShuttingDown() {
			live = append(live, reassignplan.Broker{ID: b.GetNode().GetId(), Rack: b.GetNode().GetRack()})
		}
	}
	plan, err := reassignplan.MoveOff(cur, live, id)
	if err != nil {
		return err
	}
	file := toFile(plan)
	if len(file.Partitions) > 0 {
		fmt.Fprintf(out, "Moving %d replicas off broker %d:\n%s\n", len(file.Partitions), id, jsonLine(file))
		if err := reassignExecute(ctx, a, out, file, throttle); err != nil {
			return err
		}
	}
	if !wait {
		if len(file.Partitions) == 0 {
			fmt.Fprintf(out, "Broker %d holds no replica.\n", id)
		}
		return nil
	}
	start := time.Now()
	left, moving := -1, -1 // not counted yet
	for {
		l, m, err := replicasLeft(ctx, a, id)
		if err != nil {
			if ctx.Err() != nil { // an interrupt or the timeout cut the call short
				return stillHolding(ctx, time.Since(start), id, left, moving)
			}
			return err
		}
		left, moving = l, m
		if moving == 0 && left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return stillHolding(ctx, time.Since(start), id, left, moving)
		case <-time.After(500 * time.Millisecond):
		}
	}
	if throttle > 0 && len(file.Partitions) > 0 {
		if err := clearThrottles(ctx, a, out, file); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "Broker %d holds no replica; it can be stopped.\n", id)
	return nil
}

// replicasLeft counts the replicas broker id still holds and the
// reassignments in progress.
func replicasLeft(ctx context.Context, a *client.Admin, id int32) (left, moving int, err error) {
	inProgress, err := a.ListPartitionReassignments(ctx, &adminv1.ListPartitionReassignmentsRequest{})
	if err != nil {
		return 0, 0, err
	}
	now, err := currentAssignment(ctx, a, nil)
	if err != nil {
		return 0, 0, err
	}
	for _, parts := range now {
		for _, reps := range parts {
			if slices.Contains(reps, id) {
				left++
			}
		}
	}
	return left, len(inProgress.GetReassignments()), nil
}

// stillHolding is why decommission --wait stopped following a broker that
// still holds replicas (left < 0: not counted yet). An interrupt (ctx,
// derived from the command's own context, canceled), while waiting or
// during a call, says so, as a perf run cut short does, rather than
// REQUEST_TIMED_OUT, which is for --command-timeout running out. Either
// way the moves started go on.
func stillHolding(ctx context.Context, waited time.Duration, id int32, left, moving int) error {
	holds := fmt.Sprintf("broker %d still holds %d replicas (%d moves in progress; they go on)", id, left, moving)
	if left < 0 {
		holds = fmt.Sprintf("broker %d: its replicas were not counted yet (the moves started go on)", id)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("interrupted after %v: %s", waited.Round(time.Millisecond), holds)
	}
	return kerr.New(kerr.RequestTimedOut, "%s", holds)
}

// knownBroker tells whether id is a registered broker or in some replica
// list (a broker gone for good): any other id is a typo, and "holds no
// replica" would read as a broker safe to stop.
func knownBroker(cl *adminv1.DescribeClusterResponse, cur map[string]map[int32][]int32, id int32) bool {
	for _, b := range cl.GetBrokers() {
		if b.GetNode().GetId() == id {
			return true
		}
	}
	for _, parts := range cur {
		for _, reps := range parts {
			if slices.Contains(reps, id) {
				return true
			}
		}
	}
	return false
}

// newTopicsAlterCmd is kafka-topics --alter --partitions.
func newTopicsAlterCmd(g *globals) *cobra.Command {
	var (
		topic      string
		partitions int32
	)
	cmd := &cobra.Command{
		Use:   "alter --topic T --partitions N",
		Short: "Add partitions to a topic (the count only grows; change the replication factor with tidemark reassign)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic == "" || partitions < 1 {
				return usagef("--topic and --partitions (at least 1) are required")
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.CreatePartitions(ctx, &adminv1.CreatePartitionsRequest{
					Topics: []*adminv1.CreatePartitionsTopic{{Name: topic, Count: partitions}}})
				if err != nil {
					return err
				}
				r := resp.GetResults()[0]
				if r.GetErrorCode() != 0 {
					return kerr.New(kerr.Code(r.GetErrorCode()), "%s", r.GetErrorMessage())
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Topic %s now has %d partitions; the new ones:\n", topic, partitions)
				for _, ra := range r.GetAssignments() {
					fmt.Fprintf(cmd.OutOrStdout(), "  partition %d: replicas %s\n", ra.GetPartition(), joinIDs(ra.GetReplicas()))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic")
	cmd.Flags().Int32Var(&partitions, "partitions", 0, "the new partition count, above the current one")
	return cmd
}
