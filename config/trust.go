package config

import (
	"fmt"
	"strings"
)

// Safety configures the safety gate every action chunk passes after the
// plugin's post stage (package safety, docs/safety.md). Policies are "off",
// "reject" or "clamp".
//
// The default is off: the tiny random checkpoint's chunks jerk past the
// shipped DROID limits, so reject would refuse the demo (and every golden
// request) and clamp would change the golden answers; a deployment turns
// the gate on for its real checkpoint.
type Safety struct {
	// Policy is the gate's policy for every embodiment without an entry
	// in Policies.
	Policy string `koanf:"policy" flag:"safety-policy" usage:"safety gate policy of every embodiment: off, reject (422 unsafe_action) or clamp (clip into the plugin's action_limits, report safety.clamped)"`
	// Policies overrides Policy per embodiment: "<tag>=<policy>" entries
	// (a list, like every key, so that it has a flag and an environment
	// name).
	Policies []string `koanf:"policies" flag:"safety-policies" usage:"per-embodiment safety policies, <tag>=<policy> comma-separated (overrides safety.policy)"`
	// LimitsFile overrides plugins' action limits: a YAML map
	// <tag>: {<group>: {min, max, gripper, max_step_delta, max_jump,
	// jump_from}}; a group listed replaces that group's limits. Read when
	// an embodiment is bound (start-up, reload).
	LimitsFile string `koanf:"limits_file" flag:"safety-limits-file" usage:"YAML file overriding plugins' action limits: <tag>: {<group>: {min, max, gripper, max_step_delta, max_jump}} (empty: the plugins' own)"`
}

// PolicyFor returns the safety policy of embodiment tag (Validate has
// checked the entries).
func (s *Safety) PolicyFor(tag string) string {
	for _, e := range s.Policies {
		if t, p, ok := strings.Cut(e, "="); ok && strings.TrimSpace(t) == tag {
			return strings.TrimSpace(p)
		}
	}
	return s.Policy
}

// Record configures the flight recorder (package record,
// docs/recording.md): one file per recorded predict in a size-bounded ring
// directory. Off while Dir is empty.
type Record struct {
	Dir      string  `koanf:"dir" flag:"record-dir" usage:"flight recorder directory, created 0700, files 0600 (empty: no recording)"`
	MaxBytes int     `koanf:"max_bytes" flag:"record-max-bytes" usage:"size bound of the record directory in bytes (oldest files are deleted first)"`
	Sample   float64 `koanf:"sample" flag:"record-sample" usage:"fraction of predicts recorded, in (0, 1]"`
	// Sessions, when set, records only requests of these session ids.
	Sessions          []string `koanf:"sessions" flag:"record-sessions" usage:"record only these session ids, comma-separated (empty: every request)"`
	RedactInstruction bool     `koanf:"redact_instruction" flag:"record-redact-instruction" usage:"leave the instruction out of records (they then cannot be replayed)"`
}

var safetyPolicies = []string{"off", "reject", "clamp"}

// trustChecks validates safety.* and record.*.
func (c *Config) trustChecks() []keyCheck {
	return []keyCheck{
		{"safety.policy", func() error { return oneOf(c.Safety.Policy, safetyPolicies...) }},
		{"safety.policies", func() error {
			seen := map[string]bool{}
			for _, e := range c.Safety.Policies {
				t, p, ok := strings.Cut(e, "=")
				t, p = strings.TrimSpace(t), strings.TrimSpace(p)
				switch {
				case !ok || t == "":
					return fmt.Errorf("%q: want <tag>=<policy>", e)
				case seen[t]:
					return fmt.Errorf("%q: embodiment %s listed twice", e, t)
				}
				seen[t] = true
				if err := oneOf(p, safetyPolicies...); err != nil {
					return fmt.Errorf("embodiment %s: %w", t, err)
				}
			}
			return nil
		}},
		{"safety.limits_file", func() error { return readableFile(c.Safety.LimitsFile) }},
		{"record.max_bytes", func() error {
			if c.Record.MaxBytes <= 0 {
				return fmt.Errorf("%d: want > 0", c.Record.MaxBytes)
			}
			return nil
		}},
		{"record.sample", func() error {
			if !(c.Record.Sample > 0 && c.Record.Sample <= 1) {
				return fmt.Errorf("%v is outside (0, 1]", c.Record.Sample)
			}
			return nil
		}},
	}
}
