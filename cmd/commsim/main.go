// Command commsim runs collective-communication experiments on simulated and
// real accelerator fabrics.
//
//	commsim topo show dgx-h100
//	commsim topo export cluster:2x8,rail=true > fabric.yaml
//
// Data goes to stdout; diagnostics to stderr. Usage errors exit with status 2
// and a one-line reason, runtime failures with status 1.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError marks bad input: the exit status is 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// run executes the CLI and returns the exit status. It never lets a panic
// reach the user as a trace.
func run(args []string, stdout, stderr io.Writer) (status int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "commsim: internal error: %v (please report this)\n", p)
			status = 1
		}
	}()
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "commsim: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "commsim",
		Short: "Collective communication on simulated and real accelerator fabrics",
		Example: `  commsim topo show dgx-h100
  commsim topo show cluster:4x8,nicbw=400Gb/s
  commsim topo export mac-tb5:4 > macs.yaml`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newTopoCmd(), newBenchCmd(), newCompareCmd(), newWhatIfCmd(), newTrainCmd(), newDevicesCmd(), newCalibrateCmd(), newFidelityCmd())
	// Unknown subcommands and bad arguments are usage errors too.
	for _, c := range append(root.Commands(), root) {
		wrapArgs(c)
	}
	return root
}

// wrapArgs turns a command's argument-validation failures into usage errors.
// A command that only groups subcommands prints its help when called bare
// and refuses unknown subcommands.
func wrapArgs(c *cobra.Command) {
	if c.Run == nil && c.RunE == nil {
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if c.Args != nil {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	} else {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if !cmd.HasSubCommands() || len(args) == 0 {
				return nil
			}
			return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}
