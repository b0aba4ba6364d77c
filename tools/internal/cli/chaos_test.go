package cli

import (
	"fmt"
	"testing"
)

// A failing run's replay command keeps the flags that shape its schedule
// and cluster (a run of only some steps replayed with all of them is
// another run), not those that pick runs or places.
func TestChaosReplayKeepsTheScheduleFlags(t *testing.T) {
	cmd := newChaosRunCmd(&globals{})
	if err := cmd.ParseFlags([]string{"--seed", "5", "--seconds", "40", "--runs", "3", "--steps", "pause,kill",
		"--lag-time", "1s", "--bin-dir", "/tmp/b", "--data-dir", "/tmp/d", "--budget", "1m"}); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf(chaosReplay(cmd.Flags(), 40, true), 7)
	want := "bin/tidemark chaos run --seed 7 --seconds 40 --plaintext --bin-dir=/tmp/b --lag-time=1s --steps=pause,kill"
	if got != want {
		t.Fatalf("replay\n got %s\nwant %s", got, want)
	}
}
