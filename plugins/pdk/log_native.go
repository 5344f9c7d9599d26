//go:build !wasip1

package pdk

import (
	"context"
	"log/slog"
)

// Log sends msg to the host's structured logger at level (abi.LogDebug …
// abi.LogError). Natively it goes to slog.Default.
func Log(level int32, msg string) {
	slog.Default().Log(context.Background(), slog.Level(level), msg, "plugin", "native")
}
