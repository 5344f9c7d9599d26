//go:build darwin || freebsd || netbsd || openbsd

package httpfront

import "syscall"

// fdPeerClosed is a non-blocking one-byte MSG_PEEK where there is no
// POLLRDHUP: 0 bytes (orderly shutdown) or a reset. It misses a FIN behind
// unread bytes (a TLS close_notify).
func fdPeerClosed(fd int) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(fd, b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return (n == 0 && err == nil) || err == syscall.ECONNRESET
}
