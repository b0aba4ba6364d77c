package kafkascripts

import (
	"bytes"
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
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/controller/reassignplan"
)

// reassignActions are kafka-reassign-partitions.sh's actions, one per run.
var reassignActions = []string{"generate", "execute", "verify", "cancel", "list"}

// reassignPermitted is what each action accepts besides itself, as Kafka's
// ReassignPartitionsCommand checks (its required options included).
var reassignPermitted = map[string][]string{
	"verify":   {"bootstrap-server", "command-config", "preserve-throttles", "reassignment-json-file"},
	"generate": {"bootstrap-server", "broker-list", "command-config", "disable-rack-aware", "topics-to-move-json-file"},
	"execute":  {"additional", "bootstrap-server", "command-config", "throttle", "replica-alter-log-dirs-throttle", "timeout", "reassignment-json-file"},
	"cancel":   {"bootstrap-server", "command-config", "preserve-throttles", "timeout", "reassignment-json-file"},
	"list":     {"bootstrap-server", "command-config"},
}

var reassignRequired = map[string][]string{
	"verify":   {"reassignment-json-file"},
	"generate": {"topics-to-move-json-file", "broker-list"},
	"execute":  {"reassignment-json-file"},
	"cancel":   {"reassignment-json-file"},
}

// The throttle keys Kafka's tool sets and clears (KIP-73); tidemark's
// brokers and topics take the same ones.
const (
	leaderRateKey       = "leader.replication.throttled.rate"
	followerRateKey     = "follower.replication.throttled.rate"
	leaderReplicasKey   = "leader.replication.throttled.replicas"
	followerReplicasKey = "follower.replication.throttled.replicas"
)

type reassignRun struct {
	fs                                     *pflag.FlagSet
	action                                 string
	bootstrap, bootstrapController, config string
	planFile, topicsFile, brokerList       string
	throttle, logDirThrottle, timeoutMs    int64
	additional, preserve, disableRackAware bool
}

func reassignFlags(r *reassignRun) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-reassign-partitions.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.StringVar(&r.bootstrap, "bootstrap-server", "", "REQUIRED: the server(s) to use for bootstrapping")
	fs.StringVar(&r.bootstrapController, "bootstrap-controller", "", "not served by tidemark: use --bootstrap-server")
	fs.StringVar(&r.config, "command-config", "", "a properties file of client settings (security.protocol=SSL and PEM ssl.truststore.*/ssl.keystore.*)")
	var action bool
	fs.BoolVar(&action, "generate", false, "generate a candidate partition reassignment configuration (it is not executed)")
	fs.BoolVar(&action, "execute", false, "kick off the reassignment as specified by the --reassignment-json-file option")
	fs.BoolVar(&action, "verify", false, "verify if the reassignment completed as specified by the --reassignment-json-file option; clears the throttles once it has")
	fs.BoolVar(&action, "cancel", false, "cancel an active reassignment (the partitions of --reassignment-json-file)")
	fs.BoolVar(&action, "list", false, "list all active partition reassignments")
	fs.StringVar(&r.planFile, "reassignment-json-file", "", `the partition reassignment JSON file: {"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}`)
	fs.StringVar(&r.topicsFile, "topics-to-move-json-file", "", `with --generate: the topics to move, {"version":1,"topics":[{"topic":"foo"}]}`)
	fs.StringVar(&r.brokerList, "broker-list", "", `with --generate: the brokers to place the partitions on, "0,1,2"`)
	fs.BoolVar(&r.disableRackAware, "disable-rack-aware", false, "with --generate: ignore the brokers' racks")
	fs.Int64Var(&r.throttle, "throttle", -1, "with --execute: the replication rate limit between brokers, bytes/s (cleared by --verify once the moves end)")
	fs.Int64Var(&r.logDirThrottle, "replica-alter-log-dirs-throttle", -1, "not served by tidemark: a broker has no log dir moves")
	fs.Int64Var(&r.timeoutMs, "timeout", 10000, "the ms --execute or --cancel waits for log dir moves to start (tidemark has none)")
	fs.BoolVar(&r.additional, "additional", false, "execute even though reassignments are in progress")
	fs.BoolVar(&r.preserve, "preserve-throttles", false, "with --verify or --cancel: leave the throttles in place")
	fs.BoolP("help", "h", false, "print usage information")
	return fs
}

