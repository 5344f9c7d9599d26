// Command gr00tgw is the GR00T N1.7 serving gateway: one binary whose
// subcommands serve the HTTP API, run the host pipeline or the model offline,
// verify plugins and print configuration. Each subcommand lives in its own
// file and registers itself in init.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand of gr00tgw.
type command struct {
	name    string
	summary string
	// run executes the subcommand with the arguments after its name.
	run func(ctx context.Context, args []string) error
}

var commands = map[string]*command{}

// register adds c to the subcommand table; it panics on a duplicate name.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("gr00tgw: command " + c.name + " registered twice")
	}
	commands[c.name] = c
}

// errUsage marks an error whose message is a usage problem (exit code 2).
var errUsage = errors.New("usage")

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gr00tgw <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-15s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "gr00tgw: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := c.run(ctx, os.Args[2:])
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "gr00tgw %s: %v\n", c.name, err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
