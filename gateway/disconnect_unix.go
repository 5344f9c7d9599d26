//go:build linux || darwin || freebsd || netbsd || openbsd

package gateway

import (
	"net"
	"syscall"
)

// peerClosed reports whether the client closed its side of conn: a
// non-blocking MSG_PEEK read of one byte returns 0 (orderly shutdown) or a
// reset. Bytes already sent (a pipelined request) are left in place; any
// conn other than a TCP one (TLS, the in-memory conns of tests) reports
// false.
func peerClosed(conn net.Conn) bool {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || err == syscall.ECONNRESET
		return true
	})
	return closed
}
