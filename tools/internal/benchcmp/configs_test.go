package benchcmp

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
)

// An experiment's topic and broker configs reach the cluster and are
// named in the report, and a malformed one stops the run before anything
// starts.
func TestExperimentConfigsReachTheClusterAndTheReport(t *testing.T) {
	side := &tidemarkSide{dir: t.TempDir(), brokerConfigs: []string{"log.retention.check.interval.ms=1000", "num.io.threads=4"}}
	want := []string{"--config", "log.retention.check.interval.ms=1000", "--config", "num.io.threads=4"}
	if got := side.clusterOptions(30000).BrokerArgs; !slices.Equal(got, want) {
		t.Errorf("broker args %q; want %q", got, want)
	}
	r := &Result{Rows: []Row{{Shape: Shape{Name: "batch-1k", Mode: Batch, Size: 1024}}},
		TopicConfigs: []string{"segment.bytes=268435456"}, BrokerConfigs: []string{"log.retention.check.interval.ms=1000"}}
	md := r.Markdown()
	for _, s := range []string{", segment.bytes=268435456", ", broker log.retention.check.interval.ms=1000"} {
		if !strings.Contains(md, s) {
			t.Errorf("the report does not say %q:\n%s", s, md)
		}
	}
	for _, o := range []Options{{TopicConfigs: []string{"segment.bytes"}}, {BrokerConfigs: []string{"=1000"}}} {
		_, err := Run(context.Background(), o, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "want key=value") {
			t.Errorf("options %+v: err %v; want one asking for key=value", o, err)
		}
	}
}
