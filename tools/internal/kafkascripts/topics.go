package kafkascripts

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicsActions are kafka-topics.sh's actions, exactly one per run.
var topicsActions = []string{"list", "describe", "create", "alter", "delete"}

// partitionReports are --describe's partition filters.
var partitionReports = []string{"under-replicated-partitions", "under-min-isr-partitions", "at-min-isr-partitions", "unavailable-partitions"}

// topicsRun is what kafka-topics.sh's flags ask for.
type topicsRun struct {
	fs                                          *pflag.FlagSet
	bootstrap, commandConfig                    string
	topic, topicID                              string
	configs                                     []string
	partitions, replicationFactor, assignment   string
	underReplicated, underMinIsr, atMinIsr      bool
	unavailable, withOverrides                  bool
	ifExists, ifNotExists, excludeInternal, all bool
}

func topicsFlags(r *topicsRun) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-topics.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.StringVar(&r.bootstrap, "bootstrap-server", "", "REQUIRED: the Kafka server to connect to (host:port, several comma-separated)")
	fs.StringVar(&r.commandConfig, "command-config", "", "a properties file of client settings (security.protocol=SSL and PEM ssl.truststore.*/ssl.keystore.*)")
	var action bool
	fs.BoolVar(&action, "list", false, "list all available topics")
	fs.BoolVar(&action, "create", false, "create a new topic")
	fs.BoolVar(&action, "delete", false, "delete a topic")
	fs.BoolVar(&action, "alter", false, "alter the number of partitions and the replica assignment (topic configs: kafka-configs.sh)")
	fs.BoolVar(&action, "describe", false, "list details for the given topics")
	fs.StringVar(&r.topic, "topic", "", "the topic to create, alter, describe or delete; a regular expression except with --create (a comma separates alternatives)")
	fs.StringVar(&r.topicID, "topic-id", "", "the topic id to describe")
	fs.StringArrayVar(&r.configs, "config", nil, "a topic config override name=value for the topic being created (repeatable)")
	fs.StringVar(&r.partitions, "partitions", "", "the number of partitions for the topic being created or altered (the cluster default when not given with --create)")
	fs.StringVar(&r.replicationFactor, "replication-factor", "", "the replication factor of each partition of the topic being created (the cluster default when not given)")
	fs.StringVar(&r.assignment, "replica-assignment", "", "manual partition-to-broker assignments: broker_id_for_part1_replica1:broker_id_for_part1_replica2,broker_id_for_part2_replica1:...")
	fs.BoolVar(&r.underReplicated, "under-replicated-partitions", false, "when describing, only show under-replicated partitions")
	fs.BoolVar(&r.unavailable, "unavailable-partitions", false, "when describing, only show partitions whose leader is not available")
	fs.BoolVar(&r.underMinIsr, "under-min-isr-partitions", false, "when describing, only show partitions whose ISR is smaller than min.insync.replicas")
	fs.BoolVar(&r.atMinIsr, "at-min-isr-partitions", false, "when describing, only show partitions whose ISR is exactly min.insync.replicas")
	fs.BoolVar(&r.withOverrides, "topics-with-overrides", false, "when describing, only show topics that have overridden configs")
	fs.BoolVar(&r.ifExists, "if-exists", false, "when altering, deleting or describing, act only if the topic exists")
	fs.BoolVar(&r.ifNotExists, "if-not-exists", false, "when creating, do not fail if the topic already exists")
	fs.BoolVar(&r.excludeInternal, "exclude-internal", false, "exclude internal topics when listing or describing")
	fs.BoolP("help", "h", false, "print usage information")
	return fs
}

func topicsUsage() string {
	var r topicsRun
	return "Option (one action: --list, --describe, --create, --alter or --delete):\n" + topicsFlags(&r).FlagUsages()
}

// Topics is kafka-topics.sh (Kafka 3.7's TopicCommand): --create, --list,
// --describe with its partition filters, --alter --partitions and --delete
// over the Kafka protocol, with Kafka's flags, output lines, error lines
// ("Error while executing topic command : ...") and exit codes.
func Topics(args []string, stdout, stderr io.Writer) int {
	r, err := parseTopicsFlags(args)
	if code, done := parseOutcome(err, "This tool helps to create, delete, describe, or change a topic.", topicsUsage, stdout, stderr, nil); done {
		return code
	}
	if err := r.run(stdout); err != nil {
		fmt.Fprintf(stdout, "Error while executing topic command : %s\n", err)
		return 1
	}
	return 0
}

