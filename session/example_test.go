package session_test

import (
	"fmt"
	"time"

	"github.com/gr00tgw/gr00tgw/session"
)

// A predict in a session: look the session up, derive RTC's defaults from
// what it measured, then record the new chunk.
func Example() {
	now := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	s, _ := session.New(session.Config{Now: func() time.Time { return now }})

	// First predict of robot-7: no session yet, so no RTC.
	if _, ok := s.Lookup("robot-7", "droid", "1.0.0"); !ok {
		fmt.Println("new session")
	}
	prev := make([]float32, 40*132) // the model's normalised action_pred
	s.Update("robot-7", session.Update{Embodiment: "droid", PluginVersion: "1.0.0",
		ActionPred: prev, Rows: 40, Cols: 132, Latency: 150 * time.Millisecond})

	// One second later (15 rows executed at 15 Hz) the next observation.
	now = now.Add(time.Second)
	st, _ := s.Lookup("robot-7", "droid", "1.0.0")
	const controlHz, horizon = 15, 40
	o := session.AutoOverlap(now.Sub(st.ProducedAt), controlHz, horizon)
	f := session.AutoFrozen(st.Latency, controlHz, o)
	fmt.Printf("overlap %d frozen %d from a %d-row chunk\n", o, f, st.Rows)

	// The plugin was upgraded meanwhile: the chunk is not used.
	st, _ = s.Lookup("robot-7", "droid", "1.1.0")
	fmt.Printf("dropped: %s, chunk %v\n", st.Dropped, st.Chunk != nil)
	// Output:
	// new session
	// overlap 25 frozen 3 from a 40-row chunk
	// dropped: plugin_version_changed, chunk false
}
