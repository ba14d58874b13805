// Package cli is the `bighive` command line: subcommands over the client
// library, with aligned tables for people and --json (one object per line)
// for programs. cmd/bighive is its thin main and adds the commands that need
// the server packages (tools/cli/dev, tools/demo, tools/bench) through
// Main's extra argument, so this package links only the client library.
//
// Exit status: 0 on success, 1 when a command fails (the error is on
// stderr), 2 for a usage error.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/status"

	"bighive/client"
	"bighive/internal/obs"
	"bighive/internal/tlsconf"
)

// DefaultMasters is the master address of the local dev cluster
// (`bighive dev`), used when neither --masters nor BIGHIVE_MASTERS is set.
const DefaultMasters = "127.0.0.1:7100"

// Command is one subcommand.
type Command struct {
	Name string
	// Args is the synopsis after the name, e.g. "TABLE ROW [--limit N]".
	Args    string
	Summary string
	// Example is one or more example invocations, without the leading
	// "bighive ", one per line; `bighive COMMAND --help` prints them.
	Example string
	// Run runs the command; its flags are parsed by env.Parse.
	Run func(ctx context.Context, env *Env, args []string) error
}

// Env is what a command runs with: the global flags and the outputs.
type Env struct {
	Stdout, Stderr io.Writer
	// Masters are the master addresses (--masters).
	Masters []string
	// JSON selects one JSON object per line instead of tables (--json).
	JSON bool
	// Timeout bounds the command (--timeout; 0 is none).
	Timeout time.Duration

	// TLS are the --tls-* files (env BIGHIVE_TLS_CERT, BIGHIVE_TLS_KEY,
	// BIGHIVE_TLS_CA); none: plaintext.
	TLS tlsconf.Files

	cmd     *Command
	masters string
	token   string // --token / BIGHIVE_TOKEN
}

// ExitError is an error with its own exit status.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Usagef is a usage error (exit status 2).
func Usagef(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

func (e *Env) globals(fs *flag.FlagSet) {
	fs.StringVar(&e.masters, "masters", e.masters, "comma-separated master addresses (env BIGHIVE_MASTERS)")
	fs.BoolVar(&e.JSON, "json", e.JSON, "print one JSON object per line")
	fs.DurationVar(&e.Timeout, "timeout", e.Timeout, "give up after this long (0: no limit)")
	tlsconf.AddFlags(fs, &e.TLS)
	fs.StringVar(&e.token, "token", e.token, "bearer token sent with every call (env BIGHIVE_TOKEN)")
}

// FlagSet returns a flag set for the running command, with the global
// flags registered too (so they may follow the command's name).
func (e *Env) FlagSet() *flag.FlagSet {
	name := "bighive"
	if e.cmd != nil {
		name = "bighive " + e.cmd.Name
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e.globals(fs)
	return fs
}

// Parse parses args with fs, allowing flags between and after positional
// arguments ("--" ends the flags), and returns the positional arguments.
// It checks their count is within [min, max] (max < 0: unbounded).
func (e *Env) Parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				e.help(fs)
				return nil, &ExitError{Code: 0, Err: errHelpShown}
			}
			return nil, Usagef("%v\nusage: %s", err, e.usage())
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	e.Masters = splitList(e.masters)
	if len(pos) < min || max >= 0 && len(pos) > max {
		return nil, Usagef("usage: %s", e.usage())
	}
	return pos, nil
}

// errHelpShown ends a command whose --help has been printed.
var errHelpShown = errors.New("help shown")