// parseTopicsFlags checks the flags in the order Kafka's tool does.
func parseTopicsFlags(args []string) (*topicsRun, error) {
	if len(args) == 0 {
		return nil, usageError{"Create, delete, describe, or change a topic."}
	}
	r := &topicsRun{}
	fs := topicsFlags(r)
	r.fs = fs
	if err := parseKafkaFlags(fs, args); err != nil {
		return nil, err
	}
	if h, _ := fs.GetBool("help"); h {
		return nil, pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("Found non-option arguments: %s", strings.Join(fs.Args(), " "))
	}
	actions := 0
	for _, a := range topicsActions {
		if fs.Changed(a) {
			actions++
		}
	}
	if actions != 1 {
		return nil, usageError{"Command must include exactly one action: --list, --describe, --create, --alter or --delete"}
	}
	if !fs.Changed("bootstrap-server") {
		return nil, errors.New("--bootstrap-server must be specified")
	}
	if fs.Changed("describe") && fs.Changed("if-exists") && !fs.Changed("topic") && !fs.Changed("topic-id") {
		return nil, usageError{"--topic or --topic-id is required to describe a topic"}
	}
	if !fs.Changed("list") && !fs.Changed("describe") {
		if err := requireOption(fs, "topic"); err != nil {
			return nil, err
		}
	}
	if fs.Changed("alter") {
		if fs.Changed("config") {
			return nil, usageError{`Option combination "[bootstrap-server],[config]" can't be used with option "[alter]" (To alter topic configurations, the kafka-configs tool can be used.)`}
		}
		if err := requireOption(fs, "partitions"); err != nil {
			return nil, err
		}
	}
	checks := [][]string{
		{"config", "list", "describe", "delete"},
		{"partitions", "list", "describe", "delete"},
		{"replication-factor", "alter", "list", "describe", "delete"},
		{"replica-assignment", "list", "describe", "delete"},
	}
	if fs.Changed("create") {
		checks = append(checks, []string{"replica-assignment", "partitions", "replication-factor"})
	}
	for _, rep := range partitionReports {
		checks = append(checks, []string{rep, "alter", "create", "list", "delete", "topics-with-overrides"})
	}
	checks = append(checks,
		append([]string{"topics-with-overrides", "alter", "create", "list", "delete"}, partitionReports...),
		[]string{"if-exists", "create", "list"},
		[]string{"if-not-exists", "alter", "describe", "list", "delete"},
		[]string{"exclude-internal", "alter", "create", "delete"},
	)
	for _, c := range checks {
		if err := refuseWith(fs, c[0], c[1:]...); err != nil {
			return nil, err
		}
	}
	r.all = fs.Changed("describe") && !r.underReplicated && !r.underMinIsr && !r.atMinIsr && !r.unavailable
	return r, nil
}

func (r *topicsRun) run(stdout io.Writer) error {
	opts, err := commandConfig(r.commandConfig)
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
	switch {
	case r.fs.Changed("create"):
		return r.create(ctx, adm, stdout)
	case r.fs.Changed("list"):
		return r.list(ctx, adm, stdout)
	case r.fs.Changed("describe"):
		return r.describe(ctx, adm, stdout)
	case r.fs.Changed("alter"):
		return r.alterPartitions(ctx, adm)
	default:
		return r.delete(ctx, adm)
	}
}

// intOption parses an integer option as Kafka's option parser does.
func (r *topicsRun) intOption(name, value string) (int, bool, error) {
	if !r.fs.Changed(name) {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("Cannot parse argument '%s' of option %s", value, name)
	}
	return int(n), true, nil
}

// topicConfigs parses --config name=value, refusing what Kafka's tool
// refuses.
func (r *topicsRun) topicConfigs() (map[string]string, error) {
	out := map[string]string{}
	sep := regexp.MustCompile(`\s*=\s*`)
	for _, c := range r.configs {
		kv := sep.Split(c, -1)
		if len(kv) != 2 {
			return nil, errors.New(`requirement failed: Invalid topic config: all configs to be added must be in the format "key=val".`)
		}
		out[strings.TrimSpace(kv[0])] = strings.TrimSpace(kv[1])
	}
	return out, nil
}

// replicaAssignment parses --replica-assignment: partitions separated by
// commas, each partition's brokers by colons.
func replicaAssignment(s string) ([][]int32, error) {
	var out [][]int32
	for i, part := range strings.Split(s, ",") {
		var brokers []int32
		seen := map[int32]bool{}
		var dups []string
		for _, b := range strings.Split(part, ":") {
			n, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("For input string: \"%s\"", strings.TrimSpace(b))
			}
			if seen[int32(n)] {
				dups = append(dups, strconv.Itoa(int(n)))
			}
			seen[int32(n)] = true
			brokers = append(brokers, int32(n))
		}
		if len(dups) > 0 {
			return nil, fmt.Errorf("Partition replica lists may not contain duplicate entries: %s", strings.Join(dups, ","))
		}
		if len(out) > 0 && len(brokers) != len(out[0]) {
			return nil, fmt.Errorf("Partition %d has different replication factor: [%s]", i, joinIDs(brokers, ", "))
		}
		out = append(out, brokers)
	}
	return out, nil
}

