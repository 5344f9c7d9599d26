//go:build !linux

package runner

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/gr00tgw/gr00tgw/device"
)

// ErrUnsupported is what Open, Serve and SocketPair return off Linux: the
// runner needs memfd_create, SOCK_SEQPACKET with SCM_RIGHTS and Pdeathsig.
// Serve the backend in the gateway's process (device.isolation: inproc,
// the default there).
var ErrUnsupported = fmt.Errorf("runner: the runner process is Linux-only (this is %s): use device.isolation inproc", runtime.GOOS)

// Pool is the Linux runner pool; off Linux Open never returns one.
type Pool struct{}

var _ device.Backend = (*Pool)(nil)

// Open returns ErrUnsupported.
func Open(context.Context, Options) (*Pool, error) { return nil, ErrUnsupported }

// Predict returns ErrUnsupported.
func (*Pool) Predict(context.Context, *device.Inputs) (*device.Result, error) {
	return nil, ErrUnsupported
}

// Facts is empty.
func (*Pool) Facts() device.Facts { return device.Facts{} }

// Close does nothing.
func (*Pool) Close() error { return nil }

// Serve returns ErrUnsupported.
func Serve(context.Context, *net.UnixConn, device.Backend, ServeOptions) error {
	return ErrUnsupported
}

// SocketPair returns ErrUnsupported.
func SocketPair() (*net.UnixConn, *os.File, error) { return nil, nil, ErrUnsupported }
