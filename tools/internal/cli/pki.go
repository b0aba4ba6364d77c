package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tidemark.io/services/metastore/etcdauth"
	"tidemark.io/services/platform/pki"
	"tidemark.io/tools/internal/devcluster"
)

// defaultPKINames are the identities of the compose stack and `make run`:
// every node, the gateway, the operator, the dev launcher, and etcd's
// server and root user (metastore/etcdauth).
var defaultPKINames = []string{"controller-1", "controller-2", "broker-1", "broker-2", "broker-3", "gateway", "admin", "launcher",
	"etcd", etcdauth.RootUser}

// maxCertDays bounds --days: the CA itself lasts ten years.
const maxCertDays = 3650

// restTokensFile is the gateway's tokens file in a pki directory, the name
// the dev cluster gives it too.
const restTokensFile = "tokens"

var certNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func newPKICmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "pki",
		Short: "Make a local CA and the certificates a cluster runs on (for operators without a CA of their own)",
		Long: "A directory holds ca.pem and ca-key.pem (the CA), and NAME.pem and NAME-key.pem for each identity:\n" +
			"a certificate's Common Name is who its holder is (controller-1, broker-2, gateway, or a user such as admin).\n" +
			"Keys are ECDSA P-256, written with mode 0600.",
	}
	c.AddCommand(newPKIInitCmd(), newPKIIssueCmd())
	return c
}

// leafHosts are the names a certificate serves on: localhost, the loopback
// addresses and the name itself, plus extra.
func leafHosts(name string, extra []string) []string {
	return append([]string{"localhost", "127.0.0.1", "::1", name}, extra...)
}

func checkCertName(name string) error {
	if !certNameRE.MatchString(name) {
		return usagef("--name %q: a name is letters, digits, '.', '_' and '-', starting with a letter or digit", name)
	}
	if name == "ca" || name == "ca-key" {
		return usagef("--name %q: its files would overwrite the CA's (ca.pem, ca-key.pem)", name)
	}
	return nil
}

func newPKIInitCmd() *cobra.Command {
	var (
		dir        string
		names      []string
		hosts      []string
		tokenUsers []string
		exports    []string
	)
	cmd := &cobra.Command{
		Use:   "init --dir DIR [--name NAME ...] [--host HOST ...] [--rest-token USER ...] [--export TO=NAME,... ...]",
		Short: "Make the CA in DIR if it has none, and a certificate for each name that has no valid one",
		Long: "Makes the CA in DIR if it has none, and a certificate for each --name that has none, one the CA did not\n" +
			"sign, or one that expires within 30 days; valid ones are kept, so it is safe to run on every start.\n" +
			"Each certificate serves on localhost, 127.0.0.1, ::1, its name and every --host.\n" +
			"--rest-token USER also gives USER a random REST bearer token in DIR/" + restTokensFile + " (the gateway's\n" +
			"--rest.tokens.file, lines `TOKEN USER`, mode 0600) unless USER has one.\n" +
			"--export TO=NAME,... copies ca.pem (not the CA's key) and each NAME's certificate and key into the folder TO,\n" +
			"so a process can be given only its own files; the item `" + restTokensFile + "` copies the REST tokens file.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usagef("--dir is required: the folder for the CA and the certificates")
			}
			if len(names) == 0 {
				return usagef("--name: give at least one name")
			}
			seen := map[string]bool{}
			var leaves []pki.Leaf
			for _, n := range names {
				if err := checkCertName(n); err != nil {
					return err
				}
				if seen[n] {
					return usagef("--name %q given twice", n)
				}
				seen[n] = true
				leaves = append(leaves, pki.Leaf{Name: n, Hosts: leafHosts(n, hosts)})
			}
			for _, u := range tokenUsers {
				if !certNameRE.MatchString(u) {
					return usagef("--rest-token %q: a user name is letters, digits, '.', '_' and '-', starting with a letter or digit", u)
				}
			}
			plan, err := parseExports(exports, seen)
			if err != nil {
				return err
			}
			issued, err := pki.Ensure(dir, leaves...)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "CA %s\n", pki.CAPath(dir))
			fresh := map[string]bool{}
			for _, n := range issued {
				fresh[n] = true
			}
			for _, n := range names {
				verb := "kept  "
				if fresh[n] {
					verb = "issued"
				}
				fmt.Fprintf(out, "%s %s: %s %s\n", verb, n, pki.CertPath(dir, n), pki.KeyPath(dir, n))
			}
			for _, u := range tokenUsers {
				path := filepath.Join(dir, restTokensFile)
				if _, err := devcluster.EnsureToken(path, u); err != nil {
					return fmt.Errorf("REST token for %s: %w", u, err)
				}
				fmt.Fprintf(out, "token  %s: %s\n", u, path)
			}
			for _, e := range plan {
				if err := pki.Export(dir, e.to, e.names, e.extra...); err != nil {
					return err
				}
				fmt.Fprintf(out, "export %s: %s\n", strings.Join(append(e.names, e.extra...), ","), e.to)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "folder for ca.pem, ca-key.pem and each NAME.pem, NAME-key.pem (required)")
	f.StringSliceVar(&names, "name", defaultPKINames, "identities to issue certificates for (repeatable or comma-separated)")
	f.StringSliceVar(&hosts, "host", nil, "extra DNS name or IP address every certificate serves on (repeatable)")
	f.StringArrayVar(&exports, "export", nil, "TO=NAME,...: copy ca.pem and these identities' files (or `"+restTokensFile+"`) into the folder TO (repeatable)")
	f.StringSliceVar(&tokenUsers, "rest-token", nil, "users that get a REST bearer token in DIR/"+restTokensFile+" unless they have one (repeatable or comma-separated)")
	return cmd
}

