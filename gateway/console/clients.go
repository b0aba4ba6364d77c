package console

import (
	"slices"

	"tidemark.io/gateway/internal/restauth"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/kerr"
)

// clientForLocked is the client to reach the brokers through for user (""
// when authentication is off), made on first use: a user's client runs on
// connections that always speak for that user.
func (c *Console) clientForLocked(user string) (*client.Client, error) {
	if c.closed {
		return nil, errClosed
	}
	if user == "" && c.cl != nil {
		return c.cl, nil
	}
	if cl := c.userClients[user]; user != "" && cl != nil {
		return cl, nil
	}
	var addrs []string
	switch {
	case c.cl != nil:
		addrs = c.cl.AnyBrokerAddrs() // a bootstrap broker may have moved since
	case len(c.opts.Brokers) > 0:
		addrs = c.opts.Brokers
	default:
		if snap := c.hub.current(); snap != nil {
			for _, b := range snap.Brokers {
				if b.Alive && b.Address != "" {
					addrs = append(addrs, b.Address)
				}
			}
		}
	}
	if len(addrs) == 0 {
		return nil, refuse(kerr.BrokerNotAvailable, "no live broker known yet")
	}
	opts := c.opts.ClientOptions
	if user != "" {
		opts.DialOptions = append(slices.Clone(opts.DialOptions), restauth.ForwardFixedUser(user)...)
	}
	cl, err := client.New(addrs, opts)
	if err != nil {
		return nil, err
	}
	c.owned = append(c.owned, cl.Close)
	if user == "" {
		c.cl = cl
	} else {
		c.userClients[user] = cl
	}
	return cl, nil
}
