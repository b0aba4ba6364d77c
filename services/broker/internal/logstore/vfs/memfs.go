package vfs

import (
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory FS that remembers what was made durable: a file's
// contents as of its last Sync, and a directory's entries as of its last
// SyncDir. CrashClone returns the state a machine could come back up with
// after losing power. A new directory's entry, like a file's, is durable
// once its parent is synced; removing a directory is durable at once.
// It is safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
}

type memNode struct {
	dir bool
	// Directories: live entries, and the entries as of the last SyncDir.
	children, synced map[string]*memNode
	// renames maps a new name to the old one for renames within this
	// directory since the last SyncDir: a crash keeps a rename whole or
	// not at all, as journaling file systems do (never neither name).
	renames map[string]string
	// Files: live contents; durable contents; the lowest byte changed since
	// the last Sync (len(data) when clean is not enough, see dirty).
	data, durable []byte
	dirtyFrom     int
	dirty         bool
	mod           time.Time
}

func newDir() *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, synced: map[string]*memNode{}}
}

// NewMem returns an empty in-memory file system.
func NewMem() *MemFS { return &MemFS{root: newDir()} }

func split(name string) []string {
	name = path.Clean("/" + name)
	if name == "/" {
		return nil
	}
	return strings.Split(name[1:], "/")
}

// walk returns the directory holding the last element of name, and that element.
func (m *MemFS) walk(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	dir := m.root
	for _, p := range parts[:len(parts)-1] {
		next, ok := dir.children[p]
		if !ok {
			return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		if !next.dir {
			return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
		}
		dir = next
	}
	return dir, parts[len(parts)-1], nil
}

func (m *MemFS) lookup(op, name string) (*memNode, error) {
	if len(split(name)) == 0 {
		return m.root, nil
	}
	dir, base, err := m.walk(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	if !ok {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.walk("create", name)
	if err != nil {
		return nil, err
	}
	if n, ok := dir.children[base]; ok {
		if n.dir {
			return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
		}
		n.truncate(0)
		return &memFile{fs: m, n: n, name: name}, nil
	}
	n := &memNode{mod: time.Now()}
	dir.children[base] = n
	return &memFile{fs: m, n: n, name: name}, nil
}

func (m *MemFS) open(name string, ro bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return &memFile{fs: m, n: n, name: name, readOnly: ro}, nil
}

func (m *MemFS) Open(name string) (File, error)         { return m.open(name, false) }
func (m *MemFS) OpenReadOnly(name string) (File, error) { return m.open(name, true) }

func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.walk("rename", oldname)
	if err != nil {
		return err
	}
	n, ok := od.children[ob]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	nd, nb, err := m.walk("rename", newname)
	if err != nil {
		return err
	}
	if old, ok := nd.children[nb]; ok && old.dir {
		return &fs.PathError{Op: "rename", Path: newname, Err: fs.ErrExist}
	}
	delete(od.children, ob)
	nd.children[nb] = n
	if od == nd && ob != nb {
		origin := ob
		if o, ok := od.renames[ob]; ok {
			origin = o
			delete(od.renames, ob)
		}
		if od.renames == nil {
			od.renames = map[string]string{}
		}
		if origin == nb {
			delete(od.renames, nb)
		} else {
			od.renames[nb] = origin
		}
	}
	return nil
}

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.walk("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrExist}
	}
	delete(dir.children, base)
	return nil
}

func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.walk("removeall", name)
	if err != nil {
		if IsNotExist(err) {
			return nil
		}
		return err
	}
	// A removed directory's durable entries go with it: directory removal is
	// treated as durable.
	delete(dir.children, base)
	delete(dir.synced, base)
	return nil
}

func (m *MemFS) MkdirAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir := m.root
	for _, p := range split(name) {
		next, ok := dir.children[p]
		if !ok {
			next = newDir()
			dir.children[p] = next
		} else if !next.dir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrExist}
		}
		dir = next
	}
	return nil
}

func (m *MemFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	out := make([]fs.DirEntry, 0, len(n.children))
	for k, c := range n.children {
		out = append(out, fs.FileInfoToDirEntry(c.info(k)))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("syncdir", name)
	if err != nil {
		return err
	}
	if !n.dir {
		return &fs.PathError{Op: "syncdir", Path: name, Err: fs.ErrInvalid}
	}
	n.synced = make(map[string]*memNode, len(n.children))
	n.renames = nil
	for k, c := range n.children {
		n.synced[k] = c
	}
	return nil
}

func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(path.Base(path.Clean("/" + name))), nil
}

func (n *memNode) truncate(size int) {
	if size < len(n.data) {
		clear(n.data[size:])
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, size-len(n.data))...)
	}
	n.markDirty(size)
}

func (n *memNode) markDirty(from int) {
	if !n.dirty || from < n.dirtyFrom {
		n.dirtyFrom = from
	}
	n.dirty = true
	n.mod = time.Now()
}

// memFile is a handle; like a Unix descriptor it keeps working after its
// name is removed.
type memFile struct {
	fs       *MemFS
	n        *memNode
	name     string
	readOnly bool
	closed   bool
}

func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	if write && f.readOnly {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrPermission}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	end := int(off) + len(p)
	if end > len(f.n.data) {
		f.n.data = append(f.n.data, make([]byte, end-len(f.n.data))...)
	}
	copy(f.n.data[off:], p)
	f.n.markDirty(int(off))
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	n := f.n
	if n.dirty {
		// Bytes below dirtyFrom are unchanged since the last Sync.
		keep := min(n.dirtyFrom, len(n.durable))
		n.durable = append(n.durable[:keep], n.data[keep:]...)
		n.dirty = false
	}
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	f.n.truncate(int(size))
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}

func (f *memFile) Name() string { return f.name }

type memInfo struct {
	name string
	n    *memNode
	size int64
}

func (n *memNode) info(name string) fs.FileInfo {
	return memInfo{name: name, n: n, size: int64(len(n.data))}
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return i.n.mod }
func (i memInfo) IsDir() bool        { return i.n.dir }
func (i memInfo) Sys() any           { return nil }
