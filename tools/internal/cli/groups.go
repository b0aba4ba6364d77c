package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/client/assign"
	"tidemark.io/services/platform/kerr"
)

func newGroupsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "groups",
		Short: "List, describe, reset and delete consumer groups and their offsets (kafka-consumer-groups)",
	}
	c.AddCommand(newGroupsListCmd(g), newGroupsDescribeCmd(g), newGroupsResetCmd(g), newGroupsDeleteOffsetsCmd(g), newGroupsDeleteCmd(g))
	return c
}

// withClient runs fn with a broker client under --command-timeout.
func (g *globals) withClient(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	ctx, cancel := g.opContext(cmd.Context())
	defer cancel()
	c, err := g.client(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

func newGroupsListCmd(g *globals) *cobra.Command {
	var state bool
	cmd := &cobra.Command{
		Use:   "list [--state]",
		Short: "List the consumer groups, one per line (with --state: GROUP and STATE columns)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				groups, err := c.ListGroups(ctx)
				w := cmd.OutOrStdout()
				if state {
					tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
					fmt.Fprintln(tw, "GROUP\tSTATE")
					for _, gr := range groups {
						fmt.Fprintf(tw, "%s\t%s\n", gr.GetGroupId(), gr.GetGroupState())
					}
					_ = tw.Flush()
				} else {
					for _, gr := range groups {
						fmt.Fprintln(w, gr.GetGroupId())
					}
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&state, "state", false, "show each group's state")
	return cmd
}

func newGroupsDescribeCmd(g *globals) *cobra.Command {
	var members, state, verbose bool
	var named []string
	cmd := &cobra.Command{
		Use:   "describe (GROUP | --group GROUP) [--members [--verbose] | --state]",
		Short: "Describe a group: its partitions' offsets and lag (default), its members, or its state",
		Long: "Describe a consumer group as kafka-consumer-groups --describe does. The default view has a\n" +
			"row per partition: GROUP, TOPIC, PARTITION, CURRENT-OFFSET (committed), LOG-END-OFFSET\n" +
			"(the high watermark, what consumers can read), LAG (the difference), CONSUMER-ID, HOST and\n" +
			"CLIENT-ID of the member that owns it. --members has a row per member, --state one row with\n" +
			"the coordinator, the assignment strategy, the state and the member count.",
		RunE: func(cmd *cobra.Command, args []string) error {
			groups, err := groupsNamed(args, named)
			if err != nil {
				return err
			}
			if len(groups) != 1 {
				return usagef("describe takes one group, got %d: %s", len(groups), strings.Join(groups, ", "))
			}
			if members && state {
				return usagef("--members and --state exclude each other")
			}
			if verbose && !members {
				return usagef("--verbose goes with --members")
			}
			group := groups[0]
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				w := cmd.OutOrStdout()
				d, err := describeExisting(ctx, c, group)
				if err != nil {
					return err
				}
				if !members && !state {
					lag, err := c.GroupLag(ctx, group)
					if err != nil {
						return err
					}
					if len(d.GetMembers()) == 0 {
						fmt.Fprintf(w, "\nConsumer group '%s' has no active members.\n\n", group)
					}
					return writeGroupOffsets(w, group, lag)
				}
				if members {
					if len(d.GetMembers()) == 0 {
						fmt.Fprintf(w, "\nConsumer group '%s' has no active members.\n\n", group)
						return nil
					}
					return writeGroupMembers(w, d, verbose)
				}
				return writeGroupState(w, d)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&members, "members", false, "a row per member: CONSUMER-ID, HOST, CLIENT-ID, #PARTITIONS")
	f.StringArrayVar(&named, "group", nil, "the group to describe, as kafka-consumer-groups --describe --group takes it; or name it as the argument")
	f.BoolVar(&verbose, "verbose", false, "with --members: the instance id and the assignment too")
	f.BoolVar(&state, "state", false, "the group's coordinator, assignment strategy, state and member count")
	return cmd
}

// describeExisting describes group, GROUP_ID_NOT_FOUND when the coordinator
// knows neither members nor committed offsets of it (state Dead), as
// kafka-consumer-groups says, rather than an empty table that reads as a group.
func describeExisting(ctx context.Context, c *client.Client, group string) (*groupv1.DescribedGroup, error) {
	d, err := c.DescribeGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	if d.GetGroupState() == "Dead" {
		return nil, kerr.New(kerr.GroupIDNotFound, "Consumer group '%s' does not exist.", group)
	}
	return d, nil
}

// offsetText is an offset or lag, "-" when unknown (negative).
func offsetText(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

// writeGroupOffsets is kafka-consumer-groups --describe's offsets table.
func writeGroupOffsets(w io.Writer, group string, lag *groupv1.DescribeGroupLagResponse) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
	for _, p := range lag.GetPartitions() {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", group, p.GetTopic(), p.GetPartition(),
			offsetText(p.GetCommittedOffset()), offsetText(p.GetHighWatermark()), offsetText(p.GetLag()),
			orDash(p.GetMemberId()), orDash(p.GetClientHost()), orDash(p.GetClientId()))
	}
	return tw.Flush()
}

// memberAssignment decodes a member's assignment when the group speaks the
// consumer protocol.
func memberAssignment(d *groupv1.DescribedGroup, m *groupv1.DescribedGroupMember) []assign.TopicPartitions {
	if d.GetProtocolType() != assign.ProtocolType {
		return nil
	}
	a, err := assign.DecodeAssignment(m.GetMemberAssignment())
	if err != nil {
		return nil
	}
	return a.Partitions
}

func writeGroupMembers(w io.Writer, d *groupv1.DescribedGroup, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	if verbose {
		fmt.Fprintln(tw, "GROUP\tCONSUMER-ID\tGROUP-INSTANCE-ID\tHOST\tCLIENT-ID\t#PARTITIONS\tASSIGNMENT")
	} else {
		fmt.Fprintln(tw, "GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS")
	}
	for _, m := range d.GetMembers() {
		tps := memberAssignment(d, m)
		n := 0
		var parts []string
		for _, t := range tps {
			n += len(t.Partitions)
			var ps []string
			for _, p := range t.Partitions {
				ps = append(ps, strconv.Itoa(int(p)))
			}
			parts = append(parts, t.Topic+"("+strings.Join(ps, ",")+")")
		}
		if verbose {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", d.GetGroupId(), m.GetMemberId(), orDash(m.GetGroupInstanceId()),
				orDash(m.GetClientHost()), orDash(m.GetClientId()), n, orDash(strings.Join(parts, ",")))
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", d.GetGroupId(), m.GetMemberId(), orDash(m.GetClientHost()), orDash(m.GetClientId()), n)
		}
	}
	return tw.Flush()
}

func writeGroupState(w io.Writer, d *groupv1.DescribedGroup) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCOORDINATOR (ID)\tASSIGNMENT-STRATEGY\tSTATE\t#MEMBERS")
	co := "-"
	if n := d.GetCoordinator(); n != nil {
		co = fmt.Sprintf("%s (%d)", n.GetAddress(), n.GetId())
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", d.GetGroupId(), co, orDash(d.GetProtocolName()), d.GetGroupState(), len(d.GetMembers()))
	return tw.Flush()
}

func newGroupsResetCmd(g *globals) *cobra.Command {
	var (
		group                string
		topics               []string
		allTopics            bool
		toEarliest, toLatest bool
		toOffset             int64
		toDatetime           string
		shiftBy              int64
		dryRun, execute      bool
	)
	cmd := &cobra.Command{
		Use:   "reset-offsets --group G (--topic T[:P,P...] | --all-topics) (--to-earliest | --to-latest | --to-offset N | --to-datetime T | --shift-by N) [--dry-run | --execute]",
		Short: "Move a group's committed offsets (the group must have no members)",
		Long: "Move a group's committed offsets, as kafka-consumer-groups --reset-offsets does. It shows\n" +
			"the new offsets without changing anything (--dry-run, the default) unless --execute is given.\n" +
			"--to-datetime takes RFC 3339 (2026-12-01T10:00:00Z) or Kafka's YYYY-MM-DDTHH:mm:SS.sss.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if group == "" {
				return usagef("--group is required")
			}
			if dryRun && execute {
				return usagef("--dry-run and --execute exclude each other")
			}
			if allTopics == (len(topics) > 0) {
				return usagef("give --topic or --all-topics")
			}
			req := &groupv1.ResetGroupOffsetsRequest{GroupId: group, DryRun: !execute}
			fl := cmd.Flags()
			n := 0
			if toEarliest {
				req.Spec, n = groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_EARLIEST, n+1
			}
			if toLatest {
				req.Spec, n = groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_LATEST, n+1
			}
			if fl.Changed("to-offset") {
				if toOffset < 0 {
					return usagef("--to-offset must not be negative, got %d", toOffset)
				}
				req.Spec, req.Offset, n = groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_OFFSET, toOffset, n+1
			}
			if toDatetime != "" {
				t, err := parseDatetime(toDatetime)
				if err != nil {
					return err
				}
				req.Spec, req.TimestampMs, n = groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_TIMESTAMP, t.UnixMilli(), n+1
			}
			if fl.Changed("shift-by") {
				req.Spec, req.ShiftBy, n = groupv1.OffsetResetSpec_OFFSET_RESET_SPEC_SHIFT_BY, shiftBy, n+1
			}
			if n != 1 {
				return usagef("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by")
			}
			for _, t := range topics {
				rt, err := parseTopicPartitions(t)
				if err != nil {
					return err
				}
				req.Topics = append(req.Topics, rt)
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if err := g.checkResetTopics(ctx, c, req.GetTopics()); err != nil {
					return err
				}
				resp, err := c.ResetGroupOffsets(ctx, req)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
				fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
				failed := 0
				for _, p := range resp.GetPartitions() {
					if p.GetErrorCode() != 0 {
						failed++
						fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", group, p.GetTopic(), p.GetPartition(), kerr.Code(p.GetErrorCode()).String())
						continue
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", group, p.GetTopic(), p.GetPartition(), p.GetNewOffset())
				}
				_ = tw.Flush()
				if !execute {
					fmt.Fprintln(cmd.ErrOrStderr(), "Dry run: nothing was changed; add --execute to commit these offsets.")
				}
				if failed > 0 {
					return fmt.Errorf("%d partitions could not be reset", failed)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "the group")
	f.StringArrayVar(&topics, "topic", nil, "a topic, or topic:0,1,2 for some of its partitions (repeatable)")
	f.BoolVar(&allTopics, "all-topics", false, "every topic the group has committed offsets for")
	f.BoolVar(&toEarliest, "to-earliest", false, "to the log start offset")
	f.BoolVar(&toLatest, "to-latest", false, "to the high watermark")
	f.Int64Var(&toOffset, "to-offset", 0, "to this offset (clamped to the log)")
	f.StringVar(&toDatetime, "to-datetime", "", "to the first record at or after this time")
	f.Int64Var(&shiftBy, "shift-by", 0, "move the committed offset by this many (negative: back)")
	f.BoolVar(&dryRun, "dry-run", false, "show the new offsets only (the default)")
	f.BoolVar(&execute, "execute", false, "commit the new offsets")
	return cmd
}

// checkResetTopics makes sure each topic, and each partition named, exists:
// the client would retry UNKNOWN_TOPIC_OR_PARTITION until --command-timeout.
func (g *globals) checkResetTopics(ctx context.Context, c *client.Client, topics []*groupv1.ResetGroupOffsetsTopic) error {
	for _, t := range topics {
		highest := int32(-1)
		for _, p := range t.GetPartitions() {
			highest = max(highest, p)
		}
		if _, err := g.checkTopic(ctx, c, t.GetName(), highest); err != nil {
			return err
		}
	}
	return nil
}

// parseTopicPartitions reads topic or topic:0,1,2.
func parseTopicPartitions(s string) (*groupv1.ResetGroupOffsetsTopic, error) {
	name, list, has := strings.Cut(s, ":")
	if name == "" {
		return nil, usagef("--topic %q: no topic name", s)
	}
	out := &groupv1.ResetGroupOffsetsTopic{Name: name}
	if !has {
		return out, nil
	}
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 {
			return nil, usagef("--topic %q: %q is not a partition number", s, p)
		}
		out.Partitions = append(out.Partitions, int32(n))
	}
	return out, nil
}

// parseDatetime reads RFC 3339 or Kafka's --to-datetime format (UTC when
// it carries no zone).
func parseDatetime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("--to-datetime %q: want RFC 3339 (2026-12-01T10:00:00Z) or YYYY-MM-DDTHH:mm:SS.sss", s)
}

func newGroupsDeleteCmd(g *globals) *cobra.Command {
	var named []string
	cmd := &cobra.Command{
		Use:   "delete (GROUP... | --group GROUP...)",
		Short: "Delete groups that have no members, and their committed offsets",
		RunE: func(cmd *cobra.Command, args []string) error {
			groups, err := groupsNamed(args, named)
			if err != nil {
				return err
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				for _, group := range groups {
					if err := c.DeleteGroup(ctx, group); err != nil {
						return err
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Deletion of requested consumer groups ('%s') was successful.\n", strings.Join(groups, "', '"))
				return nil
			})
		},
	}
	cmd.Flags().StringArrayVar(&named, "group", nil, "a group to delete (repeatable), as kafka-consumer-groups --delete --group takes it; or name the groups as arguments")
	return cmd
}

// groupsNamed is the groups a command was given, as arguments or with
// --group (kafka-consumer-groups names them so), in that order; at least
// one, none empty.
func groupsNamed(args, flagged []string) ([]string, error) {
	groups := append(slices.Clone(args), flagged...)
	if len(groups) == 0 {
		return nil, usagef("name a group: as an argument or with --group")
	}
	if i := slices.Index(groups, ""); i >= 0 {
		return nil, usagef("group %d of %d is empty: a group id has at least one character", i+1, len(groups))
	}
	return groups, nil
}

func newGroupsDeleteOffsetsCmd(g *globals) *cobra.Command {
	var (
		group  string
		topics []string
	)
	cmd := &cobra.Command{
		Use:   "delete-offsets --group G --topic T[:P,P...]...",
		Short: "Delete a group's committed offsets (any while it has no members; else only of topics no member subscribes to)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if group == "" {
				return usagef("--group is required")
			}
			if len(topics) == 0 {
				return usagef("give at least one --topic")
			}
			var named []*groupv1.ResetGroupOffsetsTopic
			for _, t := range topics {
				rt, err := parseTopicPartitions(t)
				if err != nil {
					return err
				}
				named = append(named, rt)
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				var tps []client.TopicPartition
				for _, t := range named {
					parts := t.GetPartitions()
					if len(parts) == 0 { // every partition of the topic
						md, err := c.Metadata(ctx, t.GetName())
						if err != nil {
							return err
						}
						for _, mt := range md.GetTopics() {
							if code := kerr.Code(mt.GetErrorCode()); code != kerr.None {
								return kerr.New(code, "topic %s", mt.GetName())
							}
							for _, p := range mt.GetPartitions() {
								parts = append(parts, p.GetPartition())
							}
						}
					}
					for _, p := range parts {
						tps = append(tps, client.TopicPartition{Topic: t.GetName(), Partition: p})
					}
				}
				if err := c.DeleteGroupOffsets(ctx, group, tps...); err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
				fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATUS")
				for _, tp := range tps {
					fmt.Fprintf(tw, "%s\t%d\tSuccessful\n", tp.Topic, tp.Partition)
				}
				return tw.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "the group")
	f.StringArrayVar(&topics, "topic", nil, "a topic, or topic:0,1,2 for some of its partitions (repeatable)")
	return cmd
}
