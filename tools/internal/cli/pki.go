package cli

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"tidemark.io/services/platform/pki"
)

// defaultPKINames are the identities of the dev cluster and the compose
// stack: each process's certificate, the administrator's, and the launcher's.
var defaultPKINames = []string{"controller-1", "controller-2", "broker-1", "broker-2", "broker-3", "gateway", "admin", "launcher"}

// restTokensFile is the name of the gateway's tokens file in the directory.
const restTokensFile = "rest.tokens"

func newPKICmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Make a local CA and the certificates a cluster runs on",
	}
	cmd.AddCommand(newPKIInitCmd())
	return cmd
}

func newPKIInitCmd() *cobra.Command {
	var dir string
	var tokenUsers []string
	cmd := &cobra.Command{
		Use:   "init [NAME...]",
		Short: "Create the CA and a certificate per name in --dir (existing valid ones are kept)",
		Long: "Creates ca.pem and ca-key.pem in --dir unless they exist, then NAME.pem and NAME-key.pem\n" +
			"for every name without a valid certificate from that CA. The Common Name is the identity\n" +
			"(broker-2, controller-1, gateway, a user); each certificate serves NAME, localhost,\n" +
			"127.0.0.1 and ::1. Without names: " + strings.Join(defaultPKINames, ", ") + ".\n" +
			"--rest-token USER also adds a random bearer token for USER to DIR/" + restTokensFile + "\n" +
			"(the gateway's --rest.tokens.file) unless USER has one. Safe to run on every start.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(dir) == "" {
				return usagef("--dir is required")
			}
			names := args
			if len(names) == 0 {
				names = defaultPKINames
			}
			leaves := make([]pki.Leaf, 0, len(names))
			for _, n := range names {
				if err := checkPKIName(n); err != nil {
					return err
				}
				leaves = append(leaves, pki.Leaf{Name: n})
			}
			for _, u := range tokenUsers {
				if err := checkPKIName(u); err != nil {
					return usagef("--rest-token: %v", err)
				}
			}
			issued, err := pki.Ensure(dir, leaves...)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(issued) == 0 {
				fmt.Fprintf(out, "%s: every certificate is present and valid\n", dir)
			} else {
				fmt.Fprintf(out, "%s: issued %s\n", dir, strings.Join(issued, ", "))
			}
			added, err := ensureTokens(filepath.Join(dir, restTokensFile), tokenUsers)
			if err != nil {
				return err
			}
			if len(added) > 0 {
				fmt.Fprintf(out, "%s: new REST token for %s\n", filepath.Join(dir, restTokensFile), strings.Join(added, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the CA and certificates (created if missing)")
	cmd.Flags().StringSliceVar(&tokenUsers, "rest-token", nil, "users that get a REST bearer token in DIR/"+restTokensFile+" (comma-separated or repeated)")
	return cmd
}

// checkPKIName refuses names that cannot be a file name or an identity.
func checkPKIName(n string) error {
	if n == "" || n == "ca" || strings.ContainsAny(n, "/\\ \t\n") || strings.HasPrefix(n, ".") {
		return usagef("invalid name %q: want a plain identity such as broker-1 or admin (not \"ca\")", n)
	}
	return nil
}

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
