package console

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
)

// A controller's WatchCluster starts every stream with its recent events
// (a ring of 512). When the console's watch reopens (the stream broke, or the
// hub restarted after idleStop), the events the console already relayed must
// not reach an open page a second time: the page dedups by seq only, so a
// replayed event with a new seq is drawn twice in the timeline.
func TestReplayedEventsAreNotRelayedTwice(t *testing.T) {
	f, _, hs := startFakeCtl(t, Options{WatchInterval: time.Second, StaleAfter: 3 * time.Second})
	base := time.Now().Add(-time.Minute).UnixMilli()
	var ring []*controlv1.ClusterEvent
	for i := range 150 { // more HW advances than keepHWEvents (100); the controller keeps 512
		ring = append(ring, &controlv1.ClusterEvent{Time: base + int64(i), Kind: controlv1.EventKind_EVENT_KIND_HW_ADVANCE,
			Topic: "t", Partition: 0, NodeId: 1, Reason: fmt.Sprintf("HW %d -> %d", i, i+1)})
	}
	evs := openEvents(t, hs.URL)
	f.msgs <- watchMsg("t", 150, ring...)

	seen := map[string]int{}
	patches := 0
	read := func(until func() bool) {
		deadline := time.After(10 * time.Second)
		for !until() {
			select {
			case ev, ok := <-evs:
				if !ok {
					t.Fatal("stream ended")
				}
				switch ev.name {
				case "events":
					var list []eventView
					if err := json.Unmarshal([]byte(ev.data), &list); err != nil {
						t.Fatal(err)
					}
					for _, e := range list {
						seen[fmt.Sprint(e.Time, e.Kind, e.Reason)]++
					}
				case "snapshot", "patch":
					patches++
				}
			case <-deadline:
				t.Fatalf("timed out; %d distinct events, %d snapshots/patches", len(seen), patches)
			}
		}
	}
	read(func() bool { return len(seen) == 150 && patches >= 1 })

	// The stream breaks; the client reopens it and the controller replays its ring.
	f.msgs <- nil
	f.msgs <- watchMsg("t", 150, ring...)
	f.msgs <- watchMsg("t", 151)
	read(func() bool { return patches >= 3 })

	dups := 0
	for k, n := range seen {
		if n > 1 {
			dups++
			if dups <= 3 {
				t.Errorf("event %s relayed %d times to the same page", k, n)
			}
		}
	}
	if dups > 0 {
		t.Fatalf("%d of 150 events were relayed to the page twice after the watch reopened", dups)
	}
}

var _ = adminv1.WatchClusterResponse{}
