package tensor

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

// TestTune is a manual tuning aid that interleaves blocking configurations
// and keeps the best time of each (the machine is shared and noisy):
//
//	TUNE=1 TUNE_KC=256,384 TUNE_REPS=8 go test -run TestTune -v ./core/tensor/
func TestTune(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip("set TUNE=1")
	}
	kcs := []int{blockKC}
	if v := os.Getenv("TUNE_KC"); v != "" {
		kcs = kcs[:0]
		for _, f := range strings.Split(v, ",") {
			n, _ := strconv.Atoi(f)
			kcs = append(kcs, n)
		}
	}
	reps := 6
	if v := os.Getenv("TUNE_REPS"); v != "" {
		reps, _ = strconv.Atoi(v)
	}
	filter := os.Getenv("TUNE_SHAPE")
	defer func(kc int) { blockKC = kc }(blockKC)
	var kerns []Variant
	for _, v := range Variants() {
		if vs := os.Getenv("TUNE_VARIANTS"); (vs == "" && v.Kernels == Default()) || strings.Contains(","+vs+",", ","+v.Name+",") {
			kerns = append(kerns, v)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range benchShapes {
		if !strings.Contains(s.name, filter) {
			continue
		}
		x := randSlice(r, s.m*s.k)
		wfs := benchWeights(r, s.n, s.k, s.rotate)
		ws := make([][]Packed, len(kerns))
		for i, v := range kerns {
			for _, wf := range wfs {
				ws[i] = append(ws[i], v.Kernels.PackLinear(wf, s.n, s.k))
			}
		}
		y := make([]float32, s.m*s.n)
		best := make([]time.Duration, len(kcs)*len(kerns))
		bestCPU := make([]time.Duration, len(kcs)*len(kerns))
		for i := range best {
			best[i] = time.Hour
			bestCPU[i] = time.Hour
		}
		for rep := 0; rep < reps; rep++ {
			for i, kc := range kcs {
				blockKC = kc
				for j, v := range kerns {
					c0 := benchcpu.Now()
					t0 := time.Now()
					v.Kernels.MatMul(y, x, s.m, ws[j][rep%s.rotate], nil)
					best[i*len(kerns)+j] = min(best[i*len(kerns)+j], time.Since(t0))
					bestCPU[i*len(kerns)+j] = min(bestCPU[i*len(kerns)+j], benchcpu.Now()-c0)
				}
			}
		}
		for i, kc := range kcs {
			for j, v := range kerns {
				b := best[i*len(kerns)+j]
				flop := 2 * float64(s.m*s.n*s.k)
				threads := float64(defaultTeam().threads())
				t.Logf("%-32s %-12s kc=%-4d best %8.2f ms %6.1f GFLOP/s | per CPU-time x%d: %6.1f GFLOP/s", s.name, v.Name, kc,
					b.Seconds()*1e3, flop/b.Seconds()/1e9, int(threads), flop/(bestCPU[i*len(kerns)+j].Seconds()/threads)/1e9)
			}
		}
	}
}
