package group

import (
	"context"
	"slices"
	"testing"
	"time"

	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/paging"
)

// ListGroups answers a page at a time in group id order when asked for
// pages, leaving out (without a place in the page) the groups its caller
// may not see; page_size 0 and no token still answers every group.
func TestListGroupsInPages(t *testing.T) {
	h := newFakeHost(1)
	h.leads[0] = 1
	c := New(Options{Host: h, Tick: time.Hour})
	defer c.Close()
	s := &Service{C: c}
	waitUntil(t, "the load", func() bool { c.reconcile(); _, code := fetchErr(s, "g"); return code == kerr.None })
	ctx := context.Background()
	for _, id := range []string{"g4", "g1", "hidden", "g3", "g2", "g5"} {
		if _, err := s.OffsetCommit(ctx, &groupv1.OffsetCommitRequest{GroupId: id, GenerationId: -1,
			Topics: []*groupv1.OffsetCommitTopic{{Name: "orders", Partitions: []*groupv1.OffsetCommitPartition{{Partition: 0, CommittedOffset: 1}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(ctx context.Context, size int32) [][]string {
		t.Helper()
		var pages [][]string
		token := ""
		for len(pages) < 10 {
			r, err := s.ListGroups(ctx, &groupv1.ListGroupsRequest{PageSize: size, PageToken: token})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, g := range r.GetGroups() {
				ids = append(ids, g.GetGroupId())
			}
			pages = append(pages, ids)
			if token = r.GetNextPageToken(); token == "" {
				return pages
			}
		}
		t.Fatalf("pages never ended: %v", pages)
		return nil
	}
	if got, want := walk(ctx, 0), [][]string{{"g1", "g2", "g3", "g4", "g5", "hidden"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("unpaged: %v, want %v", got, want)
	}
	if got, want := walk(ctx, 2), [][]string{{"g1", "g2"}, {"g3", "g4"}, {"g5", "hidden"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("pages of 2: %v, want %v", got, want)
	}
	shown := paging.WithVisible(ctx, func(id string) bool { return id != "hidden" })
	if got, want := walk(shown, 5), [][]string{{"g1", "g2", "g3", "g4", "g5"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("pages of 5 without the hidden group: %v, want %v", got, want)
	}
	for _, bad := range []*groupv1.ListGroupsRequest{{PageSize: -1}, {PageToken: "nope"}} {
		_, err := s.ListGroups(ctx, bad)
		if ke := kerr.As(err); ke == nil || ke.Code != kerr.InvalidRequest || ke.Field == "" {
			t.Errorf("ListGroups(%v): %v, want INVALID_REQUEST naming the field", bad, err)
		}
	}
}
