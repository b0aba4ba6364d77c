package kafkascripts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupsActions are kafka-consumer-groups.sh's actions, exactly one a run.
var groupsActions = []string{"list", "describe", "delete", "reset-offsets", "delete-offsets"}

// resetScenarios are --reset-offsets' ways to pick the new offsets, at
// most one a run.
var resetScenarios = []string{"to-offset", "shift-by", "to-datetime", "by-duration", "to-earliest", "to-latest", "to-current", "from-file"}

// groupStates are Kafka's ConsumerGroupState names (Unknown aside), in
// its order, for --list --state.
var groupStates = []string{"PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling"}

// missing is Kafka's MISSING_COLUMN_VALUE.
const missing = "-"

// groupsRun is what kafka-consumer-groups.sh's flags ask for.
type groupsRun struct {
	fs                       *pflag.FlagSet
	bootstrap, commandConfig string
	groups, topics           []string
	state                    string
	timeoutMs                int64
	toOffset, shiftBy        int64
	toDatetime, byDuration   string
	fromFile                 string
}

func groupsFlags(r *groupsRun) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-consumer-groups.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	var b bool
	fs.StringVar(&r.bootstrap, "bootstrap-server", "", "REQUIRED: the server(s) to connect to (host:port, several comma-separated)")
	fs.StringVar(&r.commandConfig, "command-config", "", "a properties file of client settings (security.protocol=SSL and PEM ssl.truststore.*/ssl.keystore.*)")
	fs.StringArrayVar(&r.groups, "group", nil, "the consumer group to act on (repeatable)")
	fs.StringArrayVar(&r.topics, "topic", nil, "with --reset-offsets or --delete-offsets, a topic to include, topic:0,1,2 for some of its partitions (repeatable)")
	fs.BoolVar(&b, "all-topics", false, "with --reset-offsets, every topic the group has offsets for")
	fs.BoolVar(&b, "list", false, "list all consumer groups")
	fs.BoolVar(&b, "describe", false, "describe the groups and their offset lag")
	fs.BoolVar(&b, "all-groups", false, "apply to all consumer groups")
	fs.BoolVar(&b, "delete", false, "delete the groups, offsets and all")
	fs.Int64Var(&r.timeoutMs, "timeout", 5000, "accepted for Kafka's scripts; each call is bounded by the script's own timeout")
	fs.BoolVar(&b, "reset-offsets", false, "reset the offsets of inactive groups: --dry-run (the default) or --execute, one scenario, a scope (--all-topics or --topic) unless --from-file")
	fs.BoolVar(&b, "delete-offsets", false, "delete the offsets of one group for the --topic topics")
	fs.BoolVar(&b, "dry-run", false, "only show the new offsets (reset-offsets)")
	fs.BoolVar(&b, "execute", false, "commit the new offsets (reset-offsets)")
	fs.BoolVar(&b, "export", false, "print the new offsets as CSV (reset-offsets)")
	fs.Int64Var(&r.toOffset, "to-offset", 0, "reset to this offset")
	fs.StringVar(&r.fromFile, "from-file", "", "reset to the offsets of a CSV file (topic,partition,offset or group,topic,partition,offset lines)")
	fs.StringVar(&r.toDatetime, "to-datetime", "", "reset to the first offset at or after this time: YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone (Z, +hh:mm)")
	fs.StringVar(&r.byDuration, "by-duration", "", "reset to the first offset at or after this long ago: PnDTnHnMnS")
	fs.BoolVar(&b, "to-earliest", false, "reset to the earliest offset")
	fs.BoolVar(&b, "to-latest", false, "reset to the latest offset")
	fs.BoolVar(&b, "to-current", false, "reset to the committed offset (the latest where none)")
	fs.Int64Var(&r.shiftBy, "shift-by", 0, "reset to the committed offset plus n (n may be negative)")
	fs.BoolVar(&b, "members", false, "with --describe, the groups' members")
	fs.BoolVar(&b, "verbose", false, "with --describe --members, each member's partitions")
	fs.BoolVar(&b, "offsets", false, "with --describe, the offsets and lag (the default)")
	fs.StringVar(&r.state, "state", "", "with --describe, the groups' state; with --list, each group's state, only those of the comma-separated states given")
	fs.BoolP("help", "h", false, "print usage information")
	return fs
}

// noStateValue stands for --state given without a value.
const noStateValue = "\x00"

func groupsUsage() string {
	var r groupsRun
	return "Option (one action: --list, --describe, --delete, --reset-offsets or --delete-offsets):\n" + groupsFlags(&r).FlagUsages()
}

// ConsumerGroups is kafka-consumer-groups.sh (Kafka 3.7's
// ConsumerGroupCommand): --list, --describe (offsets, --members, --state),
// --reset-offsets, --delete and --delete-offsets over the Kafka protocol,
// with Kafka's flags, tables, messages and exit codes. As in Kafka, a
// failure once connected is printed ("Error: ...") and exits 0; a bad
// command line exits 1.
func ConsumerGroups(args []string, stdout, stderr io.Writer) int {
	r, err := parseGroupsFlags(args, stderr)
	var usage usageError
	if code, done := parseOutcome(err, "This tool helps to list all consumer groups, describe a consumer group, delete consumer group info, or reset consumer group offsets.", groupsUsage, stdout, stderr, nil); done {
		return code
	}
	err = r.run(stdout, stderr)
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, usage.msg)
		fmt.Fprint(stderr, groupsUsage())
		return 1
	case err != nil:
		printGroupsError(stdout, "Executing consumer group command failed due to "+err.Error())
	}
	return 0
}

