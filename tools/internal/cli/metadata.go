package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"tidemark.io/services/metastore"
)

func newMetadataCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "metadata",
		Short: "Read the cluster metadata kept in etcd",
	}
	var (
		etcd   etcdFlags
		asJSON bool
	)
	dump := &cobra.Command{
		Use:   "dump [--etcd-endpoints host:port,...] [--etcd-prefix /tidemark] [--etcd-tls-ca ... --etcd-tls-cert ... --etcd-tls-key ...] [--json]",
		Short: "Print every etcd key under the prefix, decoded: controller, controller_epoch, brokers, topics, partition states, configs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.opContext(cmd.Context())
			defer cancel()
			cli, err := dialEtcd(ctx, etcd.options())
			if err != nil {
				return err
			}
			defer cli.Close()
			store, err := metastore.New(cli, metastore.Options{Prefix: etcd.Prefix})
			if err != nil {
				return usagef("--etcd-prefix: %v", err)
			}
			snap, err := store.Dump(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(snap)
			}
			return writeDump(out, snap)
		},
	}
	f := dump.Flags()
	addEtcdFlags(f, &etcd)
	f.BoolVar(&asJSON, "json", false, "print the snapshot as JSON")
	c.AddCommand(dump)
	return c
}

// writeDump prints a snapshot as text: one block per key with its kind,
// revisions and lease, then its JSON value.
func writeDump(w io.Writer, snap metastore.Snapshot) error {
	fmt.Fprintf(w, "prefix %s at revision %d: %d keys\n", snap.Prefix, snap.Revision, len(snap.Entries))
	for _, e := range snap.Entries {
		fmt.Fprintf(w, "\n%s\n  kind: %s  created: rev %d  modified: rev %d  version: %d", e.Key, e.Kind, e.CreateRevision, e.ModRevision, e.Version)
		if e.Lease != 0 {
			fmt.Fprintf(w, "  lease: %x", e.Lease)
		}
		fmt.Fprintf(w, "\n  %s\n", compactJSON(e.Value))
	}
	return nil
}

// compactJSON prints a stored value on one line, as stored if it is not JSON.
func compactJSON(v json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return string(v)
	}
	return buf.String()
}
