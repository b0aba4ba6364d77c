package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"tidemark.io/services/platform/pki"
)

// defaultPKINames are the identities of the dev cluster and the compose
// stack: each process's certificate, the administrator's, and the launcher's.
var defaultPKINames = []string{"controller-1", "controller-2", "broker-1", "broker-2", "broker-3", "gateway", "admin", "launcher"}

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
	var names, tokenUsers []string
	cmd := &cobra.Command{
		Use:   "init --dir DIR [--name NAME ...] [--rest-token USER ...]",
		Short: "Create the CA and a certificate per name in --dir (existing valid ones are kept)",
		Long: "Creates ca.pem and ca-key.pem in --dir unless they exist, then NAME.pem and NAME-key.pem\n" +
			"for every name without a valid certificate from that CA. The Common Name is the identity\n" +
			"(broker-2, controller-1, gateway, a user); each certificate serves NAME, localhost,\n" +
			"127.0.0.1 and ::1.\n" +
			"--rest-token USER also adds a random bearer token for USER to DIR/" + restTokensFile + "\n" +
			"(the gateway's --rest.tokens.file) unless USER has one. Safe to run on every start.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(dir) == "" {
				return usagef("--dir is required")
			}
			if len(names) == 0 {
				return usagef("--name: give at least one name")
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
	cmd.Flags().StringSliceVar(&names, "name", defaultPKINames, "identities to issue certificates for (comma-separated or repeated)")
	cmd.Flags().StringSliceVar(&tokenUsers, "rest-token", nil, "users that get a REST bearer token in DIR/"+restTokensFile+" (comma-separated or repeated)")
	return cmd
}

// checkPKIName refuses names that cannot be a file name or an identity.
func checkPKIName(n string) error {
	if n == "" || n == "ca" || n == "ca-key" || strings.ContainsAny(n, "/\\ \t\n") || strings.HasPrefix(n, ".") {
		return usagef("invalid name %q: want a plain identity such as broker-1 or admin (not \"ca\")", n)
	}
	return nil
}