// help prints the running command's synopsis, summary, flags and examples.
func (e *Env) help(fs *flag.FlagSet) {
	w := e.Stdout
	fmt.Fprintf(w, "usage: %s\n", e.usage())
	if e.cmd == nil {
		return
	}
	fmt.Fprintf(w, "\n%s\n\nflags:\n", e.cmd.Summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if e.cmd.Example != "" {
		fmt.Fprintln(w, "\nexample:")
		for _, line := range strings.Split(strings.TrimSpace(e.cmd.Example), "\n") {
			fmt.Fprintf(w, "  bighive %s\n", strings.TrimSpace(line))
		}
	}
}

func (e *Env) usage() string {
	if e.cmd == nil {
		return "bighive [--masters ADDRS] [--json] COMMAND ARGS"
	}
	return strings.TrimSpace("bighive " + e.cmd.Name + " " + e.cmd.Args)
}

// Client dials the masters.
func (e *Env) Client(ctx context.Context) (*client.Client, error) {
	if len(e.Masters) == 0 {
		e.Masters = splitList(e.masters)
	}
	opts, err := e.ClientOptions()
	if err != nil {
		return nil, err
	}
	return client.Dial(ctx, e.Masters, opts...)
}

// ClientOptions are the client options of the global flags: TLS under
// the --tls-* files when given, and the bearer token of --token.
func (e *Env) ClientOptions() ([]client.Option, error) {
	var opts []client.Option
	if e.token != "" {
		opts = append(opts, client.WithToken(e.token))
	}
	if !e.TLS.Enabled() {
		return opts, nil
	}
	src, err := tlsconf.Load(e.TLS, slog.New(slog.NewTextHandler(e.Stderr, nil)))
	if err != nil {
		return nil, Usagef("%v", err)
	}
	return append(opts, client.WithTransportCredentials(tlsconf.Credentials(src))), nil
}

// Table writes rows as an aligned table with a header.
func (e *Env) Table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Commands returns the built-in commands.
func Commands() []Command {
	return append([]Command{
		{Name: "create", Args: "TABLE --families CF[:maxversions=N][:maxage=DUR][:compression=CODEC],... [--splits K1,K2,...] [--compression none|snappy|zstd] [--granularity micros|millis]", Summary: "create a table", Example: "create t --families cf:maxversions=3,meta --splits user#5,user#9\ncreate t --families cf,blob:compression=none --compression zstd\ncreate t --families cf --granularity millis", Run: runCreate},
		{Name: "drop", Args: "TABLE", Summary: "delete a table and its data", Example: "drop t", Run: runDrop},
		{Name: "tables", Summary: "list the tables", Example: "tables --json", Run: runTables},
		{Name: "tablets", Args: "TABLE", Summary: "list a table's tablets: ranges, servers, sizes", Example: "tablets t", Run: runTablets},
		{Name: "tservers", Summary: "list the tservers", Example: "tservers", Run: runTServers},
		{Name: "put", Args: "TABLE ROW FAMILY:QUALIFIER VALUE [--timestamp MICROS]", Summary: "write one cell", Example: "put t user#1 cf:name alice\nput t user#1 cf:name bob --timestamp 1700000000000000", Run: runPut},
		{Name: "get", Args: "TABLE ROW [--families F1,F2] [--columns F:Q,...] [--versions N] [--keys-only]", Summary: "read one row", Example: "get t user#1\nget t user#1 --columns cf:name --versions 2", Run: runGet},
		{Name: "scan", Args: "TABLE [--start ROW] [--end ROW] [--prefix P] [--keys K1,K2,...] [--regex RE] [--limit N] [--reverse] [--count] [--families F1,F2] [--columns F:Q,...] [--versions N] [--keys-only]", Summary: "read rows in [start, end), or of a row list", Example: "scan t --prefix user# --limit 10\nscan t --start a --end m --columns cf:name --keys-only\nscan t --prefix event# --reverse --limit 5\nscan t --keys user#1,user#7\nscan t --prefix user# --count", Run: runScan},
		{Name: "read", Args: "TABLE [--start ROW] [--end ROW] [--prefix P] [--keys K1,K2,...] [--regex RE] [--limit N] [--reverse] [--count] [--families F1,F2] [--columns F:Q,...] [--versions N] [--keys-only]", Summary: "read rows in [start, end), or of a row list (the same as scan)", Example: "read t --prefix user# --regex \"user#[0-9]+\" --versions 1\nread t --end user#5 --reverse --limit 1", Run: runScan},
		{Name: "incr", Args: "TABLE ROW FAMILY:QUALIFIER [DELTA]", Summary: "add DELTA (default 1) to a 64-bit big-endian counter cell, atomically; prints the new value", Example: "incr t page#home cf:hits\nincr t page#home cf:hits -3", Run: runIncr},
		{Name: "append", Args: "TABLE ROW FAMILY:QUALIFIER VALUE", Summary: "append VALUE to a cell's latest value, atomically; prints the new cell", Example: "append t log#1 cf:events \",login\"", Run: runAppend},
		checkAndPutCommand,
		{Name: "delete", Args: "TABLE ROW [FAMILY[:QUALIFIER]]", Summary: "delete a row, a family of it, or a column of it", Example: "delete t user#1\ndelete t user#1 cf\ndelete t user#1 cf:name", Run: runDelete},
		{Name: "checkpoint", Args: "[TSERVER...]", Summary: "checkpoint the given tservers (default: every live one)", Example: "checkpoint\ncheckpoint 127.0.0.1:7201", Run: runCheckpoint},
		{Name: "split", Args: "TABLE ROW", Summary: "split the tablet holding ROW at ROW", Example: "split t user#5", Run: runSplit},
		mergeCommand,
		setCompressionCommand,
		compactCommand,
		backupCommand,
	}, append(append(append(append(schemaCommands(), dataCommands()...), statusCommands()...), grantCommands()...), cbtCommands()...)...)
}

// Main runs the command line args (without the program name) and returns
// the exit status. extra adds commands (they may replace built-in ones).
func Main(args []string, stdout, stderr io.Writer, extra ...Command) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, args, stdout, stderr, extra...)
}

