//go:build !linux

package main

import "os"

// isTerminal reports whether f looks like a terminal: a character device
// (without the termios ioctl of isatty_linux.go; /dev/null passes too, so
// a redirected bench may draw its bar there, harmlessly).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
