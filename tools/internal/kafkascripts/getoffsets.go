package kafkascripts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// getOffsetsRun is what kafka-get-offsets.sh's flags ask for.
type getOffsetsRun struct {
	fs                                *pflag.FlagSet
	bootstrap, topicPartitions, topic string
	partitions, time, commandConfig   string
	excludeInternal                   bool
	filters                           []topicPartitionFilter
	timestamp                         int64
}

// topicPartitionFilter is one of GetOffsetShell's rules: topics whose
// whole name matches, partitions in [lo, hi) or in set.
type topicPartitionFilter struct {
	topic  *regexp.Regexp
	lo, hi int64
	set    map[int32]bool
}

func (f topicPartitionFilter) allows(topic string, p int32) bool {
	if !f.topic.MatchString(topic) {
		return false
	}
	if f.set != nil {
		return len(f.set) == 0 || f.set[p]
	}
	return int64(p) >= f.lo && int64(p) < f.hi
}

// includeList is Kafka's IncludeList: a regular expression on the whole
// name, a comma meaning "or".
func includeList(expr string) (*regexp.Regexp, error) {
	expr = strings.ReplaceAll(strings.TrimSpace(expr), ",", "|")
	return regexp.Compile("^(?:" + expr + ")$")
}

func getOffsetsFlags(r *getOffsetsRun) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-get-offsets.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.StringVar(&r.bootstrap, "bootstrap-server", "", "REQUIRED: the server(s) to connect to (HOST1:PORT1,...)")
	fs.StringVar(&r.topicPartitions, "topic-partitions", "", "comma-separated topic-partition patterns: topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3 (a topic regex, then a partition, a range [lower, upper) or none for all)")
	fs.StringVar(&r.topic, "topic", "", "the topic to get the offsets for, a regular expression; every topic when not given (not with --topic-partitions)")
	fs.StringVar(&r.partitions, "partitions", "", "comma-separated partition ids; every partition when not given (not with --topic-partitions)")
	fs.StringVar(&r.time, "time", "latest", "<timestamp> / -1 or latest / -2 or earliest / -3 or max-timestamp: the offsets of the first record at or after the timestamp (max-timestamp: of the first record carrying the largest timestamp)")
	fs.StringVar(&r.commandConfig, "command-config", "", "a properties file of client settings (security.protocol=SSL and PEM ssl.truststore.*/ssl.keystore.*)")
	fs.BoolVar(&r.excludeInternal, "exclude-internal-topics", false, "exclude internal topics (included by default)")
	fs.BoolP("help", "h", false, "print usage information")
	return fs
}

func getOffsetsUsage() string {
	var r getOffsetsRun
	return "Option:\n" + getOffsetsFlags(&r).FlagUsages()
}

// GetOffsets is kafka-get-offsets.sh (Kafka 3.7's GetOffsetShell): the
// offset --time names of each partition the filters select, one
// "topic:partition:offset" line each, sorted as Kafka sorts them; a
// partition whose offset cannot be had is skipped with a line on stderr.
func GetOffsets(args []string, stdout, stderr io.Writer) int {
	r, err := parseGetOffsetsFlags(args)
	if code, done := parseOutcome(err, "An interactive shell for getting topic-partition offsets.", getOffsetsUsage, stdout, stderr, func(err error) string { return "Error occurred: " + err.Error() }); done {
		return code
	}
	if err := r.run(stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "Error occurred: "+err.Error())
		return 1
	}
	return 0
}

func parseGetOffsetsFlags(args []string) (*getOffsetsRun, error) {
	if len(args) == 0 {
		return nil, usageError{"An interactive shell for getting topic-partition offsets."}
	}
	r := &getOffsetsRun{}
	fs := getOffsetsFlags(r)
	r.fs = fs
	if err := parseKafkaFlags(fs, args); err != nil {
		return nil, err
	}
	if h, _ := fs.GetBool("help"); h {
		return nil, pflag.ErrHelp
	}
	if err := requireOption(fs, "bootstrap-server"); err != nil {
		return nil, err
	}
	if err := validatePorts(r.bootstrap); err != nil {
		return nil, err
	}
	if fs.Changed("topic-partitions") && (fs.Changed("topic") || fs.Changed("partitions")) {
		return nil, errors.New("--topic-partitions cannot be used with --topic or --partitions")
	}
	var err error
	if r.timestamp, err = parseOffsetTime(r.time); err != nil {
		return nil, err
	}
	if fs.Changed("topic-partitions") {
		for _, spec := range strings.Split(r.topicPartitions, ",") {
			f, err := parseTopicPartitionRule(spec)
			if err != nil {
				return nil, err
			}
			r.filters = append(r.filters, f)
		}
		return r, nil
	}
	topic := ".*"
	if fs.Changed("topic") {
		topic = r.topic
	}
	re, err := includeList(topic)
	if err != nil {
		return nil, err
	}
	f := topicPartitionFilter{topic: re, set: map[int32]bool{}}
	if r.partitions != "" {
		for _, s := range strings.Split(r.partitions, ",") {
			p, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("--partitions expects a comma separated list of numeric partition ids, but received: %s", r.partitions)
			}
			f.set[int32(p)] = true
		}
	}
	r.filters = []topicPartitionFilter{f}
	return r, nil
}