// pkiExport is one --export: a folder and what goes in it.
type pkiExport struct {
	to    string
	names []string
	extra []string
}

// parseExports reads --export TO=NAME,...; each NAME must be one of this
// run's --name identities (known), or the tokens file.
func parseExports(flags []string, known map[string]bool) ([]pkiExport, error) {
	var out []pkiExport
	for _, f := range flags {
		to, list, ok := strings.Cut(f, "=")
		if !ok || to == "" || list == "" {
			return nil, usagef("--export %q: want TO=NAME,... (a folder, then the identities whose files go there)", f)
		}
		e := pkiExport{to: to}
		for _, n := range strings.Split(list, ",") {
			switch {
			case n == restTokensFile:
				e.extra = append(e.extra, n)
			case known[n]:
				e.names = append(e.names, n)
			default:
				return nil, usagef("--export %q: %q is not one of the --name identities (nor %q)", f, n, restTokensFile)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

func newPKIIssueCmd() *cobra.Command {
	var (
		dir, name string
		hosts     []string
		days      int
	)
	cmd := &cobra.Command{
		Use:   "issue --dir DIR --name NAME [--host HOST ...] [--days N]",
		Short: "Issue (or renew) one certificate with DIR's CA, replacing NAME.pem and NAME-key.pem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usagef("--dir is required: the folder holding the CA (ca.pem, ca-key.pem)")
			}
			if name == "" {
				return usagef("--name is required: the identity the certificate names")
			}
			if err := checkCertName(name); err != nil {
				return err
			}
			if days < 1 || days > maxCertDays {
				return usagef("--days must be 1..%d, got %d", maxCertDays, days)
			}
			ca, err := pki.LoadCA(dir)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no CA in %s (%s and ca-key.pem): make one with `tidemark pki init --dir %s`", dir, pki.CAPath(dir), dir)
			}
			if err != nil {
				return err
			}
			now := time.Now()
			leaf := pki.Leaf{Name: name, Hosts: leafHosts(name, hosts), NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Duration(days) * 24 * time.Hour)}
			if err := ca.IssueFiles(dir, leaf); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "issued %s: %s %s (valid until %s)\n", name, pki.CertPath(dir, name), pki.KeyPath(dir, name),
				leaf.NotAfter.UTC().Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "folder holding the CA (required)")
	f.StringVar(&name, "name", "", "the identity: the certificate's Common Name, e.g. broker-4 or alice (required)")
	f.StringSliceVar(&hosts, "host", nil, "extra DNS name or IP address the certificate serves on (repeatable)")
	f.IntVar(&days, "days", 365, "validity in days")
	return cmd
}
