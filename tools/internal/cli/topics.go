package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// adminWait is how long create and delete wait for the cluster to act
// (leaders to confirm, replicas to be removed) before answering.
const adminWait = 10 * time.Second

func newTopicsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "topics",
		Short: "Create, list, describe, delete and configure topics (kafka-topics, kafka-configs)",
	}
	c.AddCommand(newTopicsCreateCmd(g), newTopicsListCmd(g), newTopicsDescribeCmd(g),
		newTopicsDeleteCmd(g), newAlterConfigCmd(g), newDescribeConfigCmd(g), newTopicsAlterCmd(g))
	return c
}

// withAdmin runs fn with an admin client under --command-timeout.
func (g *globals) withAdmin(cmd *cobra.Command, fn func(ctx context.Context, a *client.Admin) error) error {
	ctx, cancel := g.opContext(cmd.Context())
	defer cancel()
	a, err := g.admin(ctx)
	if err != nil {
		return err
	}
	defer a.Close()
	return fn(ctx, a)
}

func newTopicsCreateCmd(g *globals) *cobra.Command {
	var (
		topic       string
		partitions  int32
		rf          int32
		assignment  string
		configs     []string
		ifNotExists bool
	)
	cmd := &cobra.Command{
		Use:   "create --topic T [--partitions N] [--replication-factor R | --replica-assignment 1:2:3,2:3:1] [--config k=v]...",
		Short: "Create a topic",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needTopic(topic); err != nil {
				return err
			}
			spec := &adminv1.TopicSpec{Name: topic, NumPartitions: partitions, ReplicationFactor: rf}
			// 0 asks for the cluster's default only when the flag is left out:
			// given, it is a mistake (kafka-topics refuses it too).
			if cmd.Flags().Changed("partitions") && partitions < 1 {
				return usagef("--partitions must be at least 1, got %d", partitions)
			}
			if cmd.Flags().Changed("replication-factor") && rf < 1 {
				return usagef("--replication-factor must be at least 1, got %d", rf)
			}
			if assignment != "" {
				if cmd.Flags().Changed("partitions") || cmd.Flags().Changed("replication-factor") {
					return usagef("--replica-assignment replaces --partitions and --replication-factor; give one or the other")
				}
				var err error
				if spec.Assignments, err = parseAssignment(assignment); err != nil {
					return err
				}
			}
			cfg, err := parseConfigs("--config", configs)
			if err != nil {
				return err
			}
			spec.Configs = cfg
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.CreateTopics(ctx, &adminv1.CreateTopicsRequest{
					Topics: []*adminv1.TopicSpec{spec}, TimeoutMs: int32(min(adminWait, g.commandTimeout).Milliseconds())})
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				for _, r := range resp.GetResults() {
					switch code := kerr.Code(r.GetErrorCode()); {
					case code == kerr.None:
						fmt.Fprintf(out, "Created topic %s.\n", r.GetName())
					case code == kerr.TopicAlreadyExists && ifNotExists:
					case code == kerr.RequestTimedOut:
						fmt.Fprintf(out, "Created topic %s.\n", r.GetName())
						fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: not every partition leader confirmed within %v\n", r.GetName(), adminWait)
					default:
						return client.ItemError(r.GetErrorCode(), r.GetErrorMessage(), "create topic %s", r.GetName())
					}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "name of the topic to create")
	f.Int32Var(&partitions, "partitions", 0, "number of partitions (default: the cluster's num.partitions)")
	f.Int32Var(&rf, "replication-factor", 0, "replicas per partition (default: the cluster's default.replication.factor)")
	f.StringVar(&assignment, "replica-assignment", "", "explicit replicas per partition, preferred leader first, e.g. 1:2:3,2:3:1")
	f.StringArrayVar(&configs, "config", nil, "topic config override key=value (repeatable), e.g. min.insync.replicas=2")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "succeed quietly when the topic already exists")
	return cmd
}

func newTopicsListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the topics, one per line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{})
				if err != nil {
					return err
				}
				var names []string
				for _, t := range resp.GetTopics() {
					names = append(names, t.GetName())
				}
				slices.Sort(names)
				for _, n := range names {
					fmt.Fprintln(cmd.OutOrStdout(), n)
				}
				return nil
			})
		},
	}
}

func newTopicsDeleteCmd(g *globals) *cobra.Command {
	var (
		topics   []string
		ifExists bool
	)
	cmd := &cobra.Command{
		Use:   "delete --topic T[,T2...]",
		Short: "Delete topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			names := splitList(topics)
			if len(names) == 0 {
				return usagef("--topic is required")
			}
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.DeleteTopics(ctx, &adminv1.DeleteTopicsRequest{Topics: names,
					TimeoutMs: int32(min(adminWait, g.commandTimeout).Milliseconds())})
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				for _, r := range resp.GetResults() {
					switch code := kerr.Code(r.GetErrorCode()); {
					case code == kerr.None:
						fmt.Fprintf(out, "Deleted topic %s.\n", r.GetName())
					case code == kerr.UnknownTopicOrPartition && ifExists:
					case code == kerr.RequestTimedOut:
						fmt.Fprintf(out, "Topic %s is marked for deletion.\n", r.GetName())
					default:
						return client.ItemError(r.GetErrorCode(), r.GetErrorMessage(), "delete topic %s", r.GetName())
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringSliceVar(&topics, "topic", nil, "topics to delete (comma-separated or repeated)")
	cmd.Flags().BoolVar(&ifExists, "if-exists", false, "succeed quietly when a topic does not exist")
	return cmd
}
