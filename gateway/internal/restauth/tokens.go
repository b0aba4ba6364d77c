// Package restauth authenticates REST and console callers of the gateway:
// a bearer token from the tokens file, a client certificate the CA signed,
// or a console session opened with a token. It tells the handlers which
// user is calling, and the gateway's gRPC connections forward that user to
// the services (identity.Forward), which decide what the user may do.
package restauth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"tidemark.io/services/platform/identity"
)

// MinTokenLength refuses tokens short enough to guess.
const MinTokenLength = 16

// digest is a token's SHA-256: only digests are kept in memory, and
// comparing fixed-size digests in constant time says nothing about a
// token's length.
type digest [sha256.Size]byte

func digestOf(token string) digest { return sha256.Sum256([]byte(token)) }

// Tokens is the tokens file: one `TOKEN USER` pair per line, separated by
// spaces or tabs; blank lines and lines starting with # are ignored. It is
// read again when the file changes; a version that does not parse is
// logged (by line number, never its content) and the previous one is kept.
type Tokens struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex // guards the fields below
	entries []tokenEntry
	stamp   fileStamp
	failed  fileStamp // the stamp whose parse error was logged last
	missing bool      // the file's absence was logged
}

type tokenEntry struct {
	digest digest
	user   string
}

// fileStamp tells a rewritten file from the one loaded.
type fileStamp struct {
	info    os.FileInfo
	modTime time.Time
	size    int64
}

func stampOf(fi os.FileInfo) fileStamp {
	return fileStamp{info: fi, modTime: fi.ModTime(), size: fi.Size()}
}

func (s fileStamp) same(o fileStamp) bool {
	return s.info != nil && o.info != nil && os.SameFile(s.info, o.info) &&
		s.modTime.Equal(o.modTime) && s.size == o.size
}

// LoadTokens reads the tokens file; an error names the file and the line.
func LoadTokens(path string, log *slog.Logger) (*Tokens, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Tokens{path: path, log: log}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--rest.tokens.file: %w", err)
	}
	entries, err := readTokens(path)
	if err != nil {
		return nil, err
	}
	t.entries, t.stamp = entries, stampOf(fi)
	return t, nil
}

// Lookup returns the user token belongs to. Every entry is compared, in
// constant time, whether or not an earlier one matched.
func (t *Tokens) Lookup(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	return t.lookupDigest(digestOf(token))
}

func (t *Tokens) lookupDigest(d digest) (string, bool) {
	user, found := "", 0
	for _, e := range t.current() {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			user, found = e.user, 1
		}
	}
	return user, found == 1
}

// current is the entries of the file as it is now, read again when it
// changed since the last call.
func (t *Tokens) current() []tokenEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	fi, err := os.Stat(t.path)
	if err != nil {
		if !t.missing {
			t.log.Error("tokens file unreadable; keeping the tokens loaded before", "file", t.path, "err", err)
			t.missing = true
		}
		return t.entries
	}
	t.missing = false
	st := stampOf(fi)
	if st.same(t.stamp) || st.same(t.failed) {
		return t.entries
	}
	entries, err := readTokens(t.path)
	if err != nil {
		t.log.Error("tokens file not reloaded; keeping the tokens loaded before", "err", err)
		t.failed = st
		return t.entries
	}
	t.entries, t.stamp, t.failed = entries, st, fileStamp{}
	t.log.Info("tokens file reloaded", "file", t.path, "tokens", len(entries))
	return t.entries
}

// readTokens parses the file. Errors name the line, never its content: a
// line may hold a token.
func readTokens(path string) ([]tokenEntry, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--rest.tokens.file: %w", err)
	}
	var entries []tokenEntry
	seen := map[digest]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		bad := func(why string) error {
			return fmt.Errorf("--rest.tokens.file %s line %d: %s (want `TOKEN USER`)", path, n, why)
		}
		if len(fields) != 2 {
			return nil, bad(fmt.Sprintf("%d fields", len(fields)))
		}
		token, user := fields[0], fields[1]
		if len(token) < MinTokenLength {
			return nil, bad(fmt.Sprintf("the token is shorter than %d characters", MinTokenLength))
		}
		if err := CheckUserName(user); err != nil {
			return nil, bad(err.Error())
		}
		d := digestOf(token)
		if seen[d] {
			return nil, bad("the token is also on an earlier line")
		}
		seen[d] = true
		entries = append(entries, tokenEntry{digest: d, user: user})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--rest.tokens.file %s: %w", path, err)
	}
	return entries, nil
}

// CheckUserName accepts the names the gateway can forward: printable ASCII
// without spaces (a gRPC metadata value, a Kafka principal name), and not
// a name of the cluster's own roles (broker-N, controller-N, gateway),
// which a REST caller must never appear to be.
func CheckUserName(name string) error {
	if name == "" {
		return fmt.Errorf("empty user name")
	}
	if p := identity.Parse(name); p.Role != identity.User {
		return fmt.Errorf("%q is the name of a cluster %s, not a user", name, p.Role)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("user name %q has a character other than printable ASCII", name)
		}
	}
	return nil
}
