package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gr00tgw/gr00tgw/frontend/secure"
)

func init() {
	register(&command{name: "keys", summary: "API key tools (auth.api_keys_file)", verbs: []*command{
		{name: "new", summary: "print a new random API key (give it to the client; store its hash)",
			run: func(_ context.Context, args []string) error { return keysNew(os.Stdout, args) }},
		{name: "hash", summary: "read API keys from stdin, one a line; print each as a key-file line sha256:<hex>",
			run: func(_ context.Context, args []string) error { return keysHash(os.Stdin, os.Stdout, args) }},
	}})
}

func keysNew(w io.Writer, args []string) error {
	fs := newFlags("keys new", "", "Prints a new random API key (32 bytes from crypto/rand, base64url, prefixed gr00tgw_).\nPipe it to `gr00tgw keys hash` for the line of auth.api_keys_file.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	k, err := secure.NewKey()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, k)
	return err
}

func keysHash(r io.Reader, w io.Writer, args []string) error {
	fs := newFlags("keys hash", "[--label LABEL] < KEYS",
		"Reads API keys from stdin, one a line (never from the command line, which other\nusers and the shell history see), and prints for each the line of auth.api_keys_file:\nsha256:<hex of SHA-256 of the key> [LABEL]. Blank lines are skipped.")
	label := fs.String("label", "", "label appended to each line (a name for logs; not secret)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if strings.ContainsAny(*label, "#\n\r") {
		return fmt.Errorf("%w: --label: no '#' or line breaks", errUsage)
	}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		k := strings.TrimSpace(sc.Text())
		if k == "" {
			continue
		}
		line := secure.Hash(k)
		if l := strings.Join(strings.Fields(*label), " "); l != "" {
			line += " " + l
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	if n == 0 {
		return errors.New("no key on stdin (one key a line)")
	}
	return nil
}
