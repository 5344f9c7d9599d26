package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// One flag library for every subcommand: pflag, with interspersed flags
// (`plugin verify FILE.wasm --cases DIR` and `plugin verify --cases DIR
// FILE.wasm` are the same), --long names shared across subcommands for one
// concept (--weights-dir, --plugins-dir, --plugin-cache-dir, --policy,
// --threads, --embodiment, --request, --out), and the old names kept as
// deprecated aliases for one release (deprecatedAlias).

// helpOut receives help text (a variable for tests).
var helpOut io.Writer = os.Stdout

// newFlags returns the flag set of subcommand name ("run", "plugin
// verify"). synopsis follows "usage: gr00tgw NAME" in its help; about, when
// set, is printed under it. Help goes to stdout, errors and deprecation
// notices to stderr (parseFlags).
func newFlags(name, synopsis, about string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetInterspersed(true)
	fs.SortFlags = false
	fs.SetOutput(os.Stderr)
	fs.Usage = func() {
		w := helpOut
		fmt.Fprintf(w, "usage: gr00tgw %s %s\n", name, synopsis)
		if about != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimRight(about, "\n"))
		}
		if fs.HasAvailableFlags() {
			fmt.Fprintf(w, "\nflags:\n%s", fs.FlagUsagesWrapped(100))
		}
	}
	return fs
}

// deprecatedAlias defines --old as an alias of the already defined --cur
// (same value); using it works and prints a deprecation notice. Aliases are
// hidden from help.
func deprecatedAlias(fs *pflag.FlagSet, old, cur string) {
	f := fs.Lookup(cur)
	if f == nil {
		panic("gr00tgw: alias of undefined flag --" + cur)
	}
	a := fs.VarPF(f.Value, old, "", f.Usage)
	a.NoOptDefVal = f.NoOptDefVal
	if err := fs.MarkDeprecated(old, "use --"+cur+" (--"+old+" goes in the next release)"); err != nil {
		panic(err)
	}
}

// parseFlags parses a flag set the way every gr00tgw subcommand does:
// -h/--help → flag.ErrHelp after the help (exit 0), other problems →
// errUsage (exit 2). Positional arguments are left in fs.Args(); callers
// that take none say so with noArgs. A single-dash long flag (-out, the
// std flag package's spelling that run, encode, arena and plugin accepted
// until this release) is read as --out with a notice.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(singleDashCompat(fs, args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// noArgs refuses positional arguments.
func noArgs(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}

// singleDashCompat rewrites -name[=v] to --name[=v] where name (two or
// more characters) is a long flag of fs; flag values and everything after
// "--" are left alone.
func singleDashCompat(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 2 {
			name, _, _ := strings.Cut(a[1:], "=")
			if f := fs.Lookup(name); f != nil && len(name) > 1 {
				fmt.Fprintf(os.Stderr, "gr00tgw %s: %s is read as -%s; write --%s (single-dash long flags go in the next release)\n", fs.Name(), a, a, name)
				a = "-" + a
			}
		}
		out = append(out, a)
		// A value-taking --flag (or -x) without "=" consumes the next arg.
		if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && i+1 < len(args) {
			var f *pflag.Flag
			if strings.HasPrefix(a, "--") {
				f = fs.Lookup(a[2:])
			} else if len(a) == 2 {
				f = fs.ShorthandLookup(a[1:])
			}
			if f != nil && f.NoOptDefVal == "" {
				i++
				out = append(out, args[i])
			}
		}
	}
	return out
}
