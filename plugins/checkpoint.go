package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// Checkpoint holds the side files of a GR00T checkpoint that plugins are
// initialised from. Either field may be nil: a plugin then receives no
// statistics (and usually fails Init) or its own processor defaults.
type Checkpoint struct {
	Statistics      []byte // statistics.json: {tag: {state, action, relative_action}}
	ProcessorConfig []byte // processor_config.json: {processor_class, processor_kwargs}
}

// ReadCheckpoint reads statistics.json and processor_config.json from a
// checkpoint directory. A missing processor_config.json is not an error.
func ReadCheckpoint(dir string) (Checkpoint, error) {
	var c Checkpoint
	var err error
	if c.Statistics, err = os.ReadFile(filepath.Join(dir, "statistics.json")); err != nil {
		return c, fmt.Errorf("plugins: checkpoint: %w", err)
	}
	c.ProcessorConfig, err = os.ReadFile(filepath.Join(dir, "processor_config.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return c, fmt.Errorf("plugins: checkpoint: %w", err)
	}
	return c, nil
}

// InitConfigJSON builds the gw_init document for embodiment tag: the tag's
// entry of statistics.json, processor_kwargs with modality_configs reduced
// to the tag's entry, and the manifest's config map.
func InitConfigJSON(tag string, ck Checkpoint, config map[string]any) ([]byte, error) {
	doc := struct {
		Embodiment string                     `json:"embodiment"`
		Statistics json.RawMessage            `json:"statistics,omitempty"`
		Processor  map[string]json.RawMessage `json:"processor,omitempty"`
		Config     map[string]any             `json:"config,omitempty"`
	}{Embodiment: tag, Config: config}
	if len(ck.Statistics) > 0 {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(ck.Statistics, &all); err != nil {
			return nil, fmt.Errorf("plugins: statistics.json: %w", err)
		}
		st, ok := all[tag]
		if !ok {
			return nil, fmt.Errorf("plugins: statistics.json has no entry for embodiment %s", tag)
		}
		doc.Statistics = st
	}
	if len(ck.ProcessorConfig) > 0 {
		var pc struct {
			Kwargs map[string]json.RawMessage `json:"processor_kwargs"`
		}
		if err := json.Unmarshal(ck.ProcessorConfig, &pc); err != nil {
			return nil, fmt.Errorf("plugins: processor_config.json: %w", err)
		}
		if pc.Kwargs != nil {
			doc.Processor = pc.Kwargs
			if raw, ok := pc.Kwargs["modality_configs"]; ok {
				var mc map[string]json.RawMessage
				if err := json.Unmarshal(raw, &mc); err != nil {
					return nil, fmt.Errorf("plugins: processor_config.json: modality_configs: %w", err)
				}
				delete(doc.Processor, "modality_configs")
				if m, ok := mc[tag]; ok {
					doc.Processor["modality_config"] = m
				}
			}
		}
	}
	return json.Marshal(doc)
}

var _ = abi.Version
