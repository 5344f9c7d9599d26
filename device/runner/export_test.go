package runner

import "time"

// SetStableUptime sets how long a started runner must stay up before its
// consecutive failures reset (tests; default 30s).
func SetStableUptime(o *Options, d time.Duration) { o.stableUptime = d }