// collides is Kafka's Topic.hasCollisionChars: a name with '.' or '_'
// may share a metric name with another.
func collides(topic string) bool { return strings.ContainsAny(topic, "._") }

func (r *topicsRun) create(ctx context.Context, adm *seedAdmin, stdout io.Writer) error {
	if collides(r.topic) {
		fmt.Fprintln(stdout, "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both.")
	}
	configs, err := r.topicConfigs()
	if err != nil {
		return err
	}
	var assignment [][]int32
	if r.fs.Changed("replica-assignment") && r.assignment != "" {
		if assignment, err = replicaAssignment(r.assignment); err != nil {
			return err
		}
	}
	partitions, hasPartitions, err := r.intOption("partitions", r.partitions)
	if err != nil {
		return err
	}
	rf, hasRF, err := r.intOption("replication-factor", r.replicationFactor)
	if err != nil {
		return err
	}
	if hasRF && (rf < 1 || rf > math.MaxInt16) {
		return fmt.Errorf("The replication factor must be between 1 and %d inclusive", math.MaxInt16)
	}
	if hasPartitions && partitions < 1 {
		return errors.New("The partitions must be greater than 0")
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = r.topic, -1, -1
	if assignment != nil {
		for p, brokers := range assignment {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(p), brokers
			t.ReplicaAssignment = append(t.ReplicaAssignment, a)
		}
	} else {
		if hasPartitions {
			t.NumPartitions = int32(partitions)
		}
		if hasRF {
			t.ReplicationFactor = int16(rf)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(configs[k])
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	resp, err := adm.request(ctx, req)
	if err != nil {
		return err
	}
	for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
		if rt.ErrorCode == kerr.TopicAlreadyExists.Code && r.ifNotExists {
			return nil
		}
		if err := kafkaError(rt.ErrorCode, rt.ErrorMessage); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "Created topic %s.\n", r.topic)
	return nil
}

// topicFilter is Kafka's IncludeList: --topic as a regular expression that
// must match the whole name, a comma separating alternatives, spaces and
// surrounding quotes dropped.
func topicFilter(raw string) (*regexp.Regexp, error) {
	expr := strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(raw), ",", "|"), " ", "")
	expr = strings.TrimRight(strings.TrimLeft(expr, `"'`), `"'`)
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, fmt.Errorf("%s is an invalid regex.", raw)
	}
	return re, nil
}

// topics are the topics --topic and --exclude-internal select, sorted by
// name, from an every-topic Metadata answer.
func (r *topicsRun) topics(meta *kmsg.MetadataResponse) ([]kmsg.MetadataResponseTopic, error) {
	var filter *regexp.Regexp
	if r.fs.Changed("topic") {
		f, err := topicFilter(r.topic)
		if err != nil {
			return nil, err
		}
		filter = f
	}
	var out []kmsg.MetadataResponseTopic
	for _, t := range meta.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		if t.IsInternal && r.excludeInternal {
			continue
		}
		if filter != nil && !filter.MatchString(*t.Topic) {
			continue
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return *out[i].Topic < *out[j].Topic })
	return out, nil
}

// ensureFound is Kafka's check that --topic matched something (unless
// --if-exists).
func (r *topicsRun) ensureFound(found int) error {
	if r.fs.Changed("topic") && r.topic != "" && !r.ifExists && found == 0 {
		return fmt.Errorf("Topic '%s' does not exist as expected", r.topic)
	}
	return nil
}