func reassignUsage() string {
	var r reassignRun
	return "Option (one action: --generate, --execute, --verify, --cancel or --list):\n" + reassignFlags(&r).FlagUsages()
}

// ReassignPartitions is kafka-reassign-partitions.sh (Kafka 3.7's
// ReassignPartitionsCommand) over the Kafka protocol: --generate,
// --execute (with --throttle), --verify, --cancel and --list, with Kafka's
// JSON files, output lines, errors ("Error: ..." on stdout) and exit codes.
// Log dir moves (log_dirs other than "any") and --bootstrap-controller are
// refused: a tidemark broker has one log dir per disk set and no log dir
// moves, and its controllers speak only gRPC.
func ReassignPartitions(args []string, stdout, stderr io.Writer) int {
	r, err := parseReassignFlags(args)
	if code, done := parseOutcome(err, "This tool helps to move topic partitions between replicas.", reassignUsage, stdout, stderr, nil); done {
		return code
	}
	if err := r.run(stdout); err != nil {
		var terse terseError
		if errors.As(err, &terse) {
			fmt.Fprintln(stdout, terse.msg)
		} else {
			fmt.Fprintf(stdout, "Error: %s\n", err)
		}
		return 1
	}
	return 0
}

// terseError is printed as it is, without "Error: " (Kafka's
// TerseException).
type terseError struct{ msg string }

func (e terseError) Error() string { return e.msg }

func parseReassignFlags(args []string) (*reassignRun, error) {
	r := &reassignRun{}
	fs := reassignFlags(r)
	r.fs = fs
	if len(args) == 0 {
		return nil, usageError{"This tool helps to move topic partitions between replicas."}
	}
	if err := parseKafkaFlags(fs, args); err != nil {
		return nil, err
	}
	if h, _ := fs.GetBool("help"); h {
		return nil, pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("Found non-option arguments: %s", strings.Join(fs.Args(), " "))
	}
	var actions []string
	for _, a := range reassignActions {
		if fs.Changed(a) {
			actions = append(actions, a)
		}
	}
	if len(actions) != 1 {
		return nil, usageError{"Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"}
	}
	r.action = actions[0]
	switch {
	case fs.Changed("bootstrap-server") && fs.Changed("bootstrap-controller"):
		return nil, usageError{"Please don't specify both --bootstrap-server and --bootstrap-controller"}
	case fs.Changed("bootstrap-controller"):
		return nil, usageError{"--bootstrap-controller is not supported: tidemark's controllers do not speak the Kafka protocol; use --bootstrap-server"}
	case !fs.Changed("bootstrap-server"):
		return nil, usageError{"Please specify either --bootstrap-server or --bootstrap-controller"}
	}
	for _, req := range reassignRequired[r.action] {
		if err := requireOption(fs, req); err != nil {
			return nil, err
		}
	}
	var refused error
	fs.Visit(func(f *pflag.Flag) {
		if refused == nil && f.Name != r.action && !slices.Contains(reassignPermitted[r.action], f.Name) {
			refused = usageError{fmt.Sprintf("Option \"[%s]\" can't be used with action \"[%s]\"", f.Name, r.action)}
		}
	})
	if refused != nil {
		return nil, refused
	}
	if r.logDirThrottle >= 0 {
		return nil, usageError{"--replica-alter-log-dirs-throttle is not supported: tidemark brokers have no log dir moves to throttle"}
	}
	return r, nil
}

