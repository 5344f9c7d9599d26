package config_test

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/gr00tgw/gr00tgw/config"
)

// Layering: defaults, then the environment (the reference server's GR00T_*
// names work), then flags; every value remembers where it came from.
func ExampleLoad() {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	_ = fs.Parse([]string{"--threads=4"})
	l, err := config.Load(config.Sources{
		Environ: []string{"GR00T_WARMUP_RUNS=5", "GR00TGW_LOG_FORMAT=text"},
		Flags:   fs,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range []string{"addr", "warmup_runs", "log.format", "threads"} {
		fmt.Println(k, l.Provenance[k])
	}
	fmt.Println(l.Config.WarmupRuns, l.Config.Log.Format, l.Config.Threads)
	// Output:
	// addr default
	// warmup_runs env GR00T_WARMUP_RUNS
	// log.format env GR00TGW_LOG_FORMAT
	// threads flag --threads
	// 5 text 4
}
