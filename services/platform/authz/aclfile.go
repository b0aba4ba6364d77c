package authz

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// aclFile is an ACL file read again when it changes. A change that does not
// parse is logged and ignored: the rules in force stay until the file is
// fixed, so a typo never opens or closes the cluster by accident.
type aclFile struct {
	path string
	// every is how often the file is looked at, at most.
	every time.Duration
	log   *slog.Logger

	mu      sync.Mutex // guards the fields below
	acl     *ACL
	content []byte
	stamp   time.Time
	size    int64
	checked time.Time
	badSeen []byte // the last content refused, logged once
}

func loadACLFile(path string, every time.Duration, log *slog.Logger) (*aclFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--acl.file: %w", err)
	}
	acl, err := Parse(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("--acl.file %s: %w", path, err)
	}
	f := &aclFile{path: path, every: every, log: log, acl: acl, content: b, checked: time.Now()}
	if st, err := os.Stat(path); err == nil {
		f.stamp, f.size = st.ModTime(), st.Size()
	}
	return f, nil
}

// current is the ACL in force, after reading the file again if it changed.
func (f *aclFile) current() *ACL {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if now.Sub(f.checked) < f.every {
		return f.acl
	}
	f.checked = now
	st, err := os.Stat(f.path)
	if err != nil || (st.ModTime().Equal(f.stamp) && st.Size() == f.size) {
		return f.acl // gone for a moment (an editor's rename) or unchanged
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return f.acl
	}
	f.stamp, f.size = st.ModTime(), st.Size()
	if bytes.Equal(b, f.content) {
		return f.acl
	}
	acl, err := Parse(bytes.NewReader(b))
	if err != nil {
		if !bytes.Equal(b, f.badSeen) {
			f.badSeen = b
			f.log.Error("ACL file changed but does not parse; keeping the rules in force", "file", f.path, "err", err)
		}
		return f.acl
	}
	f.acl, f.content, f.badSeen = acl, b, nil
	f.log.Info("ACL file reloaded", "file", f.path, "rules", len(acl.Rules))
	return f.acl
}