func (r *reassignRun) run(stdout io.Writer) error {
	// Read the files first: a bad file is refused before any connection.
	var plan []planItem
	var topics []string
	var brokers []int32
	var err error
	switch r.action {
	case "execute", "verify", "cancel":
		if plan, err = readReassignPlan(r.planFile); err != nil {
			return err
		}
		if r.action == "execute" {
			if err := checkExecutePlan(plan); err != nil {
				return err
			}
		}
	case "generate":
		if brokers, topics, err = readGenerateArgs(r.topicsFile, r.brokerList); err != nil {
			return err
		}
	}
	opts, err := commandConfig(r.config)
	if err != nil {
		return err
	}
	adm, err := newSeedAdmin(splitBootstrap(r.bootstrap), opts)
	if err != nil {
		return err
	}
	defer adm.close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	switch r.action {
	case "generate":
		return r.generate(ctx, adm, stdout, topics, brokers)
	case "execute":
		return r.execute(ctx, adm, stdout, plan)
	case "verify":
		return r.verify(ctx, adm, stdout, plan)
	case "cancel":
		return r.cancel(ctx, adm, stdout, plan)
	default:
		return listAll(ctx, adm, stdout)
	}
}

// planItem is one partition of a reassignment JSON file.
type planItem struct {
	tp       topicPartition
	replicas []int32
}

// reassignFileItem is a partition as the JSON file gives it; pointers tell
// a missing field from a zero one.
type reassignFileItem struct {
	Topic     *string  `json:"topic"`
	Partition *int32   `json:"partition"`
	Replicas  *[]int32 `json:"replicas"`
	LogDirs   []string `json:"log_dirs"`
}

// readReassignPlan parses Kafka's reassignment JSON (version 1; a missing
// version is 1), keeping duplicates for the checks that follow.
func readReassignPlan(path string) ([]planItem, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Version    *int                `json:"version"`
		Partitions *[]reassignFileItem `json:"partitions"`
	}
	if err := strictJSON(raw, &file); err != nil {
		return nil, fmt.Errorf("%s is not a valid reassignment JSON file: %w", path, err)
	}
	if file.Version != nil && *file.Version != 1 {
		return nil, fmt.Errorf("Not supported version field value %d", *file.Version)
	}
	var out []planItem
	if file.Partitions == nil {
		return out, nil
	}
	for i, p := range *file.Partitions {
		for name, missing := range map[string]bool{"topic": p.Topic == nil, "partition": p.Partition == nil, "replicas": p.Replicas == nil} {
			if missing {
				return nil, fmt.Errorf("%s: partition entry %d has no %q field", path, i, name)
			}
		}
		tp := topicPartition{Topic: *p.Topic, Partition: *p.Partition}
		reps := *p.Replicas
		if p.LogDirs != nil {
			if len(p.LogDirs) != len(reps) {
				return nil, fmt.Errorf("Size of replicas list %s is different from size of log dirs list %s for partition %s",
					javaList(reps), "["+strings.Join(p.LogDirs, ", ")+"]", tp)
			}
			for _, d := range p.LogDirs {
				if d != "any" {
					return nil, fmt.Errorf("log dir %q for partition %s: tidemark brokers have no log dir moves, only \"any\" is supported", d, tp)
				}
			}
		}
		out = append(out, planItem{tp: tp, replicas: reps})
	}
	return out, nil
}

// strictJSON decodes one JSON value, refusing trailing data.
func strictJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// checkExecutePlan is Kafka's parseExecuteAssignmentArgs' checks.
func checkExecutePlan(plan []planItem) error {
	if len(plan) == 0 {
		return errors.New("Partition reassignment list cannot be empty")
	}
	for _, it := range plan {
		if len(it.replicas) == 0 {
			return errors.New("Partition replica list cannot be empty")
		}
	}
	var dupParts []string
	seen := map[topicPartition]bool{}
	for _, it := range plan {
		if seen[it.tp] && !slices.Contains(dupParts, it.tp.String()) {
			dupParts = append(dupParts, it.tp.String())
		}
		seen[it.tp] = true
	}
	if len(dupParts) > 0 {
		return fmt.Errorf("Partition reassignment contains duplicate topic partitions: %s", strings.Join(dupParts, ","))
	}
	var dupReplicas []string
	for _, it := range plan {
		if d := duplicates(it.replicas); len(d) > 0 {
			dupReplicas = append(dupReplicas, fmt.Sprintf("%s contains multiple entries for %s", it.tp, joinIDs(d, ",")))
		}
	}
	if len(dupReplicas) > 0 {
		return fmt.Errorf("Partition replica lists may not contain duplicate entries: %s", strings.Join(dupReplicas, ". "))
	}
	return nil
}

