package kafkascripts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// electionTimeout is Kafka's tool's: the admin client's default API
// timeout, which is also the time the request gives the controller.
const electionTimeout = 30 * time.Second

// electionRequest is what the flags ask for; partitions nil is every
// partition (--all-topic-partitions).
type electionRequest struct {
	bootstrap  []string
	unclean    bool
	partitions []topicPartition
}

type topicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp topicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// LeaderElection is kafka-leader-election.sh: a preferred or unclean
// election (KIP-460) for one partition, the partitions a JSON file lists,
// or every partition, sent as ElectLeaders to the first bootstrap server
// that answers. Kafka's admin client sends it to the controller its
// Metadata names; a tidemark broker names itself and forwards the election
// to the controller, so the bootstrap server is that broker, and its
// advertised address (which may be one only the host resolves) is never
// needed. Output and exit codes are Kafka's tool's: 0 when every partition
// got its leader or already had it, 1 otherwise.
func LeaderElection(args []string, stdout, stderr io.Writer) int {
	req, err := parseElectionFlags(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprint(stdout, electionUsage())
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprint(stderr, electionUsage())
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), electionTimeout)
	defer cancel()
	resp, err := sendElection(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stdout, "Timeout waiting for election results")
		}
		fmt.Fprintln(stderr, err)
		return 1
	}
	return reportElection(req, resp, stdout, stderr)
}

func parseElectionFlags(args []string) (electionRequest, error) {
	var (
		req                                      electionRequest
		bootstrap, electionType, topic, jsonFile string
		partition                                int32
		all                                      bool
	)
	fs := electionFlags(&bootstrap, &electionType, &topic, &jsonFile, &partition, &all)
	if err := parseKafkaFlags(fs, args); err != nil {
		return req, err
	}
	if fs.NArg() > 0 {
		return req, fmt.Errorf("Found non-option arguments: %s", strings.Join(fs.Args(), " "))
	}
	var missing []string
	if bootstrap == "" {
		missing = append(missing, "bootstrap-server")
	}
	if electionType == "" {
		missing = append(missing, "election-type")
	}
	if len(missing) > 0 {
		return req, fmt.Errorf("Missing required option(s): %s", strings.Join(missing, ", "))
	}
	for _, a := range strings.Split(bootstrap, ",") {
		if a = strings.TrimSpace(a); a != "" {
			req.bootstrap = append(req.bootstrap, a)
		}
	}
	switch strings.ToLower(electionType) {
	case "preferred":
	case "unclean":
		req.unclean = true
	default:
		return req, fmt.Errorf("Value for argument [election-type] has illegal value [%s]: preferred or unclean", electionType)
	}
	chosen := 0
	for _, name := range []string{"topic", "all-topic-partitions", "path-to-json-file"} {
		if fs.Changed(name) {
			chosen++
		}
	}
	if chosen != 1 {
		return req, errors.New("One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file")
	}
	switch {
	case fs.Changed("topic") && !fs.Changed("partition"):
		return req, errors.New("Missing required option(s): partition")
	case !fs.Changed("topic") && fs.Changed("partition"):
		return req, errors.New("Option partition is only allowed if topic is used")
	case fs.Changed("topic"):
		req.partitions = []topicPartition{{Topic: topic, Partition: partition}}
	case fs.Changed("path-to-json-file"):
		tps, err := readElectionFile(jsonFile)
		if err != nil {
			return req, err
		}
		req.partitions = tps
	}
	return req, nil
}

func electionFlags(bootstrap, electionType, topic, jsonFile *string, partition *int32, all *bool) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-leader-election.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(bootstrap, "bootstrap-server", "", "REQUIRED: a broker's Kafka listener, host:port; several comma-separated are tried in order")
	fs.StringVar(electionType, "election-type", "", "REQUIRED: preferred (give leadership back to the first assigned replica) or unclean (elect an out-of-sync replica when no in-sync one is alive)")
	fs.StringVar(topic, "topic", "", "the topic of the partition to elect for (with --partition)")
	fs.Int32Var(partition, "partition", 0, "the partition to elect for (with --topic)")
	fs.BoolVar(all, "all-topic-partitions", false, "elect for every partition the election type applies to")
	fs.StringVar(jsonFile, "path-to-json-file", "", `a JSON file listing the partitions: {"partitions": [{"topic": "foo", "partition": 1}]}`)
	return fs
}

