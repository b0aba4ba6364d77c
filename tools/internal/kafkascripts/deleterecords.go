package kafkascripts

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// recordsToDelete is one entry of Kafka's offset JSON file.
type recordsToDelete struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// DeleteRecords is kafka-delete-records.sh: DeleteRecords (KIP-107) for
// the partitions an offset JSON file lists ({"partitions": [{"topic": "t",
// "partition": 0, "offset": 5}], "version": 1}; offset -1 is the high
// watermark), each sent to its partition's leader. As Kafka's tool it
// prints each partition's low watermark or its error, and exits 0 once
// the requests were answered, whatever the partitions' errors.
func DeleteRecords(args []string, stdout, stderr io.Writer) int {
	var bootstrap, file, config string
	fs := deleteRecordsFlags(&bootstrap, &file, &config)
	err := parseKafkaFlags(fs, args)
	if err == nil {
		err = requireOption(fs, "bootstrap-server")
	}
	if err == nil {
		err = requireOption(fs, "offset-json-file")
	}
	if code, done := parseOutcome(err, deleteRecordsAbout, deleteRecordsUsage, stdout, stderr, nil); done {
		return code
	}
	offsets, err := readDeleteRecordsFile(file)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	opts, err := commandConfig(config)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(splitBootstrap(bootstrap)...), kgo.ClientID("DeleteRecordsCommand")}, opts...)...)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(requestTimeout.Milliseconds()))
	var asked kadm.Offsets
	for _, r := range offsets {
		asked.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.Offset})
	}
	fmt.Fprintln(stdout, "Executing records delete operation")
	ctx, cancel := context.WithTimeout(context.Background(), 2*requestTimeout)
	defer cancel()
	resps, err := adm.DeleteRecords(ctx, asked)
	if err != nil && len(resps) == 0 {
		fmt.Fprintln(stderr, javaException(err))
		return 1
	}
	fmt.Fprintln(stdout, "Records delete operation completed:")
	for _, r := range offsets {
		fmt.Fprintln(stdout, deleteRecordsLine(resps, r, err))
	}
	return 0
}

// deleteRecordsLine is one partition's outcome, as Kafka's tool prints it.
func deleteRecordsLine(resps kadm.DeleteRecordsResponses, r recordsToDelete, requestErr error) string {
	tp := topicPartition{Topic: r.Topic, Partition: r.Partition}
	resp, ok := resps.Lookup(r.Topic, r.Partition)
	switch {
	case !ok && requestErr != nil:
		return fmt.Sprintf("partition: %s\terror: %s", tp, javaException(requestErr))
	case !ok:
		return fmt.Sprintf("partition: %s\terror: no answer", tp)
	case resp.Err != nil:
		return fmt.Sprintf("partition: %s\terror: %s", tp, javaException(resp.Err))
	}
	return fmt.Sprintf("partition: %s\tlow_watermark: %d", tp, resp.LowWatermark)
}

const deleteRecordsAbout = "This tool helps to delete records of the given partitions down to the specified offset."

func deleteRecordsFlags(bootstrap, file, config *string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-delete-records.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(bootstrap, "bootstrap-server", "", "REQUIRED: the server to connect to, host:port; several comma-separated are tried in order")
	fs.StringVar(file, "offset-json-file", "", `REQUIRED: the JSON file with offsets per partition: {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}; offset -1 is the high watermark`)
	fs.StringVar(config, "command-config", "", "a property file with the admin client's configs (security)")
	return fs
}

func deleteRecordsUsage() string {
	var b, f, c string
	return "Option:\n" + deleteRecordsFlags(&b, &f, &c).FlagUsages()
}

// readDeleteRecordsFile reads Kafka's offset JSON file: version 1 (or
// none), a "partitions" list, no partition twice.
func readDeleteRecordsFile(path string) ([]recordsToDelete, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Version    *int               `json:"version"`
		Partitions *[]recordsToDelete `json:"partitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Version != nil && *doc.Version != 1 {
		return nil, fmt.Errorf("Not supported version field value %d", *doc.Version)
	}
	if doc.Partitions == nil {
		return nil, fmt.Errorf("Missing partitions field")
	}
	seen := map[topicPartition]bool{}
	var dups []string
	for _, r := range *doc.Partitions {
		tp := topicPartition{Topic: r.Topic, Partition: r.Partition}
		if seen[tp] {
			dups = append(dups, tp.String())
		}
		seen[tp] = true
	}
	if len(dups) > 0 {
		sort.Strings(dups)
		return nil, fmt.Errorf("Offset json file contains duplicate topic partitions: %s", strings.Join(dups, ","))
	}
	return *doc.Partitions, nil
}
