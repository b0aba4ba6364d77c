package devcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the file in a data dir that one launcher at a time holds
// flocked, with its pid in it.
const LockFile = "launcher.lock"

// ErrDataDirInUse is why a second launcher on the same data dir refuses.
var ErrDataDirInUse = errors.New("data dir in use")

// lockDataDir takes the data dir for this launcher, or refuses at once if
// another holds it. Without it a second `tidemark dev up` on the same data
// dir (another --port-base, the --data-dir forgotten) hangs for good in
// embedded etcd, whose bbolt retries the first launcher's flock on
// member/snap/db with no timeout, before any ctx or signal is watched.
// The lock goes with the process (its fd closes), so a launcher killed
// outright leaves nothing to clean up.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another `tidemark dev up`%s uses %s (it holds %s); stop it, or give this one a --data-dir of its own",
				ErrDataDirInUse, holderPID(path), dir, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The pid is only for the message above: the flock is the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// holderPID names the pid the lock's holder wrote, if any.
func holderPID(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %d)", pid)
}
