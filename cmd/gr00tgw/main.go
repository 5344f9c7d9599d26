// Command gr00tgw is the GR00T N1.7 serving gateway: one binary whose
// subcommands serve the HTTP API, run the host pipeline or the model offline,
// verify plugins and print configuration. Each subcommand lives in its own
// file and registers itself in init; every one parses its flags with pflag
// (flags.go): GNU-style --long flags, before or after positional arguments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// command is one subcommand of gr00tgw, or, with verbs, a group of them
// (`plugin verify`, `plugin new`, `config print`).
type command struct {
	name    string
	summary string
	// run executes the subcommand with the arguments after its name; it
	// returns flag.ErrHelp after printing its help for -h/--help.
	run func(ctx context.Context, args []string) error
	// verbs, when set, are the sub-subcommands; run is then the dispatch
	// (runVerbs) and summary the group's one line.
	verbs []*command
}

var commands = map[string]*command{}

// register adds c to the subcommand table; it panics on a duplicate name.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("gr00tgw: command " + c.name + " registered twice")
	}
	if c.verbs != nil && c.run == nil {
		c.run = func(ctx context.Context, args []string) error { return runVerbs(ctx, c, args) }
	}
	commands[c.name] = c
}

// errUsage marks an error whose message is a usage problem (exit code 2).
var errUsage = errors.New("usage")

// usage lists every subcommand (verbs as "group verb") with its summary.
func usage(w io.Writer) {
	fmt.Fprint(w, "usage: gr00tgw <command> [flags] [args]   (flags may come before or after args)\n\ncommands:\n")
	for _, n := range slices.Sorted(maps.Keys(commands)) {
		c := commands[n]
		if c.verbs == nil {
			fmt.Fprintf(w, "  %-15s %s\n", n, c.summary)
			continue
		}
		for _, v := range c.verbs {
			fmt.Fprintf(w, "  %-15s %s\n", n+" "+v.name, v.summary)
		}
	}
	fmt.Fprint(w, "\n`gr00tgw help COMMAND` or `gr00tgw COMMAND --help` shows a command's flags.\n")
}

// runVerbs dispatches `group verb args...`.
func runVerbs(ctx context.Context, g *command, args []string) error {
	list := func(w io.Writer) {
		fmt.Fprintf(w, "usage: gr00tgw %s <verb> [flags] [args]\n\nverbs:\n", g.name)
		for _, v := range g.verbs {
			fmt.Fprintf(w, "  %-15s %s\n", g.name+" "+v.name, v.summary)
		}
	}
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			list(helpOut)
			return flag.ErrHelp
		}
		for _, v := range g.verbs {
			if v.name == args[0] {
				return v.run(ctx, args[1:])
			}
		}
	}
	list(os.Stderr)
	names := make([]string, len(g.verbs))
	for i, v := range g.verbs {
		names[i] = v.name
	}
	if len(args) == 0 {
		return fmt.Errorf("%w: want `gr00tgw %s %s ...`", errUsage, g.name, strings.Join(names, "|"))
	}
	return fmt.Errorf("%w: unknown verb %q (want %s)", errUsage, args[0], strings.Join(names, ", "))
}

// dispatch runs gr00tgw with args (os.Args[1:]) and returns the exit code:
// 0, 1 for a failure, 2 for a usage problem.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "--help", "help":
		if name != "help" || len(rest) == 0 {
			usage(stdout)
			return 0
		}
		// help SUB [VERB] is SUB [VERB] --help.
		name, rest = rest[0], append(append([]string(nil), rest[1:]...), "--help")
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "gr00tgw: unknown command %q\n\n", name)
		usage(stderr)
		return 2
	}
	err := c.run(ctx, rest)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	full := c.name
	for _, v := range c.verbs {
		if len(rest) > 0 && rest[0] == v.name {
			full += " " + v.name
		}
	}
	fmt.Fprintf(stderr, "gr00tgw %s: %v\n", full, err)
	if errors.Is(err, errUsage) {
		fmt.Fprintf(stderr, "(`gr00tgw help %s` lists its flags)\n", full)
		return 2
	}
	return 1
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
