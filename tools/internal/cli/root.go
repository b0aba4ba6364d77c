// Package cli holds the tidemark command tree. Exit codes are stable for
// scripts: 0 success, 1 the operation failed, 2 bad usage.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"tidemark.io/services/platform/sysmon"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitUsage   = 2
	versionText = "tidemark 0.1.0"
)

// usageError marks errors caused by bad flags or arguments.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// usagef builds a usageError; name the flag in the message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// Streams are the command's standard input and outputs.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
	// Getenv looks up environment twins of flags; nil means os.Getenv.
	Getenv func(string) string
	// Restart replaces the process with itself under env (Main:
	// sysmon.Reexec), for the perf commands' --sysmon-poll; nil (tests
	// running commands in their own process) never restarts.
	Restart func(env []string) error
	// Environ is the environment a restart starts from; nil is os.Environ.
	Environ func() []string
}

// Main runs the CLI with args and returns the process exit code. The first
// interrupt (Ctrl-C) or SIGTERM cancels the command, which stops following
// and reports what it did; a second one ends the process at once.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return Run(ctx, args, Streams{In: os.Stdin, Out: stdout, Err: stderr, Restart: sysmon.Reexec})
}

// Run runs the CLI under ctx and returns the exit code; tests use it to
// give a command its input and to cancel commands that follow.
func Run(ctx context.Context, args []string, s Streams) int {
	if s.In == nil {
		s.In = eofReader{}
	}
	if s.Getenv == nil {
		s.Getenv = os.Getenv
	}
	root := newRoot(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(s.Err, "tidemark:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitFailed
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func newRoot(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "tidemark",
		Short:         "Operate a tidemark cluster: Kafka's partition replication, run for real",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetIn(s.In)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	g := addGlobals(root, s.Getenv)
	g.restart, g.environ = s.Restart, s.Environ
	if g.environ == nil {
		g.environ = os.Environ
	}
	root.AddCommand(newVersionCmd(), newHealthCmd(g), newDevCmd(g), newPKICmd(),
		newTopicsCmd(g), newGroupsCmd(g), newLeaderElectionCmd(g), newProduceCmd(g), newConsumeCmd(g),
		newClusterCmd(g), newWatchCmd(g), newMetadataCmd(g), newEtcdCmd(g), newPerfCmd(g), newBenchCmd(), newChaosCmd(g), newScenarioCmd(g), newFaultCmd(g),
		newReassignCmd(g), newBrokersCmd(g), newACLsCmd(g), newUsersCmd(g), newQuotasCmd(g), newRecordsCmd(g))
	strictArgs(root)
	return root
}

// strictArgs makes argument mistakes usage errors (exit 2) everywhere, and
// makes a command group refuse an unknown subcommand instead of printing
// its help and succeeding.
func strictArgs(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.NoArgs
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				var ue usageError
				if errors.As(err, &ue) {
					return err
				}
				if !cmd.HasSubCommands() && len(args) > 0 && strings.HasPrefix(err.Error(), "unknown command") {
					// cobra.NoArgs on a command with nothing under it:
					// the word was not a command but most likely what a
					// flag should carry ("topics create orders").
					return usagef("%s takes no arguments, got %q%s", strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), args[0], flagHint(cmd, args[0]))
				}
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		strictArgs(sub)
	}
}

// flagHint suggests the flag an argument given to a command that takes
// none most likely belongs to: the first of --topic, --group, --user the
// command has and was not given.
func flagHint(cmd *cobra.Command, arg string) string {
	for _, name := range []string{"topic", "group", "user"} {
		if f := cmd.Flags().Lookup(name); f != nil && !f.Changed {
			return fmt.Sprintf(": name the %s with --%s %s", name, name, arg)
		}
	}
	return ""
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the tidemark version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionText)
			return nil
		},
	}
}