func duplicates(ids []int32) []int32 {
	var out []int32
	for i, id := range ids {
		if slices.Contains(ids[:i], id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// javaList is a list as Java prints one: [1, 2, 3].
func javaList(ids []int32) string { return "[" + joinIDs(ids, ", ") + "]" }

// readGenerateArgs is Kafka's parseGenerateAssignmentArgs.
func readGenerateArgs(topicsFile, brokerList string) ([]int32, []string, error) {
	var brokers []int32
	for _, s := range strings.Split(brokerList, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return nil, nil, fmt.Errorf("--broker-list: %q is not a broker id", s)
		}
		brokers = append(brokers, int32(n))
	}
	if d := duplicates(brokers); len(d) > 0 {
		return nil, nil, fmt.Errorf("Broker list contains duplicate entries: %s", javaList(d))
	}
	raw, err := os.ReadFile(topicsFile)
	if err != nil {
		return nil, nil, err
	}
	var file struct {
		Version *int `json:"version"`
		Topics  []struct {
			Topic *string `json:"topic"`
		} `json:"topics"`
	}
	if err := strictJSON(raw, &file); err != nil {
		return nil, nil, fmt.Errorf("%s is not a valid topics-to-move JSON file: %w", topicsFile, err)
	}
	if file.Version != nil && *file.Version != 1 {
		return nil, nil, fmt.Errorf("Not supported version field value %d", *file.Version)
	}
	topics, dup := []string{}, []string(nil) // no topics asks Metadata for none, not all
	for i, t := range file.Topics {
		if t.Topic == nil {
			return nil, nil, fmt.Errorf("%s: topic entry %d has no \"topic\" field", topicsFile, i)
		}
		if slices.Contains(topics, *t.Topic) && !slices.Contains(dup, *t.Topic) {
			dup = append(dup, *t.Topic)
		}
		topics = append(topics, *t.Topic)
	}
	if len(dup) > 0 {
		return nil, nil, fmt.Errorf("List of topics to reassign contains duplicate entries: [%s]", strings.Join(dup, ", "))
	}
	return brokers, topics, nil
}

// reassignmentJSON is Kafka's formatAsReassignmentJson: partitions in
// topic then partition order, every log dir "any".
func reassignmentJSON(asg map[topicPartition][]int32) string {
	type item struct {
		Topic     string   `json:"topic"`
		Partition int32    `json:"partition"`
		Replicas  []int32  `json:"replicas"`
		LogDirs   []string `json:"log_dirs"`
	}
	out := struct {
		Version    int    `json:"version"`
		Partitions []item `json:"partitions"`
	}{Version: 1, Partitions: []item{}}
	for _, tp := range sortedPartitions(slices.Collect(maps.Keys(asg))) {
		reps := asg[tp]
		dirs := make([]string, len(reps))
		for i := range dirs {
			dirs[i] = "any"
		}
		out.Partitions = append(out.Partitions, item{tp.Topic, tp.Partition, reps, dirs})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func sortedPartitions(tps []topicPartition) []topicPartition {
	slices.SortFunc(tps, func(a, b topicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return tps
}

func joinPartitions(tps []topicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range sortedPartitions(tps) {
		s[i] = tp.String()
	}
	return strings.Join(s, ",")
}

// assignments reads the replicas of every partition of topics; an unknown
// topic is Kafka's "Topic X not found.".
func assignments(ctx context.Context, adm *seedAdmin, topics []string) (map[topicPartition][]int32, *kmsg.MetadataResponse, error) {
	meta, err := adm.metadata(ctx, topics)
	if err != nil {
		return nil, nil, err
	}
	out := map[topicPartition][]int32{}
	for _, t := range meta.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if t.ErrorCode == unknownTopicOrPartition {
			return nil, nil, fmt.Errorf("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Topic %s not found.", name)
		}
		if err := kafkaError(t.ErrorCode, nil); err != nil {
			return nil, nil, fmt.Errorf("topic %s: %w", name, err)
		}
		for _, p := range t.Partitions {
			out[topicPartition{name, p.Partition}] = p.Replicas
		}
	}
	return out, meta, nil
}

const unknownTopicOrPartition int16 = 3

func (r *reassignRun) generate(ctx context.Context, adm *seedAdmin, stdout io.Writer, topics []string, brokerIDs []int32) error {
	current, meta, err := assignments(ctx, adm, topics)
	if err != nil {
		return err
	}
	var brokers []reassignplan.Broker
	racked := 0
	for _, b := range meta.Brokers {
		if !slices.Contains(brokerIDs, b.NodeID) {
			continue
		}
		rb := reassignplan.Broker{ID: b.NodeID}
		if b.Rack != nil && !r.disableRackAware {
			rb.Rack = *b.Rack
			racked++
		}
		brokers = append(brokers, rb)
	}
	if !r.disableRackAware && racked != 0 && racked != len(brokers) {
		return errors.New("Not all brokers have rack information. Add --disable-rack-aware in command line to make replica assignment without rack information.")
	}
	byTopic := map[string]map[int32][]int32{}
	for tp, reps := range current {
		if byTopic[tp.Topic] == nil {
			byTopic[tp.Topic] = map[int32][]int32{}
		}
		byTopic[tp.Topic][tp.Partition] = reps
	}
	// Kafka's tool starts the round robin at a random broker too.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	proposed, err := reassignplan.Generate(byTopic, brokers, !r.disableRackAware && racked > 0, rng)
	if err != nil {
		return err
	}
	flat := map[topicPartition][]int32{}
	for t, parts := range proposed {
		for p, reps := range parts {
			flat[topicPartition{t, p}] = reps
		}
	}
	fmt.Fprintf(stdout, "Current partition replica assignment\n%s\n\n", reassignmentJSON(current))
	fmt.Fprintf(stdout, "Proposed partition reassignment configuration\n%s\n", reassignmentJSON(flat))
	return nil
}

func (r *reassignRun) execute(ctx context.Context, adm *seedAdmin, stdout io.Writer, plan []planItem) error {
	ongoing, err := adm.listReassignments(ctx, nil)
	if err != nil {
		return err
	}
	if !r.additional && len(ongoing) > 0 {
		return terseError{"Cannot execute because there is an existing partition assignment.  Use --additional to override this and " +
			"create a new partition assignment in addition to the existing one. The --additional " +
			"flag can also be used to change the throttle by resubmitting the current reassignment."}
	}
	var topics []string
	proposed := map[topicPartition][]int32{}
	for _, it := range plan {
		proposed[it.tp] = it.replicas
		if !slices.Contains(topics, it.tp.Topic) {
			topics = append(topics, it.tp.Topic)
		}
	}
	meta, err := adm.metadata(ctx, []string{})
	if err != nil {
		return err
	}
	live := map[int32]bool{}
	for _, b := range meta.Brokers {
		live[b.NodeID] = true
	}
	for _, it := range plan {
		for _, id := range it.replicas {
			if !live[id] {
				return fmt.Errorf("Unknown broker id %d", id)
			}
		}
	}
	current, _, err := assignments(ctx, adm, topics)
	if err != nil {
		return err
	}
	var missing []string
	forPlan := map[topicPartition][]int32{}
	for tp := range proposed {
		reps, ok := current[tp]
		if !ok {
			missing = append(missing, tp.String())
			continue
		}
		forPlan[tp] = reps
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Unable to find partition: %s", strings.Join(missing, ", "))
	}
	fmt.Fprintf(stdout, "Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file option during rollback\n", reassignmentJSON(forPlan))
	if r.throttle >= 0 {
		fmt.Fprintln(stdout, "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.")
		if err := setThrottles(ctx, adm, ongoing, proposed, forPlan, r.throttle); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "The inter-broker throttle limit was set to %d B/s\n", r.throttle)
	}
	failed, err := alterAssignments(ctx, adm, proposed)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return terseError{"Error reassigning partition(s):\n" + failureLines(failed)}
	}
	parts := slices.Collect(maps.Keys(proposed))
	fmt.Fprintf(stdout, "Successfully started partition reassignment%s for %s\n", plural(len(parts)), joinPartitions(parts))
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func failureLines(failed map[topicPartition]error) string {
	var lines []string
	for _, tp := range sortedPartitions(slices.Collect(maps.Keys(failed))) {
		lines = append(lines, fmt.Sprintf("%s: %s", tp, failed[tp]))
	}
	return strings.Join(lines, "\n")
}

// alterAssignments sends AlterPartitionReassignments (a nil target
// cancels) and returns each partition's refusal.
func alterAssignments(ctx context.Context, adm *seedAdmin, targets map[topicPartition][]int32) (map[topicPartition]error, error) {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	byTopic := map[string]int{}
	for _, tp := range sortedPartitions(slices.Collect(maps.Keys(targets))) {
		i, ok := byTopic[tp.Topic]
		if !ok {
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = tp.Partition, targets[tp]
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := adm.request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.AlterPartitionAssignmentsResponse)
	failed := map[topicPartition]error{}
	if err := kafkaError(resp.ErrorCode, resp.ErrorMessage); err != nil {
		for tp := range targets {
			failed[tp] = err
		}
		return failed, nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kafkaError(p.ErrorCode, p.ErrorMessage); err != nil {
				failed[topicPartition{t.Topic, p.Partition}] = err
			}
		}
	}
	return failed, nil
}

// setThrottles is Kafka's modifyReassignmentThrottle: on each topic the
// leader list names every partition's sources (its replicas before the
// move, or the origin of a move in flight) and the follower list its
// destinations; every broker involved gets both rates.
func setThrottles(ctx context.Context, adm *seedAdmin, ongoing map[topicPartition]reassignment, proposed, current map[topicPartition][]int32, rate int64) error {
	type move struct{ sources, destinations []int32 }
	moves := map[topicPartition]move{}
	for tp, ra := range ongoing {
		var src []int32
		for _, id := range ra.replicas {
			if !slices.Contains(ra.adding, id) {
				src = append(src, id)
			}
		}
		moves[tp] = move{src, slices.Clone(ra.adding)}
	}
	for tp, target := range proposed {
		src := current[tp]
		if m, ok := moves[tp]; ok {
			src = m.sources
		}
		var dst []int32
		for _, id := range target {
			if !slices.Contains(src, id) {
				dst = append(dst, id)
			}
		}
		moves[tp] = move{src, dst}
	}
	leader, follower := map[string][]string{}, map[string][]string{}
	var brokers []int32
	for tp, m := range moves {
		for _, id := range m.sources {
			leader[tp.Topic] = append(leader[tp.Topic], fmt.Sprintf("%d:%d", tp.Partition, id))
		}
		for _, id := range m.destinations {
			follower[tp.Topic] = append(follower[tp.Topic], fmt.Sprintf("%d:%d", tp.Partition, id))
		}
		for _, id := range append(slices.Clone(m.sources), m.destinations...) {
			if !slices.Contains(brokers, id) {
				brokers = append(brokers, id)
			}
		}
	}
	var res []kmsg.IncrementalAlterConfigsRequestResource
	topicNames := slices.Sorted(maps.Keys(leader))
	for t := range follower {
		if !slices.Contains(topicNames, t) {
			topicNames = append(topicNames, t)
		}
	}
	for _, t := range topicNames {
		slices.Sort(leader[t])
		slices.Sort(follower[t])
		res = append(res, configResource(kmsg.ConfigResourceTypeTopic, t, 0,
			leaderReplicasKey, strings.Join(leader[t], ","), followerReplicasKey, strings.Join(follower[t], ",")))
	}
	if err := incrementalAlter(ctx, adm, res); err != nil {
		return err
	}
	res = nil
	slices.Sort(brokers)
	r := strconv.FormatInt(rate, 10)
	for _, id := range brokers {
		res = append(res, configResource(kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(id)), 0, leaderRateKey, r, followerRateKey, r))
	}
	return incrementalAlter(ctx, adm, res)
}

// configResource is one resource's ops: op (0 SET, 1 DELETE) on each
// name, value pair given.
func configResource(typ kmsg.ConfigResourceType, name string, op kmsg.IncrementalAlterConfigOp, kv ...string) kmsg.IncrementalAlterConfigsRequestResource {
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = kv[i], op
		if op == kmsg.IncrementalAlterConfigOpSet {
			c.Value = kmsg.StringPtr(kv[i+1])
		}
		res.Configs = append(res.Configs, c)
	}
	return res
}

func incrementalAlter(ctx context.Context, adm *seedAdmin, res []kmsg.IncrementalAlterConfigsRequestResource) error {
	if len(res) == 0 {
		return nil
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = res
	kresp, err := adm.request(ctx, req)
	if err != nil {
		return err
	}
	for _, r := range kresp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
			return fmt.Errorf("%s %s: %w", strings.ToLower(r.ResourceType.String()), r.ResourceName, err)
		}
	}
	return nil
}

// clearAllThrottles is Kafka's: the rates off every live broker and every
// broker the plan names, the replica lists off the plan's topics.
func clearAllThrottles(ctx context.Context, adm *seedAdmin, stdout io.Writer, plan []planItem) error {
	meta, err := adm.metadata(ctx, []string{})
	if err != nil {
		return err
	}
	var brokers []int32
	for _, b := range meta.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	var topics []string
	for _, it := range plan {
		for _, id := range it.replicas {
			if !slices.Contains(brokers, id) {
				brokers = append(brokers, id)
			}
		}
		if !slices.Contains(topics, it.tp.Topic) {
			topics = append(topics, it.tp.Topic)
		}
	}
	slices.Sort(brokers)
	slices.Sort(topics)
	fmt.Fprintf(stdout, "Clearing broker-level throttles on broker%s %s\n", plural(len(brokers)), joinIDs(brokers, ","))
	var res []kmsg.IncrementalAlterConfigsRequestResource
	for _, id := range brokers {
		res = append(res, configResource(kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(id)), kmsg.IncrementalAlterConfigOpDelete, leaderRateKey, "", followerRateKey, ""))
	}
	if err := incrementalAlter(ctx, adm, res); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Clearing topic-level throttles on topic%s %s\n", plural(len(topics)), strings.Join(topics, ","))
	res = nil
	for _, t := range topics {
		res = append(res, configResource(kmsg.ConfigResourceTypeTopic, t, kmsg.IncrementalAlterConfigOpDelete, leaderReplicasKey, "", followerReplicasKey, ""))
	}
	return incrementalAlter(ctx, adm, res)
}

