package benchmodel

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/gr00tgw/gr00tgw/core/model"
	"github.com/gr00tgw/gr00tgw/core/safetensors"
)

// CheckpointShards is the number of safetensors shards WriteCheckpoint
// splits the weights into (the public N1.7-3B snapshot has two).
const CheckpointShards = 2

// sideFiles are copied from the tiny checkpoint: they describe the
// embodiments (processor configs, statistics, projector slots), not the
// model's size, and cover every shipped plugin
// (oxe_droid_relative_eef_relative_joint, libero_sim).
var sideFiles = []string{model.EmbodimentIDsFile, model.StatisticsFile, "processor_config.json"}

// WriteCheckpoint writes a real-size GR00T N1.7-3B checkpoint with random
// weights to dir: every tensor of model.Plan(model.DefaultConfig()) except
// lm_head.weight, with the real names, shapes and BF16 dtype, in
// CheckpointShards shards with model.safetensors.index.json, plus a
// config.json with the real dimensions (tinyDir's config.json with the
// size keys replaced; no backbone_config.json, so the built-in Qwen3-VL
// architecture applies, as for the real snapshot) and tinyDir's
// embodiment side files. Values are synth's (deterministic per name,
// variance 1/fan_in, norm gains around 1). About 6.3 GB. dir must be
// absent or empty. Shards are written under a .partial name and renamed,
// and the index comes last, so an interrupted run leaves no
// complete-looking checkpoint (but a non-empty dir: remove it).
func WriteCheckpoint(dir, tinyDir string) error {
	cfgJSON, err := realConfigJSON(filepath.Join(tinyDir, model.ConfigFile))
	if err != nil {
		return err
	}
	return writeCheckpoint(dir, tinyDir, model.Plan(model.DefaultConfig()), cfgJSON)
}

// writeCheckpoint writes the tensors of plan (less lm_head.weight) as
// random BF16 shards with their index, cfgJSON as config.json and
// tinyDir's side files into dir (absent or empty).
func writeCheckpoint(dir, tinyDir string, plan []model.TensorSpec, cfgJSON []byte) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("benchmodel: %s is not empty: refusing to write a checkpoint into it", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("benchmodel: %w", err)
	}
	var specs []model.TensorSpec
	var total int64
	for _, s := range plan {
		if s.Name == "lm_head.weight" {
			continue
		}
		specs = append(specs, s)
		total += 2 * s.NumElements()
	}
	// Shards: consecutive runs of the plan of about total/CheckpointShards bytes.
	weightMap := map[string]string{}
	var shards [][]model.TensorSpec
	var cur int64
	for _, s := range specs {
		if len(shards) == 0 || (cur >= total/CheckpointShards*int64(len(shards)) && len(shards) < CheckpointShards) {
			shards = append(shards, nil)
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], s)
		cur += 2 * s.NumElements()
	}
	for i, sh := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		for _, s := range sh {
			weightMap[s.Name] = name
		}
		if err := writeShard(filepath.Join(dir, name), sh); err != nil {
			return err
		}
	}
	idx, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{safetensors.IndexFile: idx, model.ConfigFile: cfgJSON}
	for _, f := range sideFiles {
		b, err := os.ReadFile(filepath.Join(tinyDir, f))
		if err != nil {
			return fmt.Errorf("benchmodel: %w", err)
		}
		files[f] = b
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names { // config.json, then the index: written last
		if n == safetensors.IndexFile {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, n), files[n], 0o644); err != nil {
			return fmt.Errorf("benchmodel: %w", err)
		}
	}
	return os.WriteFile(filepath.Join(dir, safetensors.IndexFile), files[safetensors.IndexFile], 0o644)
}

// realConfigJSON is the tiny config.json with the N1.7-3B dimensions.
func realConfigJSON(tinyConfig string) ([]byte, error) {
	b, err := os.ReadFile(tinyConfig)
	if err != nil {
		return nil, fmt.Errorf("benchmodel: %w", err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("benchmodel: %s: %w", tinyConfig, err)
	}
	d := model.DefaultConfig()
	c["backbone_embedding_dim"] = d.BackboneEmbeddingDim
	c["select_layer"] = d.SelectLayer
	c["hidden_size"] = d.HiddenSize
	c["input_embedding_dim"] = d.InputEmbeddingDim
	c["max_seq_len"] = d.MaxSeqLen
	dit, _ := c["diffusion_model_cfg"].(map[string]any)
	vl, _ := c["vl_self_attention_cfg"].(map[string]any)
	if dit == nil || vl == nil {
		return nil, fmt.Errorf("benchmodel: %s: no diffusion_model_cfg / vl_self_attention_cfg", tinyConfig)
	}
	dit["num_layers"] = d.DiT.NumLayers
	dit["num_attention_heads"] = d.DiT.NumAttentionHeads
	dit["attention_head_dim"] = d.DiT.AttentionHeadDim
	dit["output_dim"] = d.DiT.OutputDim
	vl["num_layers"] = d.VLSelfAttention.NumLayers
	vl["num_attention_heads"] = d.VLSelfAttention.NumAttentionHeads
	vl["attention_head_dim"] = d.VLSelfAttention.AttentionHeadDim
	return json.MarshalIndent(c, "", "  ")
}

// writeShard writes one safetensors file of BF16 tensors in plan order.
func writeShard(path string, specs []model.TensorSpec) error {
	type entry struct {
		DType   string  `json:"dtype"`
		Shape   []int   `json:"shape"`
		Offsets []int64 `json:"data_offsets"`
	}
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, s := range specs {
		n := 2 * s.NumElements()
		hdr[s.Name] = entry{"BF16", s.Shape, []int64{off, off + n}}
		off += n
	}
	hb, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(hb)%8 != 0 { // data starts 8-byte aligned, as safetensors writes it
		hb = append(hb, ' ')
	}
	tmp := path + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("benchmodel: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 4<<20)
	var pre [8]byte
	binary.LittleEndian.PutUint64(pre[:], uint64(len(hb)))
	w.Write(pre[:])
	w.Write(hb)
	for _, s := range specs {
		if _, err := w.Write(synthBF16(s.Name, int(s.NumElements()), fanIn(s.Name, s.Shape))); err != nil {
			return fmt.Errorf("benchmodel: %s: %w", tmp, err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("benchmodel: %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("benchmodel: %s: %w", tmp, err)
	}
	return os.Rename(tmp, path)
}

// synthBF16 is synth(name, n, fanIn) as little-endian bf16 bytes (the
// values are bf16 already: the conversion is exact), generated in chunks
// in parallel without the float32 copy.
func synthBF16(name string, n, fanIn int) []byte {
	out := make([]byte, 2*n)
	chunks := (n + synthChunk - 1) / synthChunk
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	for range min(chunks, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				ci := next
				next++
				mu.Unlock()
				if ci >= chunks {
					return
				}
				lo, hi := ci*synthChunk, min((ci+1)*synthChunk, n)
				vals := synthRange(name, n, fanIn, ci)
				for i, v := range vals[:hi-lo] {
					binary.LittleEndian.PutUint16(out[2*(lo+i):], uint16(math.Float32bits(v)>>16))
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// NeedsCheckpoint reports whether dir is absent or empty: where a caller
// may WriteCheckpoint. Any other directory is used as it is.
func NeedsCheckpoint(dir string) bool {
	ents, err := os.ReadDir(dir)
	return err != nil && os.IsNotExist(err) || err == nil && len(ents) == 0
}
