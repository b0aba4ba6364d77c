package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
	"tidemark.io/services/platform/scram"
)

// newUsersCmd is kafka-configs --entity-type users for SCRAM credentials:
// the users the SASL listeners log in.
func newUsersCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "users",
		Short: "Set, describe and delete users' SCRAM credentials for the SASL listeners (kafka-configs --entity-type users)",
	}
	c.AddCommand(newUsersSetSCRAMCmd(g), newUsersDescribeCmd(g), newUsersDeleteCmd(g))
	return c
}

func newUsersSetSCRAMCmd(g *globals) *cobra.Command {
	var (
		mechanism    string
		iterations   int
		passwordFile string
	)
	cmd := &cobra.Command{
		Use:   "set-scram NAME --password-file F [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N]",
		Short: "Create a user or change its password for one SCRAM mechanism (the password is salted here; it never leaves this machine)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !scram.Known(mechanism) {
				return usagef("--mechanism %q: want %s or %s", mechanism, scram.SHA256, scram.SHA512)
			}
			if err := scram.CheckIterations(mechanism, iterations); err != nil {
				return usagef("--iterations: %v", err)
			}
			if passwordFile == "" {
				return usagef("--password-file is required (a password on the command line would show in ps and shell history)")
			}
			raw, err := os.ReadFile(passwordFile)
			if err != nil {
				return usagef("--password-file: %v", err)
			}
			password := strings.TrimRight(string(raw), "\r\n")
			if password == "" {
				return usagef("--password-file %s holds no password", passwordFile)
			}
			salt := scram.NewSalt()
			salted, err := scram.SaltPassword(mechanism, password, salt, iterations)
			if err != nil {
				return err
			}
			return alterUsers(cmd, g, &adminv1.AlterUserScramCredentialsRequest{Upsertions: []*adminv1.ScramCredentialUpsertion{{
				User: args[0], Mechanism: mechanism, Iterations: int32(iterations), Salt: salt, SaltedPassword: salted}}},
				fmt.Sprintf("Set %s credential of user %s.", mechanism, args[0]))
		},
	}
	f := cmd.Flags()
	f.StringVar(&mechanism, "mechanism", scram.SHA512, "SCRAM mechanism: SCRAM-SHA-256 or SCRAM-SHA-512")
	f.IntVar(&iterations, "iterations", 8192, fmt.Sprintf("PBKDF2 iterations, %d to %d", scram.MinIterations, scram.MaxIterations))
	f.StringVar(&passwordFile, "password-file", "", "file whose first line is the password")
	return cmd
}

func newUsersDeleteCmd(g *globals) *cobra.Command {
	var mechanisms []string
	cmd := &cobra.Command{
		Use:   "delete NAME [--mechanism M]...",
		Short: "Delete a user's SCRAM credentials (every mechanism unless --mechanism names some)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			if len(mechanisms) == 0 {
				// Only the mechanisms the user has: deleting one it lacks
				// is RESOURCE_NOT_FOUND.
				err := g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
					resp, err := a.DescribeUserScramCredentials(ctx, &adminv1.DescribeUserScramCredentialsRequest{Users: []string{user}})
					if err != nil {
						return err
					}
					for _, r := range resp.GetResults() {
						if err := client.ItemError(r.GetErrorCode(), r.GetErrorMessage(), "describe user %s", user); err != nil {
							return err
						}
						for _, c := range r.GetCredentials() {
							mechanisms = append(mechanisms, c.GetMechanism())
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			req := &adminv1.AlterUserScramCredentialsRequest{}
			for _, m := range mechanisms {
				req.Deletions = append(req.Deletions, &adminv1.ScramCredentialDeletion{User: user, Mechanism: m})
			}
			return alterUsers(cmd, g, req, fmt.Sprintf("Deleted %s credentials of user %s.", strings.Join(mechanisms, ", "), user))
		},
	}
	cmd.Flags().StringSliceVar(&mechanisms, "mechanism", nil, "mechanism to delete (repeatable or comma-separated)")
	return cmd
}

func alterUsers(cmd *cobra.Command, g *globals, req *adminv1.AlterUserScramCredentialsRequest, done string) error {
	return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
		resp, err := a.AlterUserScramCredentials(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range resp.GetResults() {
			if err := client.ItemError(r.GetErrorCode(), r.GetErrorMessage(), "alter user %s", r.GetUser()); err != nil {
				return err
			}
		}
		fmt.Fprintln(cmd.OutOrStdout(), done)
		return nil
	})
}

func newUsersDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe [NAME]...",
		Short: "List users' SCRAM mechanisms and iterations (every user without names)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withAdmin(cmd, func(ctx context.Context, a *client.Admin) error {
				resp, err := a.DescribeUserScramCredentials(ctx, &adminv1.DescribeUserScramCredentialsRequest{Users: args})
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
				fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
				for _, r := range resp.GetResults() {
					if err := client.ItemError(r.GetErrorCode(), r.GetErrorMessage(), "describe user %s", r.GetUser()); err != nil {
						return err
					}
					for _, c := range r.GetCredentials() {
						fmt.Fprintf(tw, "%s\t%s\t%d\n", r.GetUser(), c.GetMechanism(), c.GetIterations())
					}
				}
				return tw.Flush()
			})
		},
	}
}
