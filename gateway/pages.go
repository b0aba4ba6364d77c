package gateway

import (
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/paging"
)

// maxRESTPageSize bounds the lists REST answers (GET /v1/topics,
// /v1/metadata, /v1/groups): a call that gives no pageSize gets this many
// items at most, and a larger pageSize is taken down to it (AIP-158's
// coercion), so no answer, and nothing the gateway holds for one, grows
// with the cluster. Over gRPC a page_size of 0 still answers everything.
const maxRESTPageSize = 1000

// restPageSize is the page_size a REST list call passes on.
func restPageSize(asked int32) (int32, error) {
	switch {
	case asked < 0:
		return 0, kerr.BadField(kerr.InvalidRequest, "page_size", "%d is negative: give 1 to %d, or leave it out for %d", asked, maxRESTPageSize, maxRESTPageSize)
	case asked == 0 || asked > maxRESTPageSize:
		return maxRESTPageSize, nil
	}
	return asked, nil
}

// restPage checks a REST list call's page before any call is made (a
// list merged from every broker would otherwise report each broker's
// refusal) and returns it with the page_size to pass on. named: the request
// names its items, which are all answered (no page applies).
func restPage(named bool, size int32, token string) (paging.Request, error) {
	n, err := restPageSize(size)
	if err != nil {
		return paging.Request{}, err
	}
	if _, err := paging.ParseUnlessNamed(named, n, token); err != nil {
		return paging.Request{}, err
	}
	return paging.Parse(n, token)
}
