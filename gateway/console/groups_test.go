package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"tidemark.io/gateway"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/testenv"
)

type groupsJSON struct {
	Groups []struct {
		ID         string `json:"id"`
		State      string `json:"state"`
		Protocol   string `json:"protocol"`
		Generation int32  `json:"generation"`
		Members    []struct {
			ID       string   `json:"id"`
			ClientID string   `json:"clientId"`
			Assigned []string `json:"assigned"`
		} `json:"members"`
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Committed int64  `json:"committed"`
			HW        int64  `json:"hw"`
			Lag       int64  `json:"lag"`
			Member    string `json:"member"`
		} `json:"partitions"`
		TotalLag int64 `json:"totalLag"`
	} `json:"groups"`
}

func getGroups(t *testing.T, base string) groupsJSON {
	t.Helper()
	resp, err := http.Get(base + "/console/api/groups")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out groupsJSON
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /console/api/groups: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// startGroupMember runs a member of group over topic that reads everything
// there is, commits it, and keeps heartbeating until the test ends.
func startGroupMember(t *testing.T, tc *testCluster, group, topic string, records int) *client.GroupConsumer {
	t.Helper()
	cl, err := client.New(tc.brokers, client.Options{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	gc, err := client.NewGroupConsumer(cl, client.GroupOptions{GroupID: group, Topics: []string{topic},
		ClientID: "console-test", AutoOffsetReset: "earliest", DisableAutoCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gc.Abandon)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for n := 0; n < records; {
		recs, err := gc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(recs)
	}
	if err := gc.CommitSync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return gc
}

// The groups API shows a group with its member, the member's assignment
// and the lag of each partition, which grows when records are written.
func TestGroupsView(t *testing.T) {
	testenv.SkipIfShort(t, "starts a cluster")
	tc := startCluster(t)
	tc.CreateTopic("orders", 2, 3, nil)
	srv := serveGateway(t, tc, gateway.ConsoleOptions{})
	if g := getGroups(t, srv); len(g.Groups) != 0 {
		t.Fatalf("groups before any consumer: %+v", g)
	}
	for p := range int32(2) {
		for range 3 {
			if _, err := tc.Produce(context.Background(), "orders", p, -1, "x"); err != nil {
				t.Fatal(err)
			}
		}
	}
	startGroupMember(t, tc, "shipping", "orders", 6)
	var g groupsJSON
	deadline := time.Now().Add(10 * time.Second)
	for g = getGroups(t, srv); len(g.Groups) != 1 || g.Groups[0].State != "Stable"; g = getGroups(t, srv) {
		if time.Now().After(deadline) {
			t.Fatalf("groups: %+v", g)
		}
		time.Sleep(100 * time.Millisecond)
	}
	v := g.Groups[0]
	if v.ID != "shipping" || v.State != "Stable" || len(v.Members) != 1 || len(v.Members[0].Assigned) != 2 ||
		v.Members[0].ClientID != "console-test" || len(v.Partitions) != 2 || v.TotalLag != 0 {
		t.Fatalf("group view: %+v", v)
	}
	for _, p := range v.Partitions {
		if p.Committed != 3 || p.HW != 3 || p.Lag != 0 || p.Member != v.Members[0].ID {
			t.Fatalf("partition row: %+v", p)
		}
	}
	if _, err := tc.Produce(context.Background(), "orders", 1, -1, "y"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for g := getGroups(t, srv); len(g.Groups) != 1 || g.Groups[0].TotalLag != 1; g = getGroups(t, srv) {
		if time.Now().After(deadline) {
			t.Fatalf("after one more record: %+v", g)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
