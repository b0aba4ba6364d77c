package vfs

import (
	"math/rand/v2"
	"slices"
)

// sectorSize is the unit in which a crash may keep or lose unsynced writes.
const sectorSize = 512

// CrashClone returns the file system as it could be found after a power
// loss now. What was synced survives. For everything else the seed decides:
// each unsynced directory entry change is kept or lost (a rename as a whole:
// the file keeps its old name or has its new one; a new directory whose
// entry is lost takes everything in it along), and each file with
// unsynced changes comes back with none of them, all of them, or a torn mix
// (a random length between the synced and live sizes, each 512-byte sector
// taken from the live or the synced contents, zeros where neither exists).
// The receiver is left untouched; open handles do not carry over.
func (m *MemFS) CrashClone(seed uint64) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := crasher{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), done: map[*memNode]*memNode{}}
	return &MemFS{root: c.dir(m.root)}
}

type crasher struct {
	rng  *rand.Rand
	done map[*memNode]*memNode
}

func (c *crasher) dir(d *memNode) *memNode {
	out := newDir()
	names := make([]string, 0, len(d.children)+len(d.synced))
	for k := range d.children {
		names = append(names, k)
	}
	for k := range d.synced {
		if _, ok := d.children[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names) // deterministic for a given seed
	// A rename is kept or lost as a whole: both its names decided at once.
	decided := map[string]bool{} // name -> take the live entry
	news := make([]string, 0, len(d.renames))
	for nb := range d.renames {
		news = append(news, nb)
	}
	slices.Sort(news)
	for _, nb := range news {
		happened := c.rng.IntN(2) == 0
		decided[nb], decided[d.renames[nb]] = happened, happened
	}
	for _, k := range names {
		live, durable := d.children[k], d.synced[k]
		pick := live
		if take, ok := decided[k]; ok {
			if !take {
				pick = durable
			}
		} else if live != durable && c.rng.IntN(2) == 0 {
			pick = durable
		}
		if pick == nil {
			continue
		}
		n := c.node(pick)
		out.children[k] = n
		out.synced[k] = n
	}
	return out
}

func (c *crasher) node(n *memNode) *memNode {
	if done, ok := c.done[n]; ok {
		return done
	}
	var out *memNode
	if n.dir {
		out = c.dir(n)
	} else {
		out = &memNode{mod: n.mod}
		out.data = c.contents(n)
		out.durable = slices.Clone(out.data)
	}
	c.done[n] = out
	return out
}

func (c *crasher) contents(n *memNode) []byte {
	if !n.dirty {
		return slices.Clone(n.data)
	}
	switch c.rng.IntN(3) {
	case 0:
		return slices.Clone(n.durable)
	case 1:
		return slices.Clone(n.data)
	}
	lo, hi := min(len(n.data), len(n.durable)), max(len(n.data), len(n.durable))
	size := lo + c.rng.IntN(hi-lo+1)
	out := make([]byte, size)
	for s := 0; s < size; s += sectorSize {
		e := min(s+sectorSize, size)
		src := n.durable
		if c.rng.IntN(2) == 0 {
			src = n.data
		}
		if s < len(src) {
			copy(out[s:e], src[s:min(e, len(src))])
		}
	}
	return out
}
