package binding

import (
	"encoding/json"
	"strings"

	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/service"
)

// modalityOf is tag's modality config as upstream serves it
// (get_modality_config): processor_config.json's
// processor_kwargs.modality_configs[tag] read verbatim (nulls kept as
// nulls), or, for a checkpoint without the file (the DROID release
// configuration), built from pc. checkServed has already checked the file
// against the plugin.
func modalityOf(ck *Checkpoint, tag string, pc *processor.Config) map[string]service.ModalityConfig {
	if ck.Processor != nil {
		var f struct {
			Kwargs struct {
				ModalityConfigs map[string]map[string]*service.ModalityConfig `json:"modality_configs"`
			} `json:"processor_kwargs"`
		}
		if err := json.Unmarshal(ck.Processor, &f); err == nil {
			if mc, ok := f.Kwargs.ModalityConfigs[tag]; ok {
				out := make(map[string]service.ModalityConfig, len(mc))
				for k, v := range mc {
					if v != nil {
						out[k] = *v
					}
				}
				if len(out) > 0 {
					return out
				}
			}
		}
	}
	return modalityFromConfig(pc)
}

// modalityFromConfig rebuilds the modality config from a processor
// configuration (lossless for the release layouts: action delta indices
// 0..horizon-1, language delta [0]).
func modalityFromConfig(pc *processor.Config) map[string]service.ModalityConfig {
	horizon := make([]int, pc.ActionHorizon)
	for i := range horizon {
		horizon[i] = i
	}
	acs := make([]service.ActionConfig, len(pc.ActionConfigs))
	for i, a := range pc.ActionConfigs {
		acs[i] = service.ActionConfig{Rep: strings.ToUpper(a.Rep), Type: strings.ToUpper(a.Type), Format: strings.ToUpper(a.Format)}
		if a.StateKey != "" {
			k := a.StateKey
			acs[i].StateKey = &k
		}
	}
	if len(acs) == 0 {
		acs = nil
	}
	lang := pc.LanguageKeys
	if len(lang) == 0 {
		lang = []string{service.DefaultLanguageKey}
	}
	return map[string]service.ModalityConfig{
		"video": {DeltaIndices: append([]int(nil), pc.VideoDeltaIndices...), ModalityKeys: append([]string(nil), pc.Cameras...)},
		"state": {DeltaIndices: append([]int(nil), pc.StateDeltaIndices...), ModalityKeys: append([]string(nil), pc.StateKeys...),
			SinCosEmbeddingKeys: pc.SinCosStateKeys, MeanStdEmbeddingKeys: pc.MeanStdStateKeys},
		"action":   {DeltaIndices: horizon, ModalityKeys: append([]string(nil), pc.ActionKeys...), ActionConfigs: acs},
		"language": {DeltaIndices: []int{0}, ModalityKeys: append([]string(nil), lang...)},
	}
}