func electionUsage() string {
	var s, t, j string
	var p int32
	var a bool
	return "This tool attempts to elect a new leader for a set of topic partitions. The type of elections supported are preferred replicas and unclean replicas.\n" +
		"Option (exactly one of --topic, --all-topic-partitions, --path-to-json-file):\n" +
		electionFlags(&s, &s, &t, &j, &p, &a).FlagUsages()
}

// readElectionFile reads Kafka's election file; a partition listed twice
// is refused, as Kafka's tool does.
func readElectionFile(path string) ([]topicPartition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Partitions *[]topicPartition `json:"partitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Partitions == nil {
		return nil, errors.New(`Replica election data is missing "partitions" field`)
	}
	seen := map[topicPartition]bool{}
	var dups []string
	for _, tp := range *doc.Partitions {
		if seen[tp] {
			dups = append(dups, tp.String())
		}
		seen[tp] = true
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("Replica election data contains duplicate partitions: %s", strings.Join(dups, ","))
	}
	return *doc.Partitions, nil
}

// sendElection sends the request to the first bootstrap server that
// answers (seedAdmin).
func sendElection(ctx context.Context, req electionRequest) (*kmsg.ElectLeadersResponse, error) {
	adm, err := newSeedAdmin(req.bootstrap, nil)
	if err != nil {
		return nil, err
	}
	defer adm.close()
	kreq := kmsg.NewPtrElectLeadersRequest()
	if req.unclean {
		kreq.ElectionType = 1
	}
	kreq.TimeoutMillis = int32(electionTimeout.Milliseconds())
	if req.partitions != nil {
		byTopic := map[string]int{}
		for _, tp := range req.partitions {
			i, ok := byTopic[tp.Topic]
			if !ok {
				t := kmsg.NewElectLeadersRequestTopic()
				t.Topic = tp.Topic
				kreq.Topics = append(kreq.Topics, t)
				i = len(kreq.Topics) - 1
				byTopic[tp.Topic] = i
			}
			kreq.Topics[i].Partitions = append(kreq.Topics[i].Partitions, tp.Partition)
		}
	}
	resp, err := adm.request(ctx, kreq)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ElectLeadersResponse), nil
}

// reportElection prints the outcome as Kafka's tool does: the partitions
// elected, those whose valid leader was already in place, and one line per
// failure.
func reportElection(req electionRequest, resp *kmsg.ElectLeadersResponse, stdout, stderr io.Writer) int {
	kind := "PREFERRED"
	if req.unclean {
		kind = "UNCLEAN"
	}
	if resp.ErrorCode != 0 {
		err := kerr.ErrorForCode(resp.ErrorCode)
		if errors.Is(err, kerr.ClusterAuthorizationFailed) {
			fmt.Fprintln(stdout, "Not authorized to perform leader election")
		}
		fmt.Fprintln(stderr, err)
		return 1
	}
	var elected, noop []string
	type failure struct{ tp, why string }
	var failed []failure
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{Topic: t.Topic, Partition: p.Partition}.String()
			switch err := kerr.ErrorForCode(p.ErrorCode); {
			case err == nil:
				elected = append(elected, tp)
			case errors.Is(err, kerr.ElectionNotNeeded):
				noop = append(noop, tp)
			default:
				why := err.Error()
				if p.ErrorMessage != nil && *p.ErrorMessage != "" {
					why = fmt.Sprintf("%s: %s", err.(*kerr.Error).Message, *p.ErrorMessage)
				}
				failed = append(failed, failure{tp, why})
			}
		}
	}
	sort.Strings(elected)
	sort.Strings(noop)
	sort.Slice(failed, func(i, j int) bool { return failed[i].tp < failed[j].tp })
	if len(elected) > 0 {
		fmt.Fprintf(stdout, "Successfully completed leader election (%s) for partitions %s\n", kind, strings.Join(elected, ", "))
	}
	if len(noop) > 0 {
		fmt.Fprintf(stdout, "Valid replica already elected for partitions %s\n", strings.Join(noop, ", "))
	}
	if len(failed) == 0 {
		return 0
	}
	for _, f := range failed {
		fmt.Fprintf(stdout, "Error completing leader election (%s) for partition: %s: %s\n", kind, f.tp, f.why)
	}
	fmt.Fprintf(stderr, "%d replica(s) could not be elected\n", len(failed))
	return 1
}
