package kafkascripts

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/clustertest"
)

func runDeleteRecords(t *testing.T, bootstrap, offsetJSON string) (code int, stdout, stderr string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "offsets.json")
	if err := os.WriteFile(file, []byte(offsetJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errw bytes.Buffer
	code = DeleteRecords([]string{"--bootstrap-server", bootstrap, "--offset-json-file", file}, &out, &errw)
	return code, out.String(), errw.String()
}

// kafka-delete-records.sh prints each partition's low watermark, or its
// error as the Java client names it; the log start moved where it was asked
// (-1: the high watermark). A bad file is refused before anything is sent.
func TestDeleteRecordsScript(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	b := c.KafkaAddrs()[0]
	createTopic(t, b, "--topic", "logs", "--partitions", "2", "--replication-factor", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p, n := range map[int32]int{0: 4, 1: 2} {
		for range n {
			if _, err := c.Produce(ctx, "logs", p, -1, "v"); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, out, errOut := runDeleteRecords(t, b, `{"partitions": [{"topic": "logs", "partition": 0, "offset": 3},
		{"topic": "logs", "partition": 1, "offset": -1}], "version": 1}`)
	want := "Executing records delete operation\nRecords delete operation completed:\n" +
		"partition: logs-0\tlow_watermark: 3\npartition: logs-1\tlow_watermark: 2\n"
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want stdout %q", code, out, errOut, want)
	}
	code, out, _ = runDeleteRecords(t, b, `{"partitions": [{"topic": "logs", "partition": 0, "offset": 9}]}`)
	if code != 0 || !strings.Contains(out, "partition: logs-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: ") {
		t.Fatalf("offset past the HW: exit %d, stdout %q", code, out)
	}
	code, _, errOut = runDeleteRecords(t, b, `{"partitions": [{"topic": "logs", "partition": 0, "offset": 1}, {"topic": "logs", "partition": 0, "offset": 2}]}`)
	if code != 1 || errOut != "Offset json file contains duplicate topic partitions: logs-0\n" {
		t.Fatalf("a partition twice: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runDeleteRecords(t, b, `{"version": 1}`)
	if code != 1 || errOut != "Missing partitions field\n" {
		t.Fatalf("no partitions: exit %d, stderr %q", code, errOut)
	}
}
