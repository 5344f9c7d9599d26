//go:build !unix

package benchcpu

import "time"

func now() time.Duration { return 0 }
