// Package paging is the one form of tidemark's list pages (AIP-158): a
// request's page_size and page_token, and the answer's next_page_token.
// Lists are served in name order and a token holds the last name served, so
// the next page starts after it whatever was created or deleted meanwhile,
// and any node of the cluster can serve it (no state is kept between
// pages). A page_size of 0 with no token answers the whole list, as the
// calls did before they had pages: gRPC callers that want everything (the
// Go client, the CLI, the Kafka listener) keep asking that way.
package paging

import (
	"context"
	"encoding/base64"
	"sort"
	"strings"
	"unicode/utf8"

	"tidemark.io/services/platform/kerr"
)

// tokenPrefix tells a token from any other base64 text.
const tokenPrefix = "after:"

// Request is a page asked for.
type Request struct {
	// Size is the most items to answer; 0: every one.
	Size int
	// After is the last name already served; "": from the start.
	After string
}

// Parse checks a request's page_size and page_token.
func Parse(size int32, token string) (Request, error) {
	if size < 0 {
		return Request{}, kerr.BadField(kerr.InvalidRequest, "page_size", "%d is negative: give 0 or more", size)
	}
	r := Request{Size: int(size)}
	if token == "" {
		return r, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	name, ok := strings.CutPrefix(string(raw), tokenPrefix)
	if err != nil || !ok || name == "" || !utf8.ValidString(name) {
		return Request{}, kerr.BadField(kerr.InvalidRequest, "page_token",
			"%q is not a token this list gave: pass the answer's next_page_token as it is, or leave it out to start from the first page", token)
	}
	r.After = name
	return r, nil
}

// ParseUnlessNamed is Parse for a list that may instead answer the items a
// request names (the topics of Metadata and DescribeTopics): pages cover
// the whole list, and named items are all answered, so a token beside them
// is refused and page_size does not apply.
func ParseUnlessNamed(named bool, size int32, token string) (Request, error) {
	r, err := Parse(size, token)
	if err != nil || !named {
		return r, err
	}
	if r.After != "" {
		return Request{}, kerr.BadField(kerr.InvalidRequest, "page_token",
			"pages cover the whole list: leave it out when naming items, which are all answered")
	}
	return Request{}, nil
}

// Token is the page_token of the page after name.
func Token(name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + name))
}

// Paged reports whether the request asks for a page rather than the whole
// list.
func (r Request) Paged() bool { return r.Size > 0 || r.After != "" }

// From is what follows the token in sorted, a list in name order.
func (r Request) From(sorted []string) []string {
	if r.After == "" {
		return sorted
	}
	i := sort.SearchStrings(sorted, r.After)
	if i < len(sorted) && sorted[i] == r.After {
		i++
	}
	return sorted[i:]
}

// Cursor picks one page out of names met in order.
type Cursor struct {
	req     Request
	visible func(string) bool
	taken   int
	last    string
	more    bool
}

// NewCursor starts a page of req for the caller of ctx: names the caller
// may not see (WithVisible) take no place in it, so a page is full of what
// the caller is shown and no token names what it may not see.
func NewCursor(ctx context.Context, req Request) *Cursor {
	c := &Cursor{req: req}
	if req.Paged() {
		c.visible, _ = ctx.Value(visibleKey{}).(func(string) bool)
	}
	return c
}

// Skip reports whether name is not for this page: at or before the token,
// or hidden from the caller.
func (c *Cursor) Skip(name string) bool {
	if c.req.After != "" && name <= c.req.After {
		return true
	}
	return c.visible != nil && !c.visible(name)
}

// Take reports whether name goes in the page. Once the page is full it
// answers false: name then only shows another page follows, and the caller
// stops there.
func (c *Cursor) Take(name string) bool {
	if c.req.Size > 0 && c.taken == c.req.Size {
		c.more = true
		return false
	}
	c.taken++
	c.last = name
	return true
}

// MoreFollow notes that another page follows though no name past this page
// was met: a source of the page said so (a broker's own next_page_token).
func (c *Cursor) MoreFollow() { c.more = c.taken > 0 }

// Next is the answer's next_page_token: empty on the last page.
func (c *Cursor) Next() string {
	if !c.more {
		return ""
	}
	return Token(c.last)
}

type visibleKey struct{}

// WithVisible gives the pages served under ctx the names their caller may
// see (authorization: a topic it may Describe), for a list that would
// leave the others out of its answer anyway.
func WithVisible(ctx context.Context, visible func(name string) bool) context.Context {
	return context.WithValue(ctx, visibleKey{}, visible)
}
