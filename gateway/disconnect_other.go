//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package gateway

import "net"

// peerClosed is not detected on this platform: a disconnected client's
// request runs to its deadline.
func peerClosed(net.Conn) bool { return false }