// verify prints each partition's state (Kafka's findPartitionReassignmentStates)
// and, once no move is in flight anywhere, clears the throttles.
func (r *reassignRun) verify(ctx context.Context, adm *seedAdmin, stdout io.Writer, plan []planItem) error {
	ongoing, err := adm.listReassignments(ctx, nil)
	if err != nil {
		return err
	}
	var topics []string
	for _, it := range plan {
		if _, moving := ongoing[it.tp]; !moving && !slices.Contains(topics, it.tp.Topic) {
			topics = append(topics, it.tp.Topic)
		}
	}
	current := map[topicPartition][]int32{}
	if len(topics) > 0 {
		meta, err := adm.metadata(ctx, topics)
		if err != nil {
			return err
		}
		for _, t := range meta.Topics {
			if t.ErrorCode != 0 && t.ErrorCode != unknownTopicOrPartition {
				return fmt.Errorf("topic %s: %w", *t.Topic, kafkaError(t.ErrorCode, nil))
			}
			for _, p := range t.Partitions {
				current[topicPartition{*t.Topic, p.Partition}] = p.Replicas
			}
		}
	}
	lines := []string{"Status of partition reassignment:"}
	seen := map[topicPartition]bool{}
	var order []topicPartition
	target := map[topicPartition][]int32{}
	for _, it := range plan {
		if !seen[it.tp] {
			order = append(order, it.tp)
		}
		seen[it.tp] = true
		target[it.tp] = it.replicas
	}
	for _, tp := range sortedPartitions(order) {
		switch _, moving := ongoing[tp]; {
		case moving:
			lines = append(lines, fmt.Sprintf("Reassignment of partition %s is still in progress.", tp))
		case slices.Equal(current[tp], target[tp]):
			lines = append(lines, fmt.Sprintf("Reassignment of partition %s is completed.", tp))
		default:
			lines = append(lines, fmt.Sprintf("There is no active reassignment of partition %s, but replica set is %s rather than %s.",
				tp, joinIDs(current[tp], ","), joinIDs(target[tp], ",")))
		}
	}
	fmt.Fprintln(stdout, strings.Join(lines, "\n"))
	fmt.Fprintln(stdout) // the (empty) log dir move states
	if len(ongoing) == 0 && !r.preserve {
		return clearAllThrottles(ctx, adm, stdout, plan)
	}
	return nil
}

