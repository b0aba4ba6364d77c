// Package kafkascripts holds the Kafka distribution's command-line scripts
// that tidemark answers to by name, speaking the Kafka wire protocol to a
// broker's Kafka listener with Kafka's flags and Kafka's output: guides and
// scripts written for Kafka call them by their path in Kafka's images
// (/opt/kafka/bin/NAME.sh), and the tidemark image, which has no shell,
// links that path to the tidemark binary, which runs the script its name
// (argv[0]) names; `make build` links the same names in bin/ for the host.
package kafkascripts

import (
	"io"
	"path/filepath"
	"sort"
)

// Dir is where Kafka's images keep the scripts, and where the tidemark
// image links them.
const Dir = "/opt/kafka/bin"

// script runs one script with its arguments and returns its exit code.
type script func(args []string, stdout, stderr io.Writer) int

var scripts = map[string]script{
	"kafka-broker-api-versions.sh": BrokerAPIVersions,
	"kafka-acls.sh":                ACLs,
	"kafka-consumer-groups.sh":     ConsumerGroups,
	"kafka-configs.sh":             Configs,
	"kafka-delete-records.sh":      DeleteRecords,
	"kafka-console-consumer.sh":    consoleConsumerMain,
	"kafka-console-producer.sh":    consoleProducerMain,
	"kafka-get-offsets.sh":         GetOffsets,
	"kafka-leader-election.sh":     LeaderElection,
	"kafka-reassign-partitions.sh": ReassignPartitions,
	"kafka-topics.sh":              Topics,
}

// Lookup returns the script a program named argv0 (a path or a base name)
// stands for, or nil when the name is not one of them.
func Lookup(argv0 string) func(args []string, stdout, stderr io.Writer) int {
	if s, ok := scripts[filepath.Base(argv0)]; ok {
		return s
	}
	return nil
}

// Names lists the scripts' names, sorted (the image links each one in
// Dir, and `make build` each one in bin/).
func Names() []string {
	names := make([]string, 0, len(scripts))
	for n := range scripts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
