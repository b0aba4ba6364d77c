package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

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
	c.AddCommand(dump, newMetadataBackupCmd(g), newMetadataRestoreCmd(g))
	return c
}

// newMetadataBackupCmd writes every durable key to a file: what a cluster
// needs to come back if its etcd is lost.
func newMetadataBackupCmd(g *globals) *cobra.Command {
	var (
		etcd etcdFlags
		file string
	)
	cmd := &cobra.Command{
		Use:   "backup --file F [--etcd-endpoints host:port,...] [--etcd-prefix /tidemark] [--etcd-tls-* of admin or root]",
		Short: "Save the cluster's metadata (topics, assignments, partition states, configs, epochs, cluster id) to a file",
		Long: "Reads every key under the prefix at one etcd revision, except the lease-bound ones (broker registrations and\n" +
			"the active controller, which running processes make again), and writes them as JSON to --file (mode 0600).\n" +
			"Reading needs the admin role. `tidemark metadata restore` writes such a file back into an empty etcd.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usagef("--file is required: where to write the backup")
			}
			ctx, cancel := g.opContext(cmd.Context())
			defer cancel()
			store, closeStore, err := openStore(ctx, etcd)
			if err != nil {
				return err
			}
			defer closeStore()
			b, err := store.Backup(ctx)
			if err != nil {
				return err
			}
			raw, err := json.MarshalIndent(b, "", "  ")
			if err != nil {
				return err
			}
			if err := writeFileAtomic(file, append(raw, '\n'), 0o600); err != nil {
				return fmt.Errorf("--file %s: %w", file, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %d keys of %s at revision %d to %s\n", len(b.Entries), b.Prefix, b.Revision, file)
			return nil
		},
	}
	f := cmd.Flags()
	addEtcdFlags(f, &etcd)
	f.StringVar(&file, "file", "", "file to write the backup to (required)")
	return cmd
}

// newMetadataRestoreCmd writes a backup into an empty etcd.
func newMetadataRestoreCmd(g *globals) *cobra.Command {
	var (
		etcd etcdFlags
		file string
		bump int32
	)
	cmd := &cobra.Command{
		Use:   "restore --file F [--epoch-bump 1000] [--etcd-endpoints host:port,...] [--etcd-prefix /tidemark] [--etcd-tls-* of root]",
		Short: "Write a metadata backup into an empty etcd (after losing the cluster's etcd)",
		Long: "Writes the keys of a `tidemark metadata backup` file under the prefix, which must be empty (stop the controllers\n" +
			"and brokers first). Every epoch (controller_epoch, and each partition's leader, partition and controller epochs)\n" +
			"is raised by --epoch-bump and the producer id block moved on as many blocks, so the restored metadata is newer\n" +
			"than anything the brokers saw after the backup and no producer id is given twice; the brokers' data dirs keep\n" +
			"the same cluster id. Writing needs a user with write access to the prefix (root, or a controller's).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usagef("--file is required: the backup to restore")
			}
			if bump < 0 {
				return usagef("--epoch-bump must not be negative, got %d", bump)
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("--file %s: %w", file, err)
			}
			var b metastore.Backup
			if err := json.Unmarshal(raw, &b); err != nil {
				return fmt.Errorf("--file %s: not a metadata backup: %w", file, err)
			}
			ctx, cancel := g.opContext(cmd.Context())
			defer cancel()
			store, closeStore, err := openStore(ctx, etcd)
			if err != nil {
				return err
			}
			defer closeStore()
			n, err := store.Restore(ctx, b, bump)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %d keys (backup of %s at revision %d, taken %s), epochs raised by %d\n",
				n, b.Prefix, b.Revision, b.TakenAt.Format(time.RFC3339), bump)
			return nil
		},
	}
	f := cmd.Flags()
	addEtcdFlags(f, &etcd)
	f.StringVar(&file, "file", "", "the backup file to restore (required)")
	f.Int32Var(&bump, "epoch-bump", 1000, "how much to raise every epoch by, and the producer id block by as many blocks")
	return cmd
}

// openStore dials etcd with the etcd flags and opens the metastore on the
// prefix.
func openStore(ctx context.Context, etcd etcdFlags) (*metastore.Store, func(), error) {
	cli, err := dialEtcd(ctx, etcd.options())
	if err != nil {
		return nil, nil, err
	}
	store, err := metastore.New(cli, metastore.Options{Prefix: etcd.Prefix})
	if err != nil {
		cli.Close()
		return nil, nil, usagef("--etcd-prefix: %v", err)
	}
	return store, func() { cli.Close() }, nil
}

// writeFileAtomic writes a temporary file beside path and renames it.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
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
