package cli

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// restTokensFile is the name of the gateway's tokens file (its
// --rest.tokens.file) in a pki directory.
const restTokensFile = "rest.tokens"

// ensureTokens appends a random token for each user the file does not
// name yet, and returns those users. The file is written 0600.
func ensureTokens(path string, users []string) ([]string, error) {
	if len(users) == 0 {
		return nil, nil
	}
	have := map[string]bool{}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(old)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			have[f[1]] = true
		}
	}
	var b strings.Builder
	b.Write(old)
	if len(old) > 0 && !strings.HasSuffix(string(old), "\n") {
		b.WriteByte('\n')
	}
	var added []string
	for _, u := range users {
		if have[u] {
			continue
		}
		tok := make([]byte, 24)
		if _, err := rand.Read(tok); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s %s\n", hex.EncodeToString(tok), u)
		have[u] = true
		added = append(added, u)
	}
	if len(added) == 0 {
		return nil, nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	return added, os.Rename(tmp, path)
}
