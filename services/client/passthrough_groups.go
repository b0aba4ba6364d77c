package client

import (
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
)

// GroupCoordinator returns a GroupService client on the broker at addr
// (a group's coordinator, or any broker for FindCoordinator), over the
// client's pooled connection, for programs that pass group requests
// through (the REST gateway).
func (c *Client) GroupCoordinator(addr string) (groupv1.GroupServiceClient, error) {
	cc, err := c.pool.get(addr)
	if err != nil {
		return nil, toKerr(err)
	}
	return groupv1.NewGroupServiceClient(cc), nil
}
