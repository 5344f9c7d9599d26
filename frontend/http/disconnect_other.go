//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package httpfront

import "net"

// peerClosed is not detected on this platform: a disconnected client's
// request runs to its deadline.
func peerClosed(net.Conn) bool { return false }

// tcpConn: no disconnect detection here, so no connection is watched.
func tcpConn(net.Conn) *net.TCPConn { return nil }