func (r *topicsRun) selected(ctx context.Context, adm *seedAdmin) (*kmsg.MetadataResponse, []kmsg.MetadataResponseTopic, error) {
	meta, err := adm.metadata(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	topics, err := r.topics(meta)
	if err != nil {
		return nil, nil, err
	}
	return meta, topics, nil
}

func (r *topicsRun) list(ctx context.Context, adm *seedAdmin, stdout io.Writer) error {
	_, topics, err := r.selected(ctx, adm)
	if err != nil {
		return err
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = *t.Topic
	}
	fmt.Fprintln(stdout, strings.Join(names, "\n"))
	return nil
}

func (r *topicsRun) delete(ctx context.Context, adm *seedAdmin) error {
	_, topics, err := r.selected(ctx, adm)
	if err != nil {
		return err
	}
	if err := r.ensureFound(len(topics)); err != nil {
		return err
	}
	if len(topics) == 0 {
		return nil
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	for _, t := range topics {
		req.TopicNames = append(req.TopicNames, *t.Topic)
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = t.Topic
		req.Topics = append(req.Topics, dt)
	}
	resp, err := adm.request(ctx, req)
	if err != nil {
		return err
	}
	for _, rt := range resp.(*kmsg.DeleteTopicsResponse).Topics {
		if err := kafkaError(rt.ErrorCode, rt.ErrorMessage); err != nil {
			return err
		}
	}
	return nil
}

// alterPartitions is --alter: each selected topic grows to --partitions,
// the new partitions placed as --replica-assignment says (its entries past
// the topic's current count) or by the controller.
func (r *topicsRun) alterPartitions(ctx context.Context, adm *seedAdmin) error {
	_, topics, err := r.selected(ctx, adm)
	if err != nil {
		return err
	}
	if err := r.ensureFound(len(topics)); err != nil {
		return err
	}
	if len(topics) == 0 {
		return nil
	}
	count, _, err := r.intOption("partitions", r.partitions)
	if err != nil {
		return err
	}
	var assignment [][]int32
	if r.assignment != "" {
		if assignment, err = replicaAssignment(r.assignment); err != nil {
			return err
		}
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	for _, t := range topics {
		ct := kmsg.NewCreatePartitionsRequestTopic()
		ct.Topic, ct.Count = *t.Topic, int32(count)
		if assignment != nil {
			for _, brokers := range assignment[min(len(t.Partitions), len(assignment)):] {
				a := kmsg.NewCreatePartitionsRequestTopicAssignment()
				a.Replicas = brokers
				ct.Assignment = append(ct.Assignment, a)
			}
		}
		req.Topics = append(req.Topics, ct)
	}
	resp, err := adm.request(ctx, req)
	if err != nil {
		return err
	}
	for _, rt := range resp.(*kmsg.CreatePartitionsResponse).Topics {
		if err := kafkaError(rt.ErrorCode, rt.ErrorMessage); err != nil {
			return err
		}
	}
	return nil
}

// topicConfig is one topic's DescribeConfigs answer.
type topicConfig struct {
	overrides []string // name=value of every config not at its default, in the answer's order
	minISR    int
}

func (adm *seedAdmin) topicConfigs(ctx context.Context, names []string) (map[string]topicConfig, error) {
	out := map[string]topicConfig{}
	if len(names) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, n := range names {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, n
		req.Resources = append(req.Resources, res)
	}
	resp, err := adm.request(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, res := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		if err := kafkaError(res.ErrorCode, res.ErrorMessage); err != nil {
			return nil, err
		}
		tc := topicConfig{minISR: 1}
		for _, c := range res.Configs {
			value := ""
			if c.Value != nil {
				value = *c.Value
			}
			if c.Name == "min.insync.replicas" {
				if n, err := strconv.Atoi(value); err == nil {
					tc.minISR = n
				}
			}
			// Kafka's ConfigEntry.isDefault: only the built-in default
			// is left out; topic and broker-level overrides are shown.
			if c.Source != kmsg.ConfigSourceDefaultConfig {
				tc.overrides = append(tc.overrides, c.Name+"="+value)
			}
		}
		out[res.ResourceName] = tc
	}
	return out, nil
}

// topicIDString is Kafka's Uuid.toString: URL-safe base64, unpadded.
func topicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// describe prints Kafka 3.7's describe lines (the format before Kafka 3.8
// added Elr and LastKnownElr), tab-separated: one per topic
//
//	Topic: T	TopicId: ID	PartitionCount: N	ReplicationFactor: R	Configs: k=v,...
//
// then one per partition, tab-led,
//
//	Topic: T	Partition: P	Leader: L	Replicas: r,r,r	Isr: i,i
//
// Leader is "none" when the partition has none; a partition being
// reassigned (ListPartitionReassignments) adds
//
//	Adding Replicas: a,a	Removing Replicas: r
//
// after Isr. The partition filters print only the partitions they select
// and no topic lines. Topics come in name order.
func (r *topicsRun) describe(ctx context.Context, adm *seedAdmin, stdout io.Writer) error {
	meta, topics, err := r.selected(ctx, adm)
	if err != nil {
		return err
	}
	if id := strings.TrimSpace(r.topicID); id != "" && id != topicIDString([16]byte{}) {
		var byID []kmsg.MetadataResponseTopic
		for _, t := range topics {
			if topicIDString(t.TopicID) == id {
				byID = append(byID, t)
			}
		}
		if len(byID) == 0 && !r.ifExists {
			return fmt.Errorf("TopicId '%s' does not exist as expected", id)
		}
		topics = byID
	} else if err := r.ensureFound(len(topics)); err != nil {
		return err
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = *t.Topic
	}
	configs, err := adm.topicConfigs(ctx, names)
	if err != nil {
		return err
	}
	live := map[int32]bool{}
	for _, b := range meta.Brokers {
		live[b.NodeID] = true
	}
	moving, err := describedReassignments(ctx, adm, topics)
	if err != nil {
		return err
	}
	for _, t := range topics {
		cfg := configs[*t.Topic]
		parts := slices.Clone(t.Partitions)
		sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
		if r.all && len(parts) > 0 && (!r.withOverrides || len(cfg.overrides) > 0) {
			line := "Topic: " + *t.Topic
			if t.TopicID != ([16]byte{}) {
				line += "\tTopicId: " + topicIDString(t.TopicID)
			}
			rf := replicationFactor(parts[0], moving[topicPartition{*t.Topic, parts[0].Partition}])
			line += fmt.Sprintf("\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s", len(parts), rf, strings.Join(cfg.overrides, ","))
			fmt.Fprintln(stdout, line)
		}
		if r.withOverrides {
			continue
		}
		for _, p := range parts {
			ra, isMoving := moving[topicPartition{*t.Topic, p.Partition}]
			if !r.all && !r.reports(p, ra, cfg.minISR, live) {
				continue
			}
			leader := "none"
			if p.Leader >= 0 {
				leader = strconv.Itoa(int(p.Leader))
			}
			line := fmt.Sprintf("\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s",
				*t.Topic, p.Partition, leader, joinIDs(p.Replicas, ","), joinIDs(p.ISR, ","))
			if isMoving {
				line += fmt.Sprintf("\tAdding Replicas: %s\tRemoving Replicas: %s", joinIDs(ra.adding, ","), joinIDs(ra.removing, ","))
			}
			fmt.Fprintln(stdout, line)
		}
	}
	return nil
}

// describedReassignments lists the moves among the partitions described.
// A broker that does not serve ListPartitionReassignments, or a caller
// without Describe on the Cluster, leaves the columns out, as in Kafka's
// tool.
func describedReassignments(ctx context.Context, adm *seedAdmin, topics []kmsg.MetadataResponseTopic) (map[topicPartition]reassignment, error) {
	var parts []topicPartition
	for _, t := range topics {
		for _, p := range t.Partitions {
			parts = append(parts, topicPartition{*t.Topic, p.Partition})
		}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	moving, err := adm.listReassignments(ctx, parts)
	var ce *codeError
	switch {
	case errors.As(err, &ce) && (ce.code == kerr.UnsupportedVersion.Code || ce.code == kerr.ClusterAuthorizationFailed.Code):
		return nil, nil
	case err != nil && strings.Contains(err.Error(), "broker is too old"): // franz-go: the API is not advertised
		return nil, nil
	}
	return moving, err
}

// inProgress is Kafka's TopicCommand.isReassignmentInProgress: a move that
// finished between the Metadata and the listing shares no replica with
// the partition's.
func inProgress(p kmsg.MetadataResponseTopicPartition, ra reassignment) bool {
	for _, id := range p.Replicas {
		if slices.Contains(ra.adding, id) || slices.Contains(ra.removing, id) {
			return true
		}
	}
	return false
}

// replicationFactor is Kafka's: during a move, the replicas less those
// being added (the origin's count).
func replicationFactor(p kmsg.MetadataResponseTopicPartition, ra reassignment) int {
	if !inProgress(p, ra) {
		return len(p.Replicas)
	}
	n := 0
	for _, id := range ra.replicas {
		if !slices.Contains(ra.adding, id) {
			n++
		}
	}
	return n
}

// reports says whether a partition filter given selects p.
func (r *topicsRun) reports(p kmsg.MetadataResponseTopicPartition, ra reassignment, minISR int, live map[int32]bool) bool {
	hasLeader := p.Leader >= 0
	switch {
	case r.underReplicated && replicationFactor(p, ra)-len(p.ISR) > 0:
		return true
	case r.unavailable && (!hasLeader || !live[p.Leader]):
		return true
	case r.underMinIsr && (!hasLeader || len(p.ISR) < minISR):
		return true
	case r.atMinIsr && len(p.ISR) == minISR:
		return true
	}
	return false
}

func joinIDs(ids []int32, sep string) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, sep)
}
