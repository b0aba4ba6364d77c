package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// page is what a list answer carries, whatever the list: topics (by name)
// or groups (by groupId), and the token of the next page.
type page struct {
	Topics []struct {
		Name string `json:"name"`
	} `json:"topics"`
	Groups []struct {
		GroupID string `json:"groupId"`
	} `json:"groups"`
	NextPageToken string `json:"nextPageToken"`
}

func (p page) names() []string {
	var out []string
	for _, t := range p.Topics {
		out = append(out, t.Name)
	}
	for _, g := range p.Groups {
		out = append(out, g.GroupID)
	}
	return out
}

// walkPages lists path page by page, size items at a time, following
// nextPageToken until it is empty, and returns every name in the order
// served. Each page must hold at most size items, and every page but the
// last exactly size.
func walkPages(t *testing.T, r *rest, path string, size int) []string {
	t.Helper()
	var all []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("%s: still more pages after 100", path)
		}
		q := fmt.Sprintf("%s?pageSize=%d", path, size)
		if token != "" {
			q += "&pageToken=" + token
		}
		var p page
		r.ok(http.MethodGet, q, nil, &p)
		got := p.names()
		if len(got) > size {
			t.Fatalf("%s: %d items in a page of %d: %v", q, len(got), size, got)
		}
		if p.NextPageToken != "" && len(got) != size {
			t.Fatalf("%s: a page of %d items (want %d) before the last: %v", q, len(got), size, got)
		}
		all = append(all, got...)
		if p.NextPageToken == "" {
			return all
		}
		token = p.NextPageToken
	}
}

// TestRESTListsInPages lists topics, metadata and groups two at a time:
// the pages together hold every item once, in name order, exactly what one
// unpaged answer holds, and the last page's token is empty. A malformed
// token or a negative size is a 400 naming the field.
func TestRESTListsInPages(t *testing.T) {
	tc := startCluster(t)
	g := startGateway(t, tc, nil)
	r := newREST(t, g)
	e := &env{tc: tc, g: g, r: r}

	// Created in an order that is not the names' order.
	topics := []string{"pages-e", "pages-a", "pages-d", "pages-b", "pages-c"}
	for _, name := range topics {
		e.call(http.MethodPost, "/v1/topics", fmt.Sprintf(`{"topics": [{"name": %q, "numPartitions": 1, "replicationFactor": 1}], "timeoutMs": 10000}`, name), nil)
	}
	e.call(http.MethodPost, "/v1/topics/pages-a/partitions/0/records", produceBody(-1, "x"), nil)
	groups := []string{"grp-3", "grp-1", "grp-5", "grp-2", "grp-4"}
	for _, id := range groups {
		e.call(http.MethodPost, "/v1/groups/"+id+"/offsets",
			`{"generationId": -1, "topics": [{"name": "pages-a", "partitions": [{"partition": 0, "committedOffset": 1, "committedLeaderEpoch": -1}]}]}`, nil)
	}

	for _, path := range []string{"/v1/topics", "/v1/metadata", "/v1/groups"} {
		t.Run(strings.TrimPrefix(path, "/v1/"), func(t *testing.T) {
			r := e.with(t).r
			var whole page
			r.ok(http.MethodGet, path, nil, &whole)
			want := whole.names()
			if whole.NextPageToken != "" {
				t.Fatalf("%s unpaged: nextPageToken %q with %d items", path, whole.NextPageToken, len(want))
			}
			created := topics
			if path == "/v1/groups" {
				created = groups
			}
			for _, name := range created {
				if !slices.Contains(want, name) {
					t.Fatalf("%s: %s missing from %v", path, name, want)
				}
			}
			if !slices.IsSorted(want) {
				t.Fatalf("%s unpaged: not in name order: %v", path, want)
			}
			got := walkPages(t, r, path, 2)
			if !slices.Equal(got, want) {
				t.Fatalf("%s in pages of 2: %v, want %v", path, got, want)
			}
			// A page as large as the list is the last one.
			var one page
			r.ok(http.MethodGet, fmt.Sprintf("%s?pageSize=%d", path, len(want)), nil, &one)
			if !slices.Equal(one.names(), want) || one.NextPageToken != "" {
				t.Fatalf("%s in one page of %d: %v, token %q", path, len(want), one.names(), one.NextPageToken)
			}

			for _, bad := range []struct{ query, field string }{
				{"pageToken=not%20a%20token!", "page_token"},
				{"pageSize=-1", "page_size"},
			} {
				eb := r.fails(http.MethodGet, path+"?"+bad.query, nil, http.StatusBadRequest, "INVALID_REQUEST")
				if eb.Field != bad.field {
					t.Fatalf("%s?%s: field %q, want %q (%s)", path, bad.query, eb.Field, bad.field, eb.Message)
				}
			}
		})
	}

	// A health filter leaves topics out before the page is cut: on a
	// healthy cluster no topic is unavailable, and the one page says so.
	var none page
	r.ok(http.MethodGet, "/v1/topics?unavailable=true&pageSize=1", nil, &none)
	if len(none.names()) != 0 || none.NextPageToken != "" {
		t.Fatalf("unavailable topics in pages of 1: %v, token %q", none.names(), none.NextPageToken)
	}

	// Naming topics answers them all: a token there is refused.
	eb := r.fails(http.MethodGet, "/v1/topics?topics=pages-a&pageToken="+pageTokenOf(t, r, "/v1/topics"), nil, http.StatusBadRequest, "INVALID_REQUEST")
	if eb.Field != "page_token" {
		t.Fatalf("a token with topics named: field %q (%s)", eb.Field, eb.Message)
	}
}

// pageTokenOf is the token after the first item of path's list.
func pageTokenOf(t *testing.T, r *rest, path string) string {
	t.Helper()
	var p page
	r.ok(http.MethodGet, path+"?pageSize=1", nil, &p)
	if p.NextPageToken == "" {
		t.Fatalf("%s?pageSize=1: no next page: %v", path, p.names())
	}
	return p.NextPageToken
}

// The REST default: a list asked without a page size answers at most
// maxRESTPageSize items, and a larger size is taken down to it.
func TestRESTPageSizeDefaultsAndCap(t *testing.T) {
	for _, c := range []struct{ asked, want int32 }{{0, maxRESTPageSize}, {1, 1}, {maxRESTPageSize, maxRESTPageSize}, {maxRESTPageSize + 1, maxRESTPageSize}, {1 << 30, maxRESTPageSize}} {
		got, err := restPageSize(c.asked)
		if err != nil || got != c.want {
			t.Errorf("restPageSize(%d) = %d, %v; want %d", c.asked, got, err, c.want)
		}
	}
	if _, err := restPageSize(-1); err == nil || !strings.Contains(err.Error(), "page_size") {
		t.Errorf("restPageSize(-1): %v, want an error naming page_size", err)
	}
}
