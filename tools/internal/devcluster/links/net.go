package links

import (
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Net is a cluster's links: for each node, the proxy every connection to
// it crosses (its advertised address), and the proxy it reaches etcd
// through. The proxies name the source of each connection (see
// ProcIdentifier), so a node's own outbound connections, which cross the
// other nodes' proxies, can be cut too.
type Net struct {
	mu      sync.Mutex
	inbound map[string]*Proxy
	etcd    map[string]*Proxy
}

// NewNet returns an empty set of links.
func NewNet() *Net { return &Net{inbound: map[string]*Proxy{}, etcd: map[string]*Proxy{}} }

// AddInbound registers the proxy in front of node.
func (n *Net) AddInbound(node string, p *Proxy) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.inbound[node] = p
}

// AddEtcd registers node's proxy to etcd.
func (n *Net) AddEtcd(node string, p *Proxy) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.etcd[node] = p
}

func (n *Net) node(name string) (in, etcd *Proxy, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	in, etcd = n.inbound[name], n.etcd[name]
	if in == nil && etcd == nil {
		var names []string
		for k := range n.inbound {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, nil, fmt.Errorf("no links for node %q (nodes with links: %v)", name, names)
	}
	return in, etcd, nil
}

func (n *Net) others(name string) []*Proxy {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*Proxy
	for k, p := range n.inbound {
		if k != name {
			out = append(out, p)
		}
	}
	return out
}

// Cut isolates node: nothing reaches it (its proxy), it reaches neither
// etcd (its etcd proxy) nor any other node (their proxies, for the
// connections identified as its own).
func (n *Net) Cut(node string, m Mode) error {
	in, etcd, err := n.node(node)
	if err != nil {
		return err
	}
	for _, p := range []*Proxy{in, etcd} {
		if p != nil {
			if err := p.Block(Any, m); err != nil {
				return err
			}
		}
	}
	for _, p := range n.others(node) {
		if err := p.Block(node, m); err != nil {
			return err
		}
	}
	return nil
}

// Heal undoes Cut, and any CutBetween involving node.
func (n *Net) Heal(node string) error {
	in, etcd, err := n.node(node)
	if err != nil {
		return err
	}
	for _, p := range []*Proxy{in, etcd} {
		if p != nil {
			p.Unblock(Any)
		}
	}
	if in != nil {
		for src := range in.Blocked() {
			in.Unblock(src)
		}
	}
	for _, p := range n.others(node) {
		p.Unblock(node)
	}
	return nil
}

// CutEtcd cuts node from etcd alone.
func (n *Net) CutEtcd(node string, m Mode) error {
	_, etcd, err := n.node(node)
	if err != nil {
		return err
	}
	if etcd == nil {
		return fmt.Errorf("node %q has no etcd link", node)
	}
	return etcd.Block(Any, m)
}

// HealEtcd undoes CutEtcd.
func (n *Net) HealEtcd(node string) error {
	_, etcd, err := n.node(node)
	if err != nil {
		return err
	}
	if etcd == nil {
		return fmt.Errorf("node %q has no etcd link", node)
	}
	etcd.Unblock(Any)
	return nil
}

// CutBetween cuts the links between a and b both ways, leaving every
// other link of either up.
func (n *Net) CutBetween(a, b string, m Mode) error {
	ia, _, err := n.node(a)
	if err != nil {
		return err
	}
	ib, _, err := n.node(b)
	if err != nil {
		return err
	}
	if ia == nil || ib == nil {
		return fmt.Errorf("%s and %s need inbound links to be cut apart", a, b)
	}
	if err := ia.Block(b, m); err != nil {
		return err
	}
	return ib.Block(a, m)
}

// HealAll heals every link.
func (n *Net) HealAll() {
	n.mu.Lock()
	var all []*Proxy
	for _, p := range n.inbound {
		all = append(all, p)
	}
	for _, p := range n.etcd {
		all = append(all, p)
	}
	n.mu.Unlock()
	for _, p := range all {
		srcs := p.Blocked()
		// The cut of every source first, so Unblock of the others closes
		// what it held.
		keys := make([]string, 0, len(srcs))
		for k := range srcs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p.Unblock(k)
		}
	}
}

// Cuts describes every cut link ("" when none).
func (n *Net) Cuts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for name, p := range n.inbound {
		for src, m := range p.Blocked() {
			if src == Any {
				out = append(out, fmt.Sprintf("→%s %s", name, m))
			} else {
				out = append(out, fmt.Sprintf("%s→%s %s", src, name, m))
			}
		}
	}
	for name, p := range n.etcd {
		if m, ok := p.Blocked()[Any]; ok {
			out = append(out, fmt.Sprintf("%s→etcd %s", name, m))
		}
	}
	sort.Strings(out)
	return out
}

// Close stops every proxy.
func (n *Net) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.inbound {
		p.Close()
	}
	for _, p := range n.etcd {
		p.Close()
	}
}
