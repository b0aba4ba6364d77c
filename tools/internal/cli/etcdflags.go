package cli

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/etcdconn"
	"tidemark.io/services/platform/pki"
	"tidemark.io/tools/internal/devcluster"
)

// etcdFlag spells an etcd flag the CLI's way: --etcd.tls.ca is
// --etcd-tls-ca here. The environment twins are the services' own
// (TIDEMARK_ETCD_TLS_CA).
func etcdFlag(name string) string { return strings.ReplaceAll(name, ".", "-") }

// etcdFlags are the shared etcd flags (etcdconn), and where `tidemark dev
// up` keeps its certificates.
type etcdFlags struct {
	etcdconn.Options
	devPKI string
}

// addEtcdFlags registers the shared etcd flags on f.
func addEtcdFlags(f *pflag.FlagSet, o *etcdFlags) {
	o.Options = etcdconn.Defaults()
	gofs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	o.AddFlagsSpelled(gofs, etcdFlag)
	f.AddGoFlagSet(gofs)
	for _, n := range etcdconn.FlagNames {
		withEnv(f, etcdFlag(n))
	}
	f.StringVar(&o.devPKI, "dev-pki", ".data/pki", "certificates of `tidemark dev up`: with no --etcd-tls-*, --etcd-username or --etcd-password*, etcd is read as the dev cluster's admin with "+
		pki.CertPath("DIR", devcluster.AdminUser)+" when it exists (empty: never)")
	withEnv(f, "dev-pki")
}

// options are the flags' settings, with the dev cluster's admin
// certificate when none is given and it exists.
func (o etcdFlags) options() etcdconn.Options {
	e := o.Options
	if e.TLS() || e.Username != "" || e.Password != "" || e.PasswordFile != "" || o.devPKI == "" {
		return e
	}
	if _, err := os.Stat(pki.CertPath(o.devPKI, devcluster.AdminUser)); err != nil {
		return e
	}
	e.CA, e.Cert, e.Key = pki.CAPath(o.devPKI), pki.CertPath(o.devPKI, devcluster.AdminUser), pki.KeyPath(o.devPKI, devcluster.AdminUser)
	return e
}

// dialEtcd checks o and dials etcd, failing within reachTimeout when it does
// not answer. A wrong flag is a usage error.
func dialEtcd(ctx context.Context, o etcdconn.Options) (*clientv3.Client, error) {
	if err := o.Validate(); err != nil {
		return nil, usagef("%v", err)
	}
	o.DialTimeout = reachTimeout
	cli, err := o.Dial(ctx)
	var cerr *config.Error
	if errors.As(err, &cerr) {
		return nil, usagef("%v", err)
	}
	return cli, err
}
