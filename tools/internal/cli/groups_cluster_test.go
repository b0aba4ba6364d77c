package cli_test

import (
	"regexp"
	"strings"
	"testing"

	"tidemark.io/services/platform/testenv"
	"tidemark.io/tools/internal/cli"
)

// describeRow matches a row of groups describe: GROUP TOPIC PARTITION
// CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID.
var describeRow = regexp.MustCompile(`(?m)^pay\s+payments\s+(\d)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$`)

func TestConsumerGroupsFromTheCLI(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: starts a cluster")
	}
	c := startCluster(t)
	c.run(t, "", "topics", "create", "--topic", "payments", "--partitions", "2", "--replication-factor", "3").ok(t)
	c.run(t, "a\nb\nc\n", "produce", "--topic", "payments", "--partition", "0").ok(t)
	c.run(t, "d\ne\n", "produce", "--topic", "payments", "--partition", "1").ok(t)

	// A member reads three records and stops: the group committed exactly
	// what it printed, and the next member goes on from there.
	r := c.run(t, "", "consume", "--topic", "payments", "--group", "pay", "--from-beginning", "--max-messages", "3").ok(t)
	if n := len(lines(r.out)); n != 3 {
		t.Fatalf("first member printed %d records:\n%s", n, r.out)
	}
	contains(t, r.err, "Consumed 3 records.")
	r2 := c.run(t, "", "consume", "--topic", "payments", "--group", "pay", "--from-beginning", "--timeout-ms", "2000").ok(t)
	if got := strings.Join(append(lines(r.out), lines(r2.out)...), ""); len(got) != 5 || !sameLetters(got, "abcde") {
		t.Fatalf("the two members printed %q then %q: want a..e once each", r.out, r2.out)
	}

	r = c.run(t, "", "groups", "list").ok(t)
	contains(t, r.out, "pay\n")
	r = c.run(t, "", "groups", "list", "--state").ok(t)
	if !regexp.MustCompile(`(?m)^pay\s+Empty\s*$`).MatchString(r.out) {
		t.Fatalf("groups list --state:\n%s", r.out)
	}
	r = c.run(t, "", "groups", "describe", "pay").ok(t)
	contains(t, r.out, "Consumer group 'pay' has no active members.",
		"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
	rows := describeRow.FindAllStringSubmatch(r.out, -1)
	if len(rows) != 2 {
		t.Fatalf("describe has %d partition rows:\n%s", len(rows), r.out)
	}
	for _, row := range rows {
		if row[2] != row[3] || row[4] != "0" || row[5] != "-" {
			t.Fatalf("after reading everything: %q (want CURRENT-OFFSET = LOG-END-OFFSET, LAG 0, no consumer)", row[0])
		}
	}
	// Named with --group, as kafka-consumer-groups takes it.
	r = c.run(t, "", "groups", "describe", "--group", "pay", "--state").ok(t)
	if !regexp.MustCompile(`(?m)^pay\s+\S+ \(\d\)\s+\S+\s+Empty\s+0\s*$`).MatchString(r.out) {
		t.Fatalf("describe --state:\n%s", r.out)
	}

	// Reset: a dry run changes nothing; --execute moves the offsets.
	r = c.run(t, "", "groups", "reset-offsets", "--group", "pay", "--topic", "payments", "--to-earliest").ok(t)
	contains(t, r.out, "NEW-OFFSET")
	contains(t, r.err, "Dry run")
	if !regexp.MustCompile(`(?m)^pay\s+payments\s+0\s+0\s*$`).MatchString(r.out) {
		t.Fatalf("reset dry run:\n%s", r.out)
	}
	r = c.run(t, "", "groups", "describe", "pay").ok(t)
	for _, row := range describeRow.FindAllStringSubmatch(r.out, -1) {
		if row[4] != "0" {
			t.Fatalf("a dry run moved an offset: %q", row[0])
		}
	}
	c.run(t, "", "groups", "reset-offsets", "--group", "pay", "--topic", "payments:0", "--to-offset", "1", "--execute").ok(t)
	r = c.run(t, "", "groups", "describe", "pay").ok(t)
	for _, row := range describeRow.FindAllStringSubmatch(r.out, -1) {
		if row[1] == "0" && (row[2] != "1" || row[4] != "2") {
			t.Fatalf("after --to-offset 1: %q, want CURRENT-OFFSET 1, LAG 2", row[0])
		}
	}
	r = c.run(t, "", "consume", "--topic", "payments", "--group", "pay", "--timeout-ms", "2000").ok(t)
	if r.out != "b\nc\n" {
		t.Fatalf("after the reset the group read %q, want b and c", r.out)
	}

	c.run(t, "", "groups", "reset-offsets", "--group", "pay", "--all-topics", "--to-datetime", "yesterday").fails(t, cli.ExitUsage, "--to-datetime")
	r = c.run(t, "", "groups", "delete-offsets", "--group", "pay", "--topic", "payments:1").ok(t)
	if !regexp.MustCompile(`(?m)^payments\s+1\s+Successful\s*$`).MatchString(r.out) {
		t.Fatalf("delete-offsets:\n%s", r.out)
	}
	r = c.run(t, "", "groups", "describe", "pay").ok(t)
	for _, row := range describeRow.FindAllStringSubmatch(r.out, -1) {
		if row[1] == "1" && row[2] != "-" || row[1] == "0" && row[2] != "3" {
			t.Fatalf("after delete-offsets of payments-1: %q, want partition 0 kept and 1 without an offset", row[0])
		}
	}
	c.run(t, "", "groups", "delete-offsets", "--group", "pay", "--topic", "nosuch:0").fails(t, cli.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
	c.run(t, "", "groups", "delete-offsets", "--topic", "payments").fails(t, cli.ExitUsage, "--group")
	r = c.run(t, "", "groups", "delete", "pay").ok(t)
	contains(t, r.out, "Deletion of requested consumer groups ('pay') was successful.")
	if r := c.run(t, "", "groups", "list").ok(t); strings.Contains(r.out, "pay\n") {
		t.Fatalf("deleted group still listed:\n%s", r.out)
	}
	c.run(t, "", "groups", "delete", "--group", "pay").fails(t, cli.ExitFailed, "GROUP_ID_NOT_FOUND")

	r = c.run(t, "", "perf", "commit", "--topic", "payments", "--members", "2", "--num-commits", "40").ok(t)
	if !regexp.MustCompile(`(?m)^40 commits by 2 members, [\d.]+ commits/s, latency .* p99`).MatchString(r.out) {
		t.Fatalf("perf commit:\n%s", r.out)
	}
	if r := c.run(t, "", "groups", "list").ok(t); strings.Contains(r.out, "tidemark-perf-commit-") {
		t.Fatalf("perf commit left its group behind:\n%s", r.out)
	}
}

func sameLetters(got, want string) bool {
	for _, r := range want {
		if strings.Count(got, string(r)) != 1 {
			return false
		}
	}
	return true
}
