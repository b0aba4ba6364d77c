package replica

import (
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

// Faults holds the injected fetch faults. It is off unless the broker was
// started with fault injection enabled, so a production broker cannot be
// slowed through its API.
type Faults struct {
	enabled bool
	mu      lockorder.RWMutex[lockorder.Leaf]
	list    []Fault
}

// NewFaults returns a registry; disabled ones refuse every change.
func NewFaults(enabled bool) *Faults { return &Faults{enabled: enabled} }

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

// Clear removes every fault.
func (f *Faults) Clear() error {
	if err := f.check(); err != nil {
		return err
	}
	f.mu.Lock()
	f.list = nil
	f.mu.Unlock()
	return nil
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
