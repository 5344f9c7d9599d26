//go:build unix

package torchrunner

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByMe reports whether st belongs to this process's user.
func ownedByMe(st fs.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(s.Uid) == os.Getuid()
}
