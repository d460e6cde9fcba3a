// Command commsim runs collective-communication experiments on simulated and
// real accelerator fabrics.
//
//	commsim topo show dgx-h100
//	commsim topo export cluster:2x8,rail=true > fabric.yaml
//
// Data goes to stdout; diagnostics to stderr. Usage errors exit with status 2
// and a one-line reason, runtime failures with status 1; output that cannot
// be written is a runtime failure. Files are written whole or not at all
// (files.go).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/commsim/commsim/internal/suggest"
)

func main() {
	exitOnSignalWithoutPartialFiles()
	softMemoryLimit(os.Getenv)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// defaultMemoryLimit is the Go heap's soft limit where GOMEMLIMIT sets
// none. Without one the collector lets the heap grow to twice what is
// live before it runs: two sizes of a sweep, each holding a plan of
// millions of steps (128 GB200's unfolded trees), then peaked at 8.5 GB
// where 6.0 GB does, in the same time, under the 8 GB that every
// documented limit keeps to (docs/performance.md: Limits and their memory).
const defaultMemoryLimit = 6 << 30

// softMemoryLimit sets defaultMemoryLimit unless GOMEMLIMIT is set, which
// the runtime has already read.
func softMemoryLimit(getenv func(string) string) {
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
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
//
// Every command writes its data through one stdout that keeps the first
// write error; run checks it when the command returns, so output lost to a
// full disk or a closed pipe fails the run (status 1) in every command,
// with no check of its own. It is not buffered: a sweep's rows appear as
// they are measured, as in nccl-tests.
func run(args []string, stdout, stderr io.Writer) (status int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "commsim: internal error: %v (please report this)\n", p)
			status = 1
		}
	}()
	out := &stickyWriter{w: stdout}
	root := newRoot(out, stderr)
	root.SetArgs(args)
	err := root.Execute()
	outErr := out.err
	if outErr != nil && errors.Is(err, outErr) {
		err = nil // the command failed for want of its output: say that once
	}
	if err != nil {
		msg := err.Error()
		status = 1
		var ue usageError
		if errors.As(err, &ue) {
			// A usage error is one line, whatever a flag's value held.
			msg, status = strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(msg), 2
		}
		fmt.Fprintf(stderr, "commsim: %s\n", msg)
	}
	if outErr != nil {
		fmt.Fprintf(stderr, "commsim: writing the output: %v\n", outErr)
		status = max(status, 1)
	}
	return status
}

// stickyWriter fails every write after the first that fails, and keeps
// that error.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	s.err = err
	return n, err
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
		Version:       version(),
	}
	// A flag given an empty value (an unset variable in a script) is a
	// usage error, not the default: --out "" wrote nothing and exited 0.
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		var err error
		c.Flags().Visit(func(f *pflag.Flag) {
			if err == nil && f.Value.Type() == "string" && strings.TrimSpace(f.Value.String()) == "" {
				err = usagef("--%s is empty: give a value, or leave the flag out for the default", f.Name)
			}
		})
		return err
	}
	root.SetVersionTemplate("commsim {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{plainFlagError(err)} })
	root.AddCommand(newTopoCmd(), newBenchCmd(), newCompareCmd(), newWhatIfCmd(), newTrainCmd(), newDevicesCmd(), newCalibrateCmd(), newFidelityCmd(), newTuningCmd())
	// cobra adds help and completion only when it executes, past wrapArgs'
	// reach; its help prints "Unknown help topic" and succeeds.
	root.SetHelpCommand(newHelpCmd())
	root.InitDefaultCompletionCmd()
	// Unknown subcommands and bad arguments are usage errors too.
	for _, c := range append(root.Commands(), root) {
		wrapArgs(c)
	}
	return root
}

// newHelpCmd is cobra's help command, but a topic that names no command
// is a usage error.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				if cmd == nil {
					cmd = c.Root()
				}
				unknown := strings.Join(args, " ")
				if len(rest) > 0 {
					unknown = rest[0]
				}
				return usagef("no help topic %q in %q%s", unknown, cmd.CommandPath(), didYouMean(unknown, subcommandNames(cmd)))
			}
			return cmd.Help()
		},
		ValidArgsFunction: func(c *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, sub := range availableSubcommands(cmd) {
				names = append(names, cobra.CompletionWithDesc(sub.Name(), sub.Short))
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	}
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
			err := check(cmd, args)
			var ue usageError
			if err == nil || errors.As(err, &ue) {
				return err // wrapped already (wrapArgs may see a command twice)
			}
			// cobra's "accepts 1 arg(s), received 0" says nothing of what
			// the argument is: the usage line does.
			return usagef("%v; usage: %s", err, cmd.UseLine())
		}
	} else {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if !cmd.HasSubCommands() || len(args) == 0 {
				return nil
			}
			return usagef("unknown command %q for %q%s", args[0], cmd.CommandPath(), didYouMean(args[0], subcommandNames(cmd)))
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// availableSubcommands are c's subcommands a user may call (not hidden or
// deprecated).
func availableSubcommands(c *cobra.Command) []*cobra.Command {
	var subs []*cobra.Command
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			subs = append(subs, sub)
		}
	}
	return subs
}

// subcommandNames are the names of c's available subcommands.
func subcommandNames(c *cobra.Command) []string {
	var names []string
	for _, sub := range availableSubcommands(c) {
		names = append(names, sub.Name())
	}
	return names
}

// version is the module's version as the go command stamped it (a tag, or
// a pseudo-version with the commit), "devel" for a build from a checkout.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" || info.Main.Version == "(devel)" {
		v := "devel"
		if ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v += " " + s.Value[:12]
				}
			}
		}
		return v
	}
	return info.Main.Version
}

// didYouMean is "; did you mean X?" when s looks like a typo of one of
// the options, or "".
func didYouMean(s string, options []string) string { return suggest.DidYouMean(s, options) }

// strconvRE is what pflag quotes of a value strconv refused.
var strconvRE = regexp.MustCompile(`strconv\.Parse(Bool|Int|Uint|Float): parsing "(?:[^"\\]|\\.)*": (invalid syntax|value out of range)`)

// plainFlagError says what a flag wants in place of the strconv error
// pflag quotes ("strconv.ParseBool: parsing \"maybe\": invalid syntax").
func plainFlagError(err error) error {
	m := strconvRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	want := map[string]string{"Bool": "want true or false", "Int": "want a whole number", "Uint": "want a whole number of 0 or more", "Float": "want a number"}[m[1]]
	if m[2] == "value out of range" {
		want = "out of range"
	}
	return errors.New(strings.Replace(err.Error(), m[0], want, 1))
}
