//go:build linux || darwin || freebsd || netbsd || openbsd

package httpfront

import "net"

// tcpConn is the TCP connection under conn: conn itself, or the one a TLS
// connection wraps (tls.Conn's NetConn, which secure's listener keeps);
// nil for anything else (the in-memory conns of tests).
func tcpConn(conn net.Conn) *net.TCPConn {
	if w, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = w.NetConn()
	}
	tc, _ := conn.(*net.TCPConn)
	return tc
}

// peerClosed reports whether the client closed its side of conn (a TCP
// connection, or TLS over one; false for anything else). Bytes already
// sent (a pipelined request, a TLS close_notify) are left in place.
func peerClosed(conn net.Conn) bool {
	tc := tcpConn(conn)
	if tc == nil {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = rc.Read(func(fd uintptr) bool {
		closed = fdPeerClosed(int(fd))
		return true
	})
	return closed
}
