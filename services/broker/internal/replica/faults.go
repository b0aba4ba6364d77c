package replica

import (
	"context"
	"slices"
	"time"

	"tidemark.io/services/broker/internal/lockorder"
	"tidemark.io/services/platform/kerr"
)

// Fault is an injected slowdown of this broker's follower fetching.
type Fault struct {
	Topic     string // empty matches every topic
	Partition int32  // -1 matches every partition
	Delay     time.Duration
	Stall     bool
}

func (f Fault) matches(tp TP) bool {
	return (f.Topic == "" || f.Topic == tp.Topic) && (f.Partition < 0 || f.Partition == tp.Partition)
}

// Faults holds the injected fetch faults, link cuts and isolation. It is
// off unless the broker was started with fault injection enabled, so a
// production broker cannot be slowed through its API.
type Faults struct {
	enabled bool
	mu      lockorder.RWMutex[lockorder.Leaf]
	list    []Fault
	// cut are the brokers nothing this broker sends reaches; isolated cuts
	// it off from etcd and the controllers, and isolatedPeers (only while
	// isolated) from every other broker too, both ways. healed is closed
	// and replaced at each change of any, for the traffic held until its
	// link heals.
	cut           []int32
	isolated      bool
	isolatedPeers bool
	healed        chan struct{}
}

// NewFaults returns a registry; disabled ones refuse every change.
func NewFaults(enabled bool) *Faults { return &Faults{enabled: enabled, healed: make(chan struct{})} }

// Enabled reports whether faults may be set.
func (f *Faults) Enabled() bool { return f.enabled }

func (f *Faults) check() error {
	if !f.enabled {
		return kerr.New(kerr.PolicyViolation, "fault injection is disabled on this broker (start it with --fault.injection.enable)")
	}
	return nil
}

// Set adds or replaces the fault for the same topic and partition.
func (f *Faults) Set(x Fault) ([]Fault, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if x.Delay < 0 {
		return nil, kerr.BadField(kerr.InvalidRequest, "delay_ms", "must not be negative")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := f.list[:0]
	for _, y := range f.list {
		if y.Topic != x.Topic || y.Partition != x.Partition {
			kept = append(kept, y)
		}
	}
	f.list = append(kept, x)
	return append([]Fault(nil), f.list...), nil
}

// Clear removes every fault, heals every link and ends the isolation.
func (f *Faults) Clear() error {
	if err := f.check(); err != nil {
		return err
	}
	f.mu.Lock()
	f.list = nil
	f.isolated, f.isolatedPeers = false, false
	f.setCutLocked(nil)
	f.mu.Unlock()
	return nil
}

// Isolate(true, peers) cuts this broker off from etcd and from the
// controllers, as a network partition that leaves it its clients and, unless
// peers, the other brokers: the bytes of its connections to etcd and the
// controllers stop flowing both ways, new ones do not open, and the
// controllers' requests to it are lost (netcut, and the broker's
// isolation.go). With peers its replication links to and from every other
// broker are cut as well (LinkCut, AwaitLink, AwaitArrival). Isolating an
// isolated broker sets peers anew. Isolate(false, _) heals it all.
func (f *Faults) Isolate(isolated, peers bool) error {
	if err := f.check(); err != nil {
		return err
	}
	peers = peers && isolated
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.isolated != isolated || f.isolatedPeers != peers {
		f.isolated, f.isolatedPeers = isolated, peers
		f.setCutLocked(f.cut)
	}
	return nil
}

// Isolation reports whether the broker is cut off from etcd and the
// controllers, and returns a channel closed at the next change.
func (f *Faults) Isolation() (bool, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.isolated, f.healed
}

// IsolatedFromPeers reports whether the isolation cuts the replication
// links to and from the other brokers too.
func (f *Faults) IsolatedFromPeers() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.isolatedPeers
}

// CutLink loses what this broker sends to broker to: the fetchers
// following it send nothing, and the answers to its requests are held
// until the link heals (as TCP would deliver them once the network is
// back) or the request is given up.
func (f *Faults) CutLink(to int32) ([]int32, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if to < 0 {
		return nil, kerr.BadField(kerr.InvalidRequest, "to_broker_id", "must be a broker id >= 0")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.cut, to) {
		f.setCutLocked(append(slices.Clone(f.cut), to))
	}
	return slices.Clone(f.cut), nil
}

// HealLink undoes CutLink.
func (f *Faults) HealLink(to int32) ([]int32, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Contains(f.cut, to) {
		f.setCutLocked(slices.DeleteFunc(slices.Clone(f.cut), func(id int32) bool { return id == to }))
	}
	return slices.Clone(f.cut), nil
}

// setCutLocked replaces the cut links and wakes the traffic held on them
// or on the isolation. f.mu held.
func (f *Faults) setCutLocked(cut []int32) {
	slices.Sort(cut)
	f.cut = cut
	close(f.healed)
	f.healed = make(chan struct{})
}

// Links returns the brokers this broker's link to is cut.
func (f *Faults) Links() []int32 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.cut)
}

// LinkCut reports whether what this broker sends to broker to is lost: its
// link to to is cut, or an isolation cuts it from every other broker.
func (f *Faults) LinkCut(to int32) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.linkCutLocked(to)
}

// linkCutLocked is LinkCut with f.mu held.
func (f *Faults) linkCutLocked(to int32) bool {
	return f.isolatedPeers || slices.Contains(f.cut, to)
}

// AwaitLink returns once this broker's link to broker to is up, or with
// ctx's error when ctx ends first: an answer to that broker waits here.
func (f *Faults) AwaitLink(ctx context.Context, to int32) error {
	return f.await(ctx, func() bool { return f.linkCutLocked(to) })
}

// AwaitArrival returns once what the other brokers send reaches this
// broker, or with ctx's error when ctx ends first: a request from one of
// them waits here, unserved, while an isolation cuts this broker from its peers (as
// TCP delivers it once the network is back). A one-way cut of this
// broker's own link (CutLink) loses only what this broker sends: the
// requests arriving are served and their answers held (AwaitLink).
func (f *Faults) AwaitArrival(ctx context.Context) error {
	return f.await(ctx, func() bool { return f.isolatedPeers })
}

// await waits until cut, read with f.mu held, is false or ctx ends.
func (f *Faults) await(ctx context.Context, cut func() bool) error {
	for {
		f.mu.RLock()
		isCut, healed := cut(), f.healed
		f.mu.RUnlock()
		if !isCut {
			return nil
		}
		select {
		case <-healed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// List returns the faults in force.
func (f *Faults) List() []Fault {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]Fault(nil), f.list...)
}

// For merges the faults matching tp: the longest delay, any stall.
func (f *Faults) For(tp TP) Fault {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out Fault
	for _, x := range f.list {
		if x.matches(tp) {
			out.Stall = out.Stall || x.Stall
			out.Delay = max(out.Delay, x.Delay)
		}
	}
	return out
}
