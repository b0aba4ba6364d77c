package paging

import (
	"context"
	"slices"
	"strings"
	"testing"

	"tidemark.io/services/platform/kerr"
)

// walk serves every page of names (in name order) size at a time for a
// caller shown what visible allows, as a list handler does, and returns the
// pages.
func walk(t *testing.T, ctx context.Context, names []string, size int32) [][]string {
	t.Helper()
	var pages [][]string
	token := ""
	for len(pages) <= len(names) {
		req, err := Parse(size, token)
		if err != nil {
			t.Fatalf("Parse(%d, %q): %v", size, token, err)
		}
		cur := NewCursor(ctx, req)
		var page []string
		for _, n := range req.From(names) {
			if cur.Skip(n) {
				continue
			}
			if !cur.Take(n) {
				break
			}
			page = append(page, n)
		}
		pages = append(pages, page)
		if token = cur.Next(); token == "" {
			return pages
		}
		if strings.Contains(token, page[len(page)-1]) {
			t.Fatalf("token %q shows the name %q as it is", token, page[len(page)-1])
		}
	}
	t.Fatalf("pages of %v never ended: %v", names, pages)
	return nil
}

func TestPagesCoverTheListOnceInOrder(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	got := walk(t, context.Background(), names, 2)
	if want := [][]string{{"a", "b"}, {"c", "d"}, {"e"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("pages of 2: %v, want %v", got, want)
	}
	// A list that ends with a full page ends there, with no empty page
	// after it: the cursor looks one name past the page.
	if got := walk(t, context.Background(), names[:4], 2); len(got) != 2 {
		t.Fatalf("4 names in pages of 2: %v", got)
	}
	// Size 0 with no token is the whole list at once.
	if got := walk(t, context.Background(), names, 0); len(got) != 1 || !slices.Equal(got[0], names) {
		t.Fatalf("unpaged: %v", got)
	}
}

func TestPagesLeaveOutWhatTheCallerMayNotSee(t *testing.T) {
	names := []string{"a", "hidden-1", "b", "hidden-2", "c"}
	slices.Sort(names)
	ctx := WithVisible(context.Background(), func(n string) bool { return !strings.HasPrefix(n, "hidden") })
	got := walk(t, ctx, names, 2)
	// Full pages of what the caller sees, and no token after a hidden name.
	if want := [][]string{{"a", "b"}, {"c"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("pages of 2: %v, want %v", got, want)
	}
}

func TestAPageGoesOnAfterItsTokenWhateverChanged(t *testing.T) {
	req, err := Parse(2, Token("b"))
	if err != nil {
		t.Fatal(err)
	}
	// "b" itself was deleted and "bb" created since the token was given.
	if got := req.From([]string{"a", "bb", "c"}); !slices.Equal(got, []string{"bb", "c"}) {
		t.Fatalf("after b: %v", got)
	}
	if got := req.From([]string{"a", "b", "c"}); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after b: %v", got)
	}
}

func TestBadPageRequestsNameTheField(t *testing.T) {
	for _, c := range []struct {
		size  int32
		token string
		field string
	}{
		{-1, "", "page_size"},
		{2, "not a token!", "page_token"},
		{2, "YWZ0ZXI6", "page_token"}, // the prefix and no name
		{2, "b3JkZXJz", "page_token"}, // base64 of a bare name
	} {
		_, err := Parse(c.size, c.token)
		ke := kerr.As(err)
		if ke == nil || ke.Code != kerr.InvalidRequest || ke.Field != c.field {
			t.Errorf("Parse(%d, %q) = %v, want INVALID_REQUEST naming %s", c.size, c.token, err, c.field)
		}
	}
}