// printGroupsError is ConsumerGroupCommand.printError: on stdout, after a
// blank line.
func printGroupsError(stdout io.Writer, msg string) {
	fmt.Fprintf(stdout, "\nError: %s\n", msg)
}

// optionalStateArg lets --state take the next argument as its value when
// that is not an option, as jopt-simple's optional arguments do, and
// stand alone otherwise.
func optionalStateArg(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == "--state" {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				out = append(out, "--state="+args[i+1])
				i++
			} else {
				out = append(out, "--state="+noStateValue)
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// badNumber is pflag's complaint about a numeric option's value.
var badNumber = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?--([\w-]+)" flag`)

// parseGroupsFlags checks the flags in the order Kafka's tool does.
func parseGroupsFlags(args []string, stderr io.Writer) (*groupsRun, error) {
	if len(args) == 0 {
		return nil, usageError{"This tool helps to list all consumer groups, describe a consumer group, delete consumer group info, or reset consumer group offsets."}
	}
	r := &groupsRun{}
	fs := groupsFlags(r)
	r.fs = fs
	if err := parseKafkaFlags(fs, optionalStateArg(args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		// jopt-simple's words for a value that is not a number.
		if m := badNumber.FindStringSubmatch(err.Error()); m != nil {
			return nil, usageError{fmt.Sprintf("Cannot parse argument '%s' of option %s", m[1], m[2])}
		}
		return nil, usageError{err.Error()}
	}
	if h, _ := fs.GetBool("help"); h {
		return nil, pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("Found non-option arguments: %s", strings.Join(fs.Args(), " "))
	}
	// jopt-simple's availableIf.
	for _, o := range []string{"members", "verbose", "offsets"} {
		if fs.Changed(o) && !fs.Changed("describe") {
			return nil, usageError{fmt.Sprintf("Option(s) [%s] are unavailable given other options on the command line", o)}
		}
	}
	if fs.Changed("state") && !fs.Changed("describe") && !fs.Changed("list") {
		return nil, usageError{"Option(s) [state] are unavailable given other options on the command line"}
	}
	if err := requireOption(fs, "bootstrap-server"); err != nil {
		return nil, err
	}
	scope := fs.Changed("group") || fs.Changed("all-groups")
	if fs.Changed("describe") {
		if !scope {
			return nil, usageError{"Option [describe] takes one of these options: [group], [all-groups]"}
		}
		n := 0
		for _, o := range []string{"members", "offsets", "state"} {
			if fs.Changed(o) {
				n++
			}
		}
		if n > 1 {
			return nil, usageError{"Option [describe] takes at most one of these options: [members], [offsets], [state]"}
		}
		if fs.Changed("state") && r.state != noStateValue {
			return nil, usageError{"Option [describe] does not take a value for [state]"}
		}
	}
	if fs.Changed("delete") {
		if !scope {
			return nil, usageError{"Option [delete] takes one of these options: [group], [all-groups]"}
		}
		if fs.Changed("topic") {
			return nil, usageError{"The consumer does not support topic-specific offset deletion from a consumer group."}
		}
	}
	if fs.Changed("delete-offsets") && (!fs.Changed("group") || !fs.Changed("topic")) {
		return nil, usageError{"Option [delete-offsets] takes the following options: [group], [topic]"}
	}
	if fs.Changed("reset-offsets") {
		if fs.Changed("dry-run") && fs.Changed("execute") {
			return nil, usageError{"Option [reset-offsets] only accepts one of [execute] and [dry-run]"}
		}
		if !fs.Changed("dry-run") && !fs.Changed("execute") {
			fmt.Fprintln(stderr, "WARN: No action will be performed as the --execute option is missing."+
				"In a future major release, the default behavior of this command will be to prompt the user before "+
				"executing the reset rather than doing a dry run. You should add the --dry-run option explicitly "+
				"if you are scripting this command and want to keep the current default behavior without prompting.")
		}
		if !scope {
			return nil, usageError{"Option [reset-offsets] takes one of these options: [group], [all-groups]"}
		}
		for _, s := range resetScenarios {
			others := slices.DeleteFunc(slices.Clone(resetScenarios), func(o string) bool { return o == s })
			if err := refuseWith(fs, s, others...); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range [][]string{
		{"group", "all-groups"},
		{"group", "list"},
		{"topic", "list", "describe"},
	} {
		if err := refuseWith(fs, c[0], c[1:]...); err != nil {
			return nil, err
		}
	}
	actions := 0
	for _, a := range groupsActions {
		if fs.Changed(a) {
			actions++
		}
	}
	if actions != 1 {
		return nil, usageError{"Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"}
	}
	if fs.Changed("reset-offsets") {
		n := 0
		for _, s := range resetScenarios {
			if fs.Changed(s) {
				n++
			}
		}
		if n == 0 {
			return nil, usageError{"Option '[reset-offsets]' requires one of the following scenarios: [to-offset], [shift-by], [to-datetime], [by-duration], [to-earliest], [to-latest], [to-current], [from-file]"}
		}
		if !fs.Changed("all-topics") && !fs.Changed("topic") && !fs.Changed("from-file") {
			return nil, usageError{"One of the reset scopes should be defined: --all-topics, --topic."}
		}
	}
	return r, nil
}

// groupsClient is a Kafka client whose group requests go to each group's
// coordinator and whose ListOffsets go to the partitions' leaders, as
// Kafka's admin client sends them: unlike the other scripts' requests, a
// group's can be answered by its coordinator only.
type groupsClient struct {
	cl *kgo.Client
	// timeout bounds each call, as --timeout bounds each of Kafka's
	// admin calls.
	timeout   time.Duration
	bootstrap string
}

// do sends req, giving up after c.timeout as Kafka's admin client does.
func (c *groupsClient) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.cl.Request(ctx, req)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("org.apache.kafka.common.errors.TimeoutException: %s got no answer from %s within %d ms: %v",
			kmsg.NameForKey(req.Key()), c.bootstrap, c.timeout.Milliseconds(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s (bootstrap server %s): %w", kmsg.NameForKey(req.Key()), c.bootstrap, err)
	}
	return resp, nil
}

func (r *groupsRun) run(stdout, stderr io.Writer) error {
	if r.timeoutMs <= 0 {
		return usageError{fmt.Sprintf("Invalid value %d for option timeout: it must be positive", r.timeoutMs)}
	}
	opts, err := commandConfig(r.commandConfig)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(splitBootstrap(r.bootstrap)...)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	c := &groupsClient{cl: cl, timeout: time.Duration(r.timeoutMs) * time.Millisecond, bootstrap: r.bootstrap}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	switch {
	case r.fs.Changed("list"):
		return r.list(ctx, c, stdout)
	case r.fs.Changed("describe"):
		return r.describe(ctx, c, stdout, stderr)
	case r.fs.Changed("delete"):
		return r.deleteGroups(ctx, c, stdout)
	case r.fs.Changed("reset-offsets"):
		return r.resetOffsets(ctx, c, stdout, stderr)
	default:
		return r.deleteOffsets(ctx, c, stdout)
	}
}

// javaError is an error as Kafka's admin client's exception prints it
// (ExecutionException wrapping the code's exception class).
func javaError(code int16, message *string) string {
	return "java.util.concurrent.ExecutionException: " + groupException(code, message)
}

// groupException is the code's Java exception with its message, as an
// ExecutionException's getMessage gives it.
func groupException(code int16, message *string) string {
	err := kafkaError(code, message)
	name := "ApiException"
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		name = exceptionClass(e.Message)
	}
	return "org.apache.kafka.common.errors." + name + ": " + err.Error()
}

// groupIDs are the groups a run acts on: --group's, or every consumer
// group with --all-groups.
func (r *groupsRun) groupIDs(ctx context.Context, c *groupsClient) ([]string, error) {
	if !r.fs.Changed("all-groups") {
		return r.groups, nil
	}
	listed, err := c.listGroups(ctx, nil)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, g := range listed {
		ids = append(ids, g.Group)
	}
	return ids, nil
}

// listGroups lists the consumer groups (protocol type consumer or none, as
// Kafka's listConsumerGroups), sorted, of the given states when any.
func (c *groupsClient) listGroups(ctx context.Context, states []string) ([]kmsg.ListGroupsResponseGroup, error) {
	req := kmsg.NewPtrListGroupsRequest()
	req.StatesFilter = states
	raw, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	kresp := raw.(*kmsg.ListGroupsResponse)
	if err := kafkaError(kresp.ErrorCode, nil); err != nil {
		return nil, err
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, g := range kresp.Groups {
		if g.ProtocolType == "consumer" || g.ProtocolType == "" {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

func (r *groupsRun) list(ctx context.Context, c *groupsClient, stdout io.Writer) error {
	if !r.fs.Changed("state") {
		listed, err := c.listGroups(ctx, nil)
		if err != nil {
			return err
		}
		for _, g := range listed {
			fmt.Fprintln(stdout, g.Group)
		}
		return nil
	}
	var states []string
	if v := strings.TrimSpace(r.state); v != noStateValue && v != "" {
		for _, s := range strings.Split(v, ",") {
			i := slices.IndexFunc(groupStates, func(k string) bool { return strings.EqualFold(k, strings.TrimSpace(s)) })
			if i < 0 {
				return usageError{fmt.Sprintf("Invalid state list '%s'. Valid states are: %s", r.state, strings.Join(groupStates, ", "))}
			}
			states = append(states, groupStates[i])
		}
	}
	listed, err := c.listGroups(ctx, states)
	if err != nil {
		return err
	}
	width := 15
	for _, g := range listed {
		width = max(width, len(g.Group))
	}
	fmt.Fprintf(stdout, "%-*s %s\n", width, "GROUP", "STATE")
	for _, g := range listed {
		fmt.Fprintf(stdout, "%-*s %s\n", width, g.Group, g.GroupState)
	}
	return nil
}

// describedGroup is one group as DescribeGroups gives it, with its
// members' assignments decoded.
type describedGroup struct {
	kmsg.DescribeGroupsResponseGroup
	assigned [][]topicPartition // per member, sorted
}

func (c *groupsClient) describeGroups(ctx context.Context, ids []string) (map[string]describedGroup, error) {
	out := map[string]describedGroup{}
	if len(ids) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = ids
	kresp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.DescribeGroupsResponse)
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			return nil, errors.New(groupException(g.ErrorCode, g.ErrorMessage))
		}
		d := describedGroup{DescribeGroupsResponseGroup: g}
		for _, m := range g.Members {
			var a kmsg.ConsumerMemberAssignment
			var tps []topicPartition
			if len(m.MemberAssignment) > 0 && a.ReadFrom(m.MemberAssignment) == nil {
				for _, t := range a.Topics {
					for _, p := range t.Partitions {
						tps = append(tps, topicPartition{t.Topic, p})
					}
				}
			}
			sortPartitions(tps)
			d.assigned = append(d.assigned, tps)
		}
		out[g.Group] = d
	}
	return out, nil
}

func sortPartitions(tps []topicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// committedOffsets are the group's committed offsets, all of them.
func (c *groupsClient) committedOffsets(ctx context.Context, group string) (map[topicPartition]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	kresp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		return nil, errors.New(groupException(resp.ErrorCode, nil))
	}
	out := map[topicPartition]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, errors.New(groupException(p.ErrorCode, nil))
			}
			if p.Offset >= 0 {
				out[topicPartition{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	return out, nil
}

// listOffsets is ListOffsets at timestamp (-1 latest, -2 earliest) for
// each partition; -1 where the partition has none at or after it.
func (c *groupsClient) listOffsets(ctx context.Context, tps []topicPartition, timestamp int64) (map[topicPartition]int64, error) {
	out := map[topicPartition]int64{}
	if len(tps) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp = tp.Partition, timestamp
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	kresp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, errors.New(groupException(p.ErrorCode, nil))
			}
			out[topicPartition{t.Topic, p.Partition}] = p.Offset
		}
	}
	return out, nil
}

// shouldPrint is Kafka's shouldPrintMemberState: the state's message, and
// whether the group has rows to print (rows < 0: the group is unknown).
func shouldPrint(stdout, stderr io.Writer, group, state string, rows int) bool {
	switch state {
	case "Dead":
		printGroupsError(stdout, fmt.Sprintf("Consumer group '%s' does not exist.", group))
	case "Empty":
		fmt.Fprintf(stderr, "\nConsumer group '%s' has no active members.\n", group)
	case "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling":
		fmt.Fprintf(stderr, "\nWarning: Consumer group '%s' is rebalancing.\n", group)
	}
	return state != "Dead" && rows > 0
}

func (r *groupsRun) describe(ctx context.Context, c *groupsClient, stdout, stderr io.Writer) error {
	ids, err := r.groupIDs(ctx, c)
	if err != nil {
		return err
	}
	described, err := c.describeGroups(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(described)) {
		g := described[id]
		var err error
		switch {
		case r.fs.Changed("members"):
			r.printMembers(stdout, stderr, g)
		case r.fs.Changed("state"):
			err = printState(ctx, c, stdout, stderr, g)
		default:
			err = printOffsets(ctx, c, stdout, stderr, g)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// offsetRow is one line of the offsets view.
type offsetRow struct {
	tp                       topicPartition
	consumer, host, clientID string
}

func printOffsets(ctx context.Context, c *groupsClient, stdout, stderr io.Writer, g describedGroup) error {
	committed, err := c.committedOffsets(ctx, g.Group)
	if err != nil {
		return err
	}
	// Members with partitions, the most partitions first; then the
	// committed partitions no member has.
	order := make([]int, len(g.Members))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(g.assigned[order[a]]) > len(g.assigned[order[b]]) })
	var rows []offsetRow
	assigned := map[topicPartition]bool{}
	for _, i := range order {
		m := g.Members[i]
		for _, tp := range g.assigned[i] {
			assigned[tp] = true
			rows = append(rows, offsetRow{tp: tp, consumer: m.MemberID, host: m.ClientHost, clientID: m.ClientID})
		}
	}
	var rest []topicPartition
	for tp := range committed {
		if !assigned[tp] {
			rest = append(rest, tp)
		}
	}
	sortPartitions(rest)
	for _, tp := range rest {
		rows = append(rows, offsetRow{tp: tp, consumer: missing, host: missing, clientID: missing})
	}
	var tps []topicPartition
	for _, row := range rows {
		tps = append(tps, row.tp)
	}
	ends, err := c.listOffsets(ctx, tps, -1)
	if err != nil {
		return err
	}
	if !shouldPrint(stdout, stderr, g.Group, g.State, len(rows)) {
		return nil
	}
	groupW, topicW, consumerW, hostW := 15, 15, 15, 15
	for _, row := range rows {
		groupW, topicW = max(groupW, len(g.Group)), max(topicW, len(row.tp.Topic))
		consumerW, hostW = max(consumerW, len(row.consumer)), max(hostW, len(row.host))
	}
	line := func(cols ...string) {
		fmt.Fprintf(stdout, "%-*s %-*s %-10s %-15s %-15s %-15s %-*s %-*s %s\n", groupW, cols[0], topicW, cols[1], cols[2], cols[3], cols[4], cols[5], consumerW, cols[6], hostW, cols[7], cols[8])
	}
	fmt.Fprintln(stdout)
	line("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
	for _, row := range rows {
		cur, end, lag := missing, missing, missing
		off, hasOff := committed[row.tp]
		e, hasEnd := ends[row.tp]
		if hasOff {
			cur = strconv.FormatInt(off, 10)
		}
		if hasEnd {
			end = strconv.FormatInt(e, 10)
		}
		if hasOff && hasEnd {
			lag = strconv.FormatInt(e-off, 10)
		}
		line(g.Group, row.tp.Topic, strconv.Itoa(int(row.tp.Partition)), cur, end, lag, row.consumer, row.host, row.clientID)
	}
	return nil
}

func (r *groupsRun) printMembers(stdout, stderr io.Writer, g describedGroup) {
	verbose := r.fs.Changed("verbose")
	if !shouldPrint(stdout, stderr, g.Group, g.State, len(g.Members)) {
		return
	}
	groupW, consumerW, instanceW, hostW, clientW, withInstance := 15, 15, 17, 15, 15, false
	for _, m := range g.Members {
		instance := ""
		if m.InstanceID != nil {
			instance = *m.InstanceID
		}
		groupW, consumerW, instanceW = max(groupW, len(g.Group)), max(consumerW, len(m.MemberID)), max(instanceW, len(instance))
		hostW, clientW = max(hostW, len(m.ClientHost)), max(clientW, len(m.ClientID))
		withInstance = withInstance || instance != ""
	}
	row := func(group, consumer, instance, host, client, partitions string) {
		fmt.Fprintf(stdout, "%-*s %-*s ", groupW, group, consumerW, consumer)
		if withInstance {
			fmt.Fprintf(stdout, "%-*s ", instanceW, instance)
		}
		fmt.Fprintf(stdout, "%-*s %-*s %-15s ", hostW, host, clientW, client, partitions)
	}
	fmt.Fprintln(stdout)
	row("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
	if verbose {
		fmt.Fprint(stdout, "ASSIGNMENT")
	}
	fmt.Fprintln(stdout)
	for i, m := range g.Members {
		instance := ""
		if m.InstanceID != nil {
			instance = *m.InstanceID
		}
		row(g.Group, m.MemberID, instance, m.ClientHost, m.ClientID, strconv.Itoa(len(g.assigned[i])))
		if verbose {
			fmt.Fprint(stdout, assignmentText(g.assigned[i]))
		}
		fmt.Fprintln(stdout)
	}
}

// assignmentText is --verbose's ASSIGNMENT column: topic(p,p), sorted.
func assignmentText(tps []topicPartition) string {
	if len(tps) == 0 {
		return missing
	}
	byTopic := map[string][]string{}
	for _, tp := range tps {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], strconv.Itoa(int(tp.Partition)))
	}
	var parts []string
	for t, ps := range byTopic {
		parts = append(parts, t+"("+strings.Join(ps, ",")+")")
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func printState(ctx context.Context, c *groupsClient, stdout, stderr io.Writer, g describedGroup) error {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = g.Group
	req.CoordinatorKeys = []string{g.Group}
	kresp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.FindCoordinatorResponse)
	coordinator := fmt.Sprintf("%s:%d (%d)", resp.Host, resp.Port, resp.NodeID)
	if len(resp.Coordinators) == 1 {
		co := resp.Coordinators[0]
		if co.ErrorCode != 0 {
			return errors.New(groupException(co.ErrorCode, co.ErrorMessage))
		}
		coordinator = fmt.Sprintf("%s:%d (%d)", co.Host, co.Port, co.NodeID)
	}
	if !shouldPrint(stdout, stderr, g.Group, g.State, 1) {
		return nil
	}
	w := max(25, len(coordinator))
	line := func(cols ...string) {
		fmt.Fprintf(stdout, "\n%-*s %-25s %-20s %-15s %s", w, cols[0], cols[1], cols[2], cols[3], cols[4])
	}
	line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
	line(g.Group, coordinator, g.Protocol, g.State, strconv.Itoa(len(g.Members)))
	fmt.Fprintln(stdout)
	return nil
}

func (r *groupsRun) deleteGroups(ctx context.Context, c *groupsClient, stdout io.Writer) error {
	ids, err := r.groupIDs(ctx, c)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = ids
	kresp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.DeleteGroupsResponse)
	failed := map[string]string{}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			failed[g.Group] = javaError(g.ErrorCode, g.ErrorMessage)
		}
	}
	var ok []string
	for _, id := range ids {
		if _, bad := failed[id]; !bad {
			ok = append(ok, id)
		}
	}
	quoted := "'" + strings.Join(ok, "', '") + "'"
	if len(failed) == 0 {
		fmt.Fprintf(stdout, "Deletion of requested consumer groups (%s) was successful.\n", quoted)
		return nil
	}
	printGroupsError(stdout, "Deletion of some consumer groups failed:")
	for _, id := range ids {
		if e, bad := failed[id]; bad {
			fmt.Fprintf(stdout, "* Group '%s' could not be deleted due to: %s\n", id, e)
		}
	}
	if len(ok) > 0 {
		fmt.Fprintf(stdout, "\nThese consumer groups were deleted successfully: %s\n", quoted)
	}
	return nil
}

// topicPartitionsArg splits --topic's values into topic:p,p partitions and
// whole topics.
func topicPartitionsArg(args []string) (parts []topicPartition, whole []string, err error) {
	for _, a := range args {
		if !strings.Contains(a, ":") {
			whole = append(whole, a)
			continue
		}
		fields := strings.Split(a, ":")
		if len(fields) != 2 {
			return nil, nil, usageError{fmt.Sprintf("Invalid topic arg '%s', expected topic name and partitions", a)}
		}
		for _, p := range strings.Split(fields[1], ",") {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil {
				return nil, nil, usageError{fmt.Sprintf("Invalid partition '%s' specified in topic arg '%s''", p, a)}
			}
			parts = append(parts, topicPartition{fields[0], int32(n)})
		}
	}
	return parts, whole, nil
}

// topicPartitions are the partitions of topics, from a Metadata request;
// an unknown topic is an error, or, with tolerate, a partition -1 of it
// with its error.
func (c *groupsClient) topicPartitions(ctx context.Context, topics []string, tolerate bool) ([]topicPartition, map[topicPartition]string, error) {
	if len(topics) == 0 {
		return nil, nil, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, mt)
	}
	kresp, err := c.do(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	var out []topicPartition
	failed := map[topicPartition]string{}
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if t.ErrorCode != 0 {
			if !tolerate {
				return nil, nil, errors.New(groupException(t.ErrorCode, nil))
			}
			failed[topicPartition{name, -1}] = groupException(t.ErrorCode, nil)
			continue
		}
		for _, p := range t.Partitions {
			out = append(out, topicPartition{name, p.Partition})
		}
	}
	return out, failed, nil
}

func (r *groupsRun) resetOffsets(ctx context.Context, c *groupsClient, stdout, stderr io.Writer) error {
	plan, err := r.resetPlanFromFile()
	if err != nil {
		return err
	}
	ids, err := r.groupIDs(ctx, c)
	if err != nil {
		return err
	}
	described, err := c.describeGroups(ctx, ids)
	if err != nil {
		return err
	}
	execute := r.fs.Changed("execute")
	results := map[string]map[topicPartition]int64{}
	for _, id := range ids {
		g := described[id]
		if g.State != "Empty" && g.State != "Dead" {
			printGroupsError(stdout, fmt.Sprintf("Assignments can only be reset if the group '%s' is inactive, but the current state is %s.", id, g.State))
			results[id] = nil
			continue
		}
		offsets, err := r.newOffsets(ctx, c, id, plan, stdout, stderr)
		if err != nil {
			return err
		}
		if execute && len(offsets) > 0 {
			if err := c.commit(ctx, id, offsets); err != nil {
				return err
			}
		}
		results[id] = offsets
	}
	if r.fs.Changed("export") {
		var b strings.Builder
		for _, id := range ids {
			for _, tp := range sortedKeys(results[id]) {
				if len(r.groups) == 1 {
					fmt.Fprintf(&b, "%s,%d,%d\n", tp.Topic, tp.Partition, results[id][tp])
				} else {
					fmt.Fprintf(&b, "%s,%s,%d,%d\n", id, tp.Topic, tp.Partition, results[id][tp])
				}
			}
		}
		fmt.Fprintln(stdout, b.String())
		return nil
	}
	if len(results) > 0 {
		fmt.Fprintf(stdout, "\n%-30s %-30s %-10s %-15s\n", "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
	}
	for _, id := range ids {
		for _, tp := range sortedKeys(results[id]) {
			fmt.Fprintf(stdout, "%-30s %-30s %-10d %-15d\n", id, tp.Topic, tp.Partition, results[id][tp])
		}
	}
	return nil
}

func sortedKeys(m map[topicPartition]int64) []topicPartition {
	var out []topicPartition
	for tp := range m {
		out = append(out, tp)
	}
	sortPartitions(out)
	return out
}

// commit writes offsets as the group's, outside any generation (the group
// is empty), as Kafka's alterConsumerGroupOffsets does.
func (c *groupsClient) commit(ctx context.Context, group string, offsets map[topicPartition]int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	byTopic := map[string]int{}
	for _, tp := range sortedKeys(offsets) {
		i, ok := byTopic[tp.Topic]
		if !ok {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = tp.Partition, offsets[tp], -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	kresp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.OffsetCommitResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return errors.New(groupException(p.ErrorCode, nil))
			}
		}
	}
	return nil
}

// partitionsToReset is the scope: the committed partitions (--all-topics)
// or --topic's.
func (r *groupsRun) partitionsToReset(ctx context.Context, c *groupsClient, group string) ([]topicPartition, error) {
	if r.fs.Changed("all-topics") {
		committed, err := c.committedOffsets(ctx, group)
		if err != nil {
			return nil, err
		}
		return sortedKeys(committed), nil
	}
	parts, whole, err := topicPartitionsArg(r.topics)
	if err != nil {
		return nil, err
	}
	more, _, err := c.topicPartitions(ctx, whole, false)
	if err != nil {
		return nil, err
	}
	return append(parts, more...), nil
}

// newOffsets are the offsets the scenario gives the group's partitions.
func (r *groupsRun) newOffsets(ctx context.Context, c *groupsClient, group string, plan map[string]map[topicPartition]int64, stdout, stderr io.Writer) (map[topicPartition]int64, error) {
	if r.fs.Changed("from-file") {
		p, ok := plan[group]
		if !ok {
			printGroupsError(stdout, "No reset plan for group "+group+" found")
			return map[topicPartition]int64{}, nil
		}
		return c.inRange(ctx, p, stderr)
	}
	tps, err := r.partitionsToReset(ctx, c, group)
	if err != nil {
		return nil, err
	}
	out := map[topicPartition]int64{}
	at := func(timestamp int64, what string) error {
		offs, err := c.listOffsets(ctx, tps, timestamp)
		if err != nil {
			return err
		}
		for _, tp := range tps {
			o, ok := offs[tp]
			if !ok {
				return usageError{fmt.Sprintf("Error getting %s of topic partition: %s-%d", what, tp.Topic, tp.Partition)}
			}
			out[tp] = o
		}
		return nil
	}
	switch {
	case r.fs.Changed("to-offset"):
		for _, tp := range tps {
			out[tp] = r.toOffset
		}
		return c.inRange(ctx, out, stderr)
	case r.fs.Changed("to-earliest"):
		return out, at(-2, "starting offset")
	case r.fs.Changed("to-latest"):
		return out, at(-1, "ending offset")
	case r.fs.Changed("shift-by"):
		committed, err := c.committedOffsets(ctx, group)
		if err != nil {
			return nil, err
		}
		for _, tp := range tps {
			o, ok := committed[tp]
			if !ok {
				return nil, usageError{fmt.Sprintf("Cannot shift offset for partition %s-%d since there is no current committed offset", tp.Topic, tp.Partition)}
			}
			out[tp] = o + r.shiftBy
		}
		return c.inRange(ctx, out, stderr)
	case r.fs.Changed("to-current"):
		committed, err := c.committedOffsets(ctx, group)
		if err != nil {
			return nil, err
		}
		var none []topicPartition
		for _, tp := range tps {
			if o, ok := committed[tp]; ok {
				out[tp] = o
			} else {
				none = append(none, tp)
			}
		}
		ends, err := c.listOffsets(ctx, none, -1)
		if err != nil {
			return nil, err
		}
		for _, tp := range none {
			out[tp] = ends[tp]
		}
		return out, nil
	}
	var ts int64
	if r.fs.Changed("to-datetime") {
		t, err := parseKafkaDateTime(r.toDatetime)
		if err != nil {
			return nil, err
		}
		ts = t.UnixMilli()
	} else {
		d, err := parseISODuration(r.byDuration)
		if err != nil {
			return nil, err
		}
		ts = time.Now().Add(-d).UnixMilli()
	}
	offs, err := c.listOffsets(ctx, tps, ts)
	if err != nil {
		return nil, err
	}
	var empty []topicPartition
	for _, tp := range tps {
		if o, ok := offs[tp]; ok && o >= 0 {
			out[tp] = o
			continue
		}
		fmt.Fprintf(stdout, "\nWarn: Partition %d from topic %s is empty. Falling back to latest known offset.\n", tp.Partition, tp.Topic)
		empty = append(empty, tp)
	}
	ends, err := c.listOffsets(ctx, empty, -1)
	if err != nil {
		return nil, err
	}
	for _, tp := range empty {
		out[tp] = ends[tp]
	}
	return out, nil
}

// inRange is Kafka's checkOffsetsRange: an offset past the log's end is
// its end, one before its start its start, each with a warning.
func (c *groupsClient) inRange(ctx context.Context, want map[topicPartition]int64, stderr io.Writer) (map[topicPartition]int64, error) {
	tps := sortedKeys(want)
	starts, err := c.listOffsets(ctx, tps, -2)
	if err != nil {
		return nil, err
	}
	ends, err := c.listOffsets(ctx, tps, -1)
	if err != nil {
		return nil, err
	}
	out := map[topicPartition]int64{}
	for _, tp := range tps {
		o := want[tp]
		switch {
		case o > ends[tp]:
			fmt.Fprintf(stderr, "WARN New offset (%d) is higher than latest offset for topic partition %s-%d. Value will be set to %d\n", o, tp.Topic, tp.Partition, ends[tp])
			o = ends[tp]
		case o < starts[tp]:
			fmt.Fprintf(stderr, "WARN New offset (%d) is lower than earliest offset for topic partition %s-%d. Value will be set to %d\n", o, tp.Topic, tp.Partition, starts[tp])
			o = starts[tp]
		}
		out[tp] = o
	}
	return out, nil
}

// resetPlanFromFile reads --from-file: topic,partition,offset lines for a
// single --group, group,topic,partition,offset lines otherwise.
func (r *groupsRun) resetPlanFromFile() (map[string]map[topicPartition]int64, error) {
	if !r.fs.Changed("from-file") {
		return nil, nil
	}
	data, err := os.ReadFile(r.fromFile)
	if err != nil {
		return nil, err
	}
	plan := map[string]map[topicPartition]int64{}
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		f := strings.Split(strings.TrimSpace(line), ",")
		group := ""
		switch {
		case len(f) == 3 && len(r.groups) == 1:
			group = r.groups[0]
		case len(f) == 4:
			group, f = f[0], f[1:]
		default:
			return nil, fmt.Errorf("Invalid reset plan line '%s': expected topic,partition,offset or group,topic,partition,offset", line)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("Invalid reset plan line '%s': partition and offset must be numbers", line)
		}
		if plan[group] == nil {
			plan[group] = map[topicPartition]int64{}
		}
		plan[group][topicPartition{f[0], int32(p)}] = o
	}
	return plan, nil
}

// parseKafkaDateTime is Kafka's Utils.getDateTime: yyyy-MM-ddTHH:mm:ss.SSS,
// in local time unless a zone (Z, +hh:mm, +hhmm) follows.
func parseKafkaDateTime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000Z0700", "2006-01-02T15:04:05Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("Unparseable date: \"%s\"", s)
}

