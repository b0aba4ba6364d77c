//go:build !lockcheck

package lockorder

import "sync"

// Enabled reports whether this build checks the lock order.
const Enabled = false

// Mutex is a sync.Mutex of class C.
type Mutex[C Class] struct{ sync.Mutex }

// RWMutex is a sync.RWMutex of class C.
type RWMutex[C Class] struct{ sync.RWMutex }
