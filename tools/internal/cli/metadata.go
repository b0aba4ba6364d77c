package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"tidemark.io/services/metastore"
)

func newMetadataCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "metadata",
		Short: "Read the cluster metadata kept in etcd",
	}
	var (
		endpoints []string
		prefix    string
		asJSON    bool
	)
	dump := &cobra.Command{
		Use:   "dump [--etcd-endpoints host:port,...] [--etcd-prefix /tidemark] [--json]",
		Short: "Print every etcd key under the prefix, decoded: controller, controller_epoch, brokers, topics, partition states, configs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.opContext(cmd.Context())
			defer cancel()
			if err := reach(ctx, "etcd endpoint", "--etcd-endpoints", endpoints, plainDial()); err != nil {
				return err
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: reachTimeout, Logger: zap.NewNop(), Context: ctx})
			if err != nil {
				return fmt.Errorf("--etcd-endpoints %v: %w", endpoints, err)
			}
			defer cli.Close()
			store, err := metastore.New(cli, metastore.Options{Prefix: prefix})
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
	f.StringSliceVar(&endpoints, "etcd-endpoints", []string{"127.0.0.1:2379"}, "etcd client endpoints (comma-separated)")
	f.StringVar(&prefix, "etcd-prefix", metastore.DefaultPrefix, "the root of tidemark's keys")
	f.BoolVar(&asJSON, "json", false, "print the snapshot as JSON")
	withEnv(f, "etcd-endpoints", "etcd-prefix")
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