// parseOffsetTime is GetOffsetShell's --time: a name or a timestamp, the
// negative ones ListOffsets' special timestamps.
func parseOffsetTime(s string) (int64, error) {
	switch s {
	case "latest":
		return -1, nil
	case "earliest":
		return -2, nil
	case "max-timestamp":
		return -3, nil
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("Malformed time argument %s. Please use -1 or latest / -2 or earliest / -3 or max-timestamp, or a specified long format timestamp", s)
	}
	return ts, nil
}

var topicPartitionRule = regexp.MustCompile(`^([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?$`)

func parseTopicPartitionRule(spec string) (topicPartitionFilter, error) {
	m := topicPartitionRule.FindStringSubmatch(spec)
	if m == nil {
		return topicPartitionFilter{}, fmt.Errorf("Invalid rule specification: %s", spec)
	}
	topic := ".*"
	if m[1] != "" {
		topic = m[1]
	}
	re, err := includeList(topic)
	if err != nil {
		return topicPartitionFilter{}, err
	}
	f := topicPartitionFilter{topic: re, lo: 0, hi: 1<<31 - 1}
	num := func(s string) (int64, error) {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("For input string: \"%s\"", s)
		}
		return n, nil
	}
	switch {
	case m[2] != "":
		n, err := num(m[2])
		if err != nil {
			return f, err
		}
		f.lo, f.hi = n, n+1
	default:
		if m[3] != "" {
			if f.lo, err = num(m[3]); err != nil {
				return f, err
			}
		}
		if m[4] != "" {
			if f.hi, err = num(m[4]); err != nil {
				return f, err
			}
		}
	}
	return f, nil
}

type partitionOffset struct {
	topic     string
	partition int32
	offset    int64
}

func (r *getOffsetsRun) run(stdout, stderr io.Writer) error {
	opts, err := commandConfig(r.commandConfig)
	if err != nil {
		return err
	}
	// ListOffsets goes to each partition's leader: the client routes it.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(splitBootstrap(r.bootstrap)...), kgo.ClientID("GetOffsetShell")}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	type tp struct {
		topic     string
		partition int32
		leader    int32
	}
	var selected []tp
	for _, t := range meta.Topics {
		if t.Topic == nil || t.ErrorCode != 0 || (r.excludeInternal && t.IsInternal) {
			continue
		}
		for _, p := range t.Partitions {
			for _, f := range r.filters {
				if f.allows(*t.Topic, p.Partition) {
					selected = append(selected, tp{*t.Topic, p.Partition, p.Leader})
					break
				}
			}
		}
	}
	if len(selected) == 0 {
		return errors.New("Could not match any topic-partitions with the specified filters")
	}
	// Kafka's order: by the partitions' names, "topic-partition" as text.
	sort.Slice(selected, func(i, j int) bool {
		return fmt.Sprintf("%s-%d", selected[i].topic, selected[i].partition) < fmt.Sprintf("%s-%d", selected[j].topic, selected[j].partition)
	})
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, s := range selected {
		i, ok := byTopic[s.topic]
		if !ok {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = s.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			byTopic[s.topic] = i
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = s.partition, r.timestamp, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	answers := map[string]kmsg.ListOffsetsResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			answers[fmt.Sprintf("%s-%d", t.Topic, p.Partition)] = p
		}
	}
	for _, s := range selected {
		name := fmt.Sprintf("%s-%d", s.topic, s.partition)
		p, ok := answers[name]
		switch {
		case !ok:
			fmt.Fprintf(stderr, "Skip getting offsets for topic-partition %s due to error: org.apache.kafka.common.errors.TimeoutException: no answer\n", name)
		case p.ErrorCode != 0:
			fmt.Fprintf(stderr, "Skip getting offsets for topic-partition %s due to error: %s\n", name, javaException(kerr.ErrorForCode(p.ErrorCode)))
		case p.Offset != -1:
			fmt.Fprintf(stdout, "%s:%d:%d\n", s.topic, s.partition, p.Offset)
		}
	}
	return nil
}
