package httpfront

import "golang.org/x/sys/unix"

// fdPeerClosed polls fd for POLLRDHUP (the peer's FIN), a hang-up or an
// error, without waiting: unlike a MSG_PEEK it sees a FIN behind bytes the
// server has not read (a TLS client's close_notify alert comes first).
func fdPeerClosed(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(p, 0)
	return err == nil && n > 0 && p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
}
