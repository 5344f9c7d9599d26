//go:build !linux

package runner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gr00tgw/gr00tgw/device/runner"
)

// Off Linux the runner does not start: Open, Serve and SocketPair return
// ErrUnsupported (make vet cross-compiles this for darwin).
func TestUnsupportedOffLinux(t *testing.T) {
	if _, err := runner.Open(context.Background(), runner.Options{Command: []string{"gr00tgw", "runner"}}); !errors.Is(err, runner.ErrUnsupported) {
		t.Fatalf("Open: %v", err)
	}
	if err := runner.Serve(context.Background(), nil, nil, runner.ServeOptions{}); !errors.Is(err, runner.ErrUnsupported) {
		t.Fatalf("Serve: %v", err)
	}
	if _, _, err := runner.SocketPair(); !errors.Is(err, runner.ErrUnsupported) {
		t.Fatalf("SocketPair: %v", err)
	}
}
