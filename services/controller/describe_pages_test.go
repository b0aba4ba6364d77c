package controller

import (
	"slices"
	"testing"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
)

// The active controller answers DescribeTopics of every topic in name
// order, a page at a time when asked: each token leads to the next page, a
// filter's non-matching topics take no place in a page, topics created or
// deleted between pages are neither repeated nor skipped past, and a bad
// token or a token beside named topics is refused INVALID_REQUEST. The
// gateway relays these pages over REST.
func TestDescribeTopicsInPages(t *testing.T) {
	c := newCluster(t)
	c1 := c.startController(1, func(cfg *Config) { cfg.DefaultReplicationFactor = 2; cfg.NumPartitions = 1 })
	c.waitActive(c1, 5*time.Second)
	c.startBrokers(c1, 2)
	admin := c.admin(c1)
	create := func(names ...string) {
		t.Helper()
		var specs []*adminv1.TopicSpec
		for _, n := range names {
			specs = append(specs, &adminv1.TopicSpec{Name: n})
		}
		resp, err := admin.CreateTopics(ctx(t), &adminv1.CreateTopicsRequest{TimeoutMs: 5000, Topics: specs})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetResults() {
			if r.GetErrorCode() != 0 {
				t.Fatalf("create %s: %s", r.GetName(), r.GetErrorMessage())
			}
		}
	}
	create("pa", "pb", "pc", "pd", "pe")
	page := func(req *adminv1.DescribeTopicsRequest) ([]string, string) {
		t.Helper()
		d, err := admin.DescribeTopics(ctx(t), req)
		if err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		var names []string
		for _, td := range d.GetTopics() {
			names = append(names, td.GetName())
		}
		return names, d.GetNextPageToken()
	}

	var pages [][]string
	for token := ""; len(pages) < 10; {
		names, next := page(&adminv1.DescribeTopicsRequest{PageSize: 2, PageToken: token})
		pages = append(pages, names)
		if next == "" {
			break
		}
		token = next
		if len(pages) == 1 {
			// Between pages: one topic before the token, one after it
			// and one already served deleted.
			create("pa0", "pc0")
			if r, err := admin.DeleteTopics(ctx(t), &adminv1.DeleteTopicsRequest{Topics: []string{"pa"}, TimeoutMs: 5000}); err != nil || r.GetResults()[0].GetErrorCode() != 0 {
				t.Fatalf("delete pa: %v %v", r, err)
			}
		}
	}
	if want := [][]string{{"pa", "pb"}, {"pc", "pc0"}, {"pd", "pe"}}; !slices.EqualFunc(pages, want, slices.Equal) {
		t.Errorf("pages of 2 = %v, want %v", pages, want)
	}
	if all, next := page(&adminv1.DescribeTopicsRequest{}); next != "" || !slices.Equal(all, []string{"pa0", "pb", "pc", "pc0", "pd", "pe"}) {
		t.Errorf("no page size: %v (next %q), want every topic in one answer", all, next)
	}

	// A filter: only pd is under-replicated, and the other topics take no
	// place in its pages.
	c.shrinkISR(c1, "pd", 0, c.state("pd", 0).Leader)
	eventually(t, 5*time.Second, "pd under-replicated", func() bool {
		names, _ := page(&adminv1.DescribeTopicsRequest{UnderReplicated: true})
		return slices.Equal(names, []string{"pd"})
	})
	if names, next := page(&adminv1.DescribeTopicsRequest{UnderReplicated: true, PageSize: 1}); !slices.Equal(names, []string{"pd"}) {
		t.Errorf("under-replicated in pages of 1: %v (next %q), want [pd]", names, next)
	} else if next != "" {
		if rest, _ := page(&adminv1.DescribeTopicsRequest{UnderReplicated: true, PageSize: 1, PageToken: next}); len(rest) != 0 {
			t.Errorf("under-replicated after pd: %v, want nothing", rest)
		}
	}

	for _, bad := range []*adminv1.DescribeTopicsRequest{
		{PageSize: 2, PageToken: "!!not a token"},
		{PageSize: -1},
		{Topics: []string{"pb"}, PageToken: "cGI"},
	} {
		if _, err := admin.DescribeTopics(ctx(t), bad); kerr.FromStatus(err).Code != kerr.InvalidRequest {
			t.Errorf("%v: %v, want INVALID_REQUEST", bad, err)
		}
	}
}