// cancel cancels the plan's partitions that are moving, then clears the
// throttles unless --preserve-throttles.
func (r *reassignRun) cancel(ctx context.Context, adm *seedAdmin, stdout io.Writer, plan []planItem) error {
	var parts []topicPartition
	for _, it := range plan {
		if !slices.Contains(parts, it.tp) {
			parts = append(parts, it.tp)
		}
	}
	ongoing, err := adm.listReassignments(ctx, parts)
	if err != nil {
		return err
	}
	if len(ongoing) > 0 {
		targets := map[topicPartition][]int32{}
		for tp := range ongoing {
			targets[tp] = nil
		}
		failed, err := alterAssignments(ctx, adm, targets)
		if err != nil {
			return err
		}
		if len(failed) > 0 {
			return terseError{fmt.Sprintf("Error cancelling partition reassignment%s for:\n%s", plural(len(failed)), failureLines(failed))}
		}
		fmt.Fprintf(stdout, "Successfully cancelled partition reassignment%s for: %s\n", plural(len(ongoing)), joinPartitions(slices.Collect(maps.Keys(ongoing))))
	} else {
		fmt.Fprintln(stdout, "None of the specified partition reassignments are active.")
	}
	fmt.Fprint(stdout, "None of the specified partition moves are active.") // no newline, as Kafka's tool
	if !r.preserve {
		return clearAllThrottles(ctx, adm, stdout, plan)
	}
	return nil
}

// listAll is --list: every move in flight.
func listAll(ctx context.Context, adm *seedAdmin, stdout io.Writer) error {
	ongoing, err := adm.listReassignments(ctx, nil)
	if err != nil {
		return err
	}
	if len(ongoing) == 0 {
		fmt.Fprintln(stdout, "No partition reassignments found.")
		return nil
	}
	lines := []string{"Current partition reassignments:"}
	for _, tp := range sortedPartitions(slices.Collect(maps.Keys(ongoing))) {
		ra := ongoing[tp]
		line := fmt.Sprintf("%s: replicas: %s.", tp, joinIDs(ra.replicas, ","))
		if len(ra.adding) > 0 {
			line += fmt.Sprintf(" adding: %s.", joinIDs(ra.adding, ","))
		}
		if len(ra.removing) > 0 {
			line += fmt.Sprintf(" removing: %s.", joinIDs(ra.removing, ","))
		}
		lines = append(lines, line)
	}
	fmt.Fprintln(stdout, strings.Join(lines, "\n"))
	return nil
}
