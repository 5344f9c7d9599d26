//go:build darwin || freebsd || netbsd || openbsd

package gateway

// fdPeerClosed is peekClosed where there is no POLLRDHUP.
func fdPeerClosed(fd int) bool { return peekClosed(fd) }
