package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// The checkpoint's per-embodiment side files, parsed once here for every
// caller: embodiment_id.json (tag → projector slot) and the shape of
// statistics.json (tag → modality → key → width). processor_config.json
// is core/processor's; the plugins read statistics.json's values
// themselves (gw_init).

// EmbodimentIDsFile and StatisticsFile are the side files' names.
const (
	EmbodimentIDsFile = "embodiment_id.json"
	StatisticsFile    = "statistics.json"
)

// EmbodimentIDs maps embodiment tags to projector slots.
type EmbodimentIDs map[string]int

// LoadEmbodimentIDs reads dir/embodiment_id.json. A checkpoint without the
// file yields (nil, nil): callers then trust the plugin's declared slot.
func LoadEmbodimentIDs(dir string) (EmbodimentIDs, error) {
	raw, err := os.ReadFile(filepath.Join(dir, EmbodimentIDsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return ParseEmbodimentIDs(raw)
}

// ParseEmbodimentIDs decodes an embodiment_id.json document; every slot
// must be non-negative.
func ParseEmbodimentIDs(raw []byte) (EmbodimentIDs, error) {
	var ids EmbodimentIDs
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, fmt.Errorf("model: %s: %w", EmbodimentIDsFile, err)
	}
	for tag, id := range ids {
		if id < 0 {
			return nil, fmt.Errorf("model: %s: embodiment %s: slot %d is negative", EmbodimentIDsFile, tag, id)
		}
	}
	return ids, nil
}

// Slot returns tag's projector slot, or an error naming the file and the
// tags it lists.
func (ids EmbodimentIDs) Slot(tag string) (int, error) {
	id, ok := ids[tag]
	if !ok {
		tags := make([]string, 0, len(ids))
		for t := range ids {
			tags = append(tags, t)
		}
		sort.Strings(tags)
		return 0, fmt.Errorf("%s has no entry for embodiment %s (it lists %v)", EmbodimentIDsFile, tag, tags)
	}
	return id, nil
}

// StatisticsShape is the structure of statistics.json without its values:
// tag → modality ("state", "action", "relative_action") → key → width
// (the length of the key's min array; for per-step statistics such as
// relative_action's [horizon][D], the inner length D).
type StatisticsShape map[string]map[string]map[string]int

// LoadStatisticsShape reads dir/statistics.json (required).
func LoadStatisticsShape(dir string) (StatisticsShape, error) {
	raw, err := os.ReadFile(filepath.Join(dir, StatisticsFile))
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return ParseStatisticsShape(raw)
}

// ParseStatisticsShape decodes the shape of a statistics.json document.
// Every key must carry min and max; every statistic of a key is a [D]
// array of numbers or a [steps][D] array of such arrays, all of one
// shape.
func ParseStatisticsShape(raw []byte) (StatisticsShape, error) {
	var doc map[string]map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("model: %s: %w", StatisticsFile, err)
	}
	out := make(StatisticsShape, len(doc))
	for tag, mods := range doc {
		out[tag] = make(map[string]map[string]int, len(mods))
		for mod, keys := range mods {
			out[tag][mod] = make(map[string]int, len(keys))
			for key, st := range keys {
				where := fmt.Sprintf("model: %s: %s.%s.%s", StatisticsFile, tag, mod, key)
				if st["min"] == nil || st["max"] == nil {
					return nil, fmt.Errorf("%s: no min/max", where)
				}
				var shape [2]int
				for _, name := range sortedStatNames(st) {
					sh, err := statShape(st[name])
					if err != nil {
						return nil, fmt.Errorf("%s.%s: %w", where, name, err)
					}
					if name == sortedStatNames(st)[0] {
						shape = sh
					} else if sh != shape {
						return nil, fmt.Errorf("%s: %s has shape %v, %s %v", where, name, sh, sortedStatNames(st)[0], shape)
					}
				}
				out[tag][mod][key] = shape[1]
			}
		}
	}
	return out, nil
}

func sortedStatNames(st map[string]json.RawMessage) []string {
	names := make([]string, 0, len(st))
	for n := range st {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// statShape is [steps, D] of a [D] (steps 0) or [steps][D] array.
func statShape(raw json.RawMessage) ([2]int, error) {
	var flat []float64
	if err := json.Unmarshal(raw, &flat); err == nil {
		if len(flat) == 0 {
			return [2]int{}, errors.New("empty")
		}
		return [2]int{0, len(flat)}, nil
	}
	var nested [][]float64
	if err := json.Unmarshal(raw, &nested); err != nil {
		return [2]int{}, errors.New("not a [D] or [steps][D] array of numbers")
	}
	if len(nested) == 0 || len(nested[0]) == 0 {
		return [2]int{}, errors.New("empty")
	}
	for i, r := range nested {
		if len(r) != len(nested[0]) {
			return [2]int{}, fmt.Errorf("row %d has %d values, row 0 %d", i, len(r), len(nested[0]))
		}
	}
	return [2]int{len(nested), len(nested[0])}, nil
}