// Run is Main with a context of the caller's.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, extra ...Command) int {
	cmds := map[string]Command{}
	for _, c := range append(Commands(), extra...) {
		cmds[c.Name] = c
	}
	masters := os.Getenv("BIGHIVE_MASTERS")
	if masters == "" {
		masters = DefaultMasters
	}
	env := &Env{Stdout: stdout, Stderr: stderr, masters: masters, TLS: tlsconf.FromEnv(), token: os.Getenv("BIGHIVE_TOKEN")}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintln(stdout, obs.Version("bighive"))
		return 0
	}
	fs := env.FlagSet()
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "bighive:", err)
		}
		usage(stderr, cmds)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	name := fs.Arg(0)
	if name == "help" {
		if fs.NArg() < 2 {
			usage(stdout, cmds)
			return 0
		}
		// `bighive help CMD` is `bighive CMD --help`: the command's full
		// help, its flags and examples.
		name = fs.Arg(1)
		if _, ok := cmds[name]; !ok {
			fmt.Fprintf(stderr, "bighive help: unknown command %q\n", name)
			usage(stderr, cmds)
			return 2
		}
		return Run(ctx, []string{name, "--help"}, stdout, stderr, extra...)
	}
	cmd, ok := cmds[name]
	if !ok {
		fmt.Fprintf(stderr, "bighive: unknown command %q\n", name)
		usage(stderr, cmds)
		return 2
	}
	env.cmd = &cmd
	env.Masters = splitList(env.masters)
	err := cmd.Run(ctx, env, fs.Args()[1:])
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Code == 0 {
			if !errors.Is(ee.Err, errHelpShown) {
				fmt.Fprintf(stdout, "usage: %s\n", env.usage())
			}
			return 0
		}
		fmt.Fprintf(stderr, "bighive %s: %v\n", name, ee.Err)
		return ee.Code
	}
	fmt.Fprintf(stderr, "bighive %s: %s\n", name, describe(err))
	return 1
}

// Context applies --timeout to ctx; commands call it after Parse, since
// the flag may follow the command's name.
func (e *Env) Context(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.Timeout > 0 {
		return context.WithTimeout(ctx, e.Timeout)
	}
	return context.WithCancel(ctx)
}

// describe formats an error for a person: a gRPC status as "Code: message".
func describe(err error) string {
	if st, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s: %s", st.Code(), st.Message())
	}
	return err.Error()
}

func usage(w io.Writer, cmds map[string]Command) {
	fmt.Fprintln(w, "usage: bighive [--masters ADDRS] [--json] [--timeout DUR] COMMAND ARGS")
	fmt.Fprintf(w, "masters default to $BIGHIVE_MASTERS, else %s (the `bighive dev` cluster)\n", DefaultMasters)
	fmt.Fprint(w, "`bighive help COMMAND` prints a command's full help; `bighive --version` the version\n\ncommands:\n")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", n, cmds[n].Summary)
	}
	tw.Flush()
}