var isoDuration = regexp.MustCompile(`^(?i)([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?$`)

// parseISODuration is Java's Duration.parse: PnDTnHnMn.nS.
func parseISODuration(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || strings.HasSuffix(strings.ToUpper(s), "T") || strings.EqualFold(strings.TrimLeft(s, "+-"), "P") {
		return 0, fmt.Errorf("Text cannot be parsed to a Duration")
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+2] != "" {
			n, err := strconv.ParseInt(m[i+2], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("Text cannot be parsed to a Duration")
			}
			d += time.Duration(n) * unit
		}
	}
	if m[6] != "" {
		frac, _ := strconv.ParseInt((m[6] + "000000000")[:9], 10, 64)
		d += time.Duration(frac)
	}
	if m[1] == "-" {
		d = -d
	}
	return d, nil
}

func (r *groupsRun) deleteOffsets(ctx context.Context, c *groupsClient, stdout io.Writer) error {
	group := r.groups[0]
	parts, whole, err := topicPartitionsArg(r.topics)
	if err != nil {
		return err
	}
	more, failed, err := c.topicPartitions(ctx, whole, true)
	if err != nil {
		return err
	}
	parts = append(parts, more...)
	results := map[topicPartition]string{}
	for tp, e := range failed {
		results[tp] = "Error: " + e
	}
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	byTopic := map[string]int{}
	for _, tp := range parts {
		i, ok := byTopic[tp.Topic]
		if !ok {
			t := kmsg.NewOffsetDeleteRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		p := kmsg.NewOffsetDeleteRequestTopicPartition()
		p.Partition = tp.Partition
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	kresp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.OffsetDeleteResponse)
	top := resp.ErrorCode
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			if p.ErrorCode != 0 {
				results[tp] = "Error: " + groupException(p.ErrorCode, nil)
				if top == 0 {
					top = p.ErrorCode
				}
			} else {
				results[tp] = "Successful"
			}
		}
	}
	if top == 0 && len(failed) > 0 {
		top = kerr.UnknownTopicOrPartition.Code
	}
	for _, tp := range parts {
		if _, ok := results[tp]; !ok {
			results[tp] = "Error: " + groupException(top, nil)
		}
	}
	switch top {
	case 0:
		fmt.Fprintf(stdout, "Request succeed for deleting offsets with topic %s group %s\n", strings.Join(r.topics, ", "), group)
	case kerr.InvalidGroupID.Code:
		printGroupsError(stdout, fmt.Sprintf("'%s' is not valid.", group))
	case kerr.GroupIDNotFound.Code:
		printGroupsError(stdout, fmt.Sprintf("'%s' does not exist.", group))
	case kerr.GroupAuthorizationFailed.Code:
		printGroupsError(stdout, fmt.Sprintf("Access to '%s' is not authorized.", group))
	case kerr.NonEmptyGroup.Code:
		printGroupsError(stdout, fmt.Sprintf("Deleting offsets of a consumer group '%s' is forbidden if the group is not empty.", group))
	case kerr.GroupSubscribedToTopic.Code, kerr.TopicAuthorizationFailed.Code, kerr.UnknownTopicOrPartition.Code:
		printGroupsError(stdout, "Encounter some partition level error, see the follow-up details:")
	default:
		printGroupsError(stdout, fmt.Sprintf("Encounter some unknown error: %s", kerr.ErrorForCode(top)))
	}
	var tps []topicPartition
	for tp := range results {
		tps = append(tps, tp)
	}
	// Kafka sorts by topic and partition as one string.
	sort.Slice(tps, func(i, j int) bool {
		return tps[i].Topic+strconv.Itoa(int(tps[i].Partition)) < tps[j].Topic+strconv.Itoa(int(tps[j].Partition))
	})
	fmt.Fprintf(stdout, "\n%-30s %-15s %-15s\n", "TOPIC", "PARTITION", "STATUS")
	for _, tp := range tps {
		p := strconv.Itoa(int(tp.Partition))
		if tp.Partition < 0 {
			p = "Not Provided"
		}
		fmt.Fprintf(stdout, "%-30s %-15s %-15s\n", tp.Topic, p, results[tp])
	}
	return nil
}
