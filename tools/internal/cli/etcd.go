package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"tidemark.io/services/metastore"
	"tidemark.io/services/metastore/etcdauth"
	"tidemark.io/services/platform/pki"
)

func newEtcdCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "etcd",
		Short: "Set up etcd's users and roles for tidemark",
	}
	var (
		etcd        etcdFlags
		pkiDir      string
		brokers     []int32
		controllers []int32
		admins      []string
		passwords   map[string]string
	)
	setup := &cobra.Command{
		Use:   "setup-auth --brokers 1,2,3 --controllers 1,2 [--admins admin] [--pki DIR | --etcd-tls-* of root]",
		Short: "Create tidemark's etcd roles, a user per broker, controller and admin, and root; then turn etcd's auth on (idempotent)",
		Long: `Creates the roles of DESIGN.md's "etcd access" (tidemark-broker, tidemark-broker-<id>,
tidemark-controller, tidemark-admin), the users broker-<id>, controller-<id> and the admins with
them, and root, then enables etcd's authentication. Users get no password unless
--user-password-file gives one: etcd running with --client-cert-auth takes a client
certificate's Common Name as the user. Run it as root (root's certificate, e.g. --pki DIR for
DIR/root.pem) once auth is on; running it again adds what is missing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(brokers) == 0 || len(controllers) == 0 {
				return usagef("--brokers and --controllers are needed: the ids of the users to create")
			}
			for _, id := range slices.Concat(brokers, controllers) {
				if id < 0 {
					return usagef("--brokers/--controllers: id %d is negative", id)
				}
			}
			o := etcd.Options
			if pkiDir != "" {
				if o.TLS() {
					return usagef("--pki takes root's certificate from DIR: do not combine it with --etcd-tls-*")
				}
				o.CA, o.Cert, o.Key = pki.CAPath(pkiDir), pki.CertPath(pkiDir, etcdauth.RootUser), pki.KeyPath(pkiDir, etcdauth.RootUser)
			}
			plan := etcdauth.Plan{Prefix: o.Prefix, Brokers: brokers, Controllers: controllers, Admins: admins, Passwords: map[string]string{}}
			for user, path := range passwords {
				b, err := os.ReadFile(path)
				if err != nil {
					return usagef("--user-password-file %s=%s: %v", user, path, err)
				}
				if plan.Passwords[user] = strings.TrimRight(string(b), "\r\n"); plan.Passwords[user] == "" {
					return usagef("--user-password-file %s=%s: the file is empty", user, path)
				}
			}
			ctx, cancel := g.opContext(cmd.Context())
			defer cancel()
			cli, err := dialEtcd(ctx, o)
			if err != nil {
				return err
			}
			defer cli.Close()
			if err := etcdauth.Setup(ctx, cli, plan); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "etcd auth is on for prefix %s\n", o.KeyPrefix())
			for _, r := range metastore.Roles(o.Prefix) {
				fmt.Fprintf(out, "role %s\n", r.Name)
			}
			for _, id := range brokers {
				fmt.Fprintf(out, "user %s: roles %s, %s\n", etcdauth.BrokerUser(id), metastore.BrokerRole, metastore.BrokerOwnRole(id))
			}
			for _, id := range controllers {
				fmt.Fprintf(out, "user %s: role %s\n", etcdauth.ControllerUser(id), metastore.ControllerRole)
			}
			for _, a := range admins {
				fmt.Fprintf(out, "user %s: role %s\n", a, metastore.AdminRole)
			}
			return nil
		},
	}
	f := setup.Flags()
	addEtcdFlags(f, &etcd)
	_ = f.MarkHidden("dev-pki")
	f.StringVar(&pkiDir, "pki", "", "directory of tidemark's CA and certificates: connect as root with DIR/ca.pem, DIR/root.pem and DIR/root-key.pem")
	f.Int32SliceVar(&brokers, "brokers", nil, "broker ids: users broker-<id>")
	f.Int32SliceVar(&controllers, "controllers", nil, "controller ids: users controller-<id>")
	f.StringSliceVar(&admins, "admins", []string{"admin"}, "users who may read every key (the CLI's metadata dump)")
	f.StringToStringVar(&passwords, "user-password-file", nil, "user=file: give user the password in file (password authentication); repeatable")
	withEnv(f, "pki", "brokers", "controllers", "admins")
	c.AddCommand(setup)
	return c
}
