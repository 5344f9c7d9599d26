// Command misbehave is a hostile test plugin built with the PDK. It serves
// the fake embodiment "test_misbehave" and behaves well unless the request
// asks otherwise (instruction for pre, action_pred[0] for post):
//
//	hang      infinite loop in pre (deadline)
//	grow      unbounded memory growth in pre (memory limit → trap)
//	panic     Go panic in pre (trap)
//	spin:N    busy loop of N iterations, then a normal answer
//	log       writes to stdout and gw_host.log, then a normal answer
//	invalid   a validation error {invalid_state, state.s}
//	fail      a non-validation plugin error (status 2)
//	action_pred[0] == 42 in post: panic (trap in post)
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared ./plugins/testdata/hostile/misbehave
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/pdk"
)

func init() { pdk.Register(&plugin{}) }

func main() {}

type plugin struct {
	state [8]float32
	act   [4 * 2]float32
	sink  [][]byte
}

func (p *plugin) Describe() abi.Description {
	return abi.Description{
		Name: "misbehave", Version: "0.1.0", ABI: abi.Version,
		Embodiment: "test_misbehave", ProjectorSlot: 10,
		Cameras:       []abi.Camera{{Key: "cam", DeltaIndices: []int{0}, Height: 64, Width: 64}},
		State:         []abi.StateGroup{{Key: "s", Dim: 2, DeltaIndices: []int{0}}},
		Actions:       []abi.ActionGroup{{Key: "a", Dim: 2, Rep: abi.RepAbsolute, Type: abi.TypeNonEEF, Format: abi.FormatDefault}},
		Language:      abi.Language{Key: "instruction", MinChars: 1, MaxChars: 100},
		ActionHorizon: 4, MaxStateDim: 8, MaxActionDim: 8,
		Layout: abi.Layout{Name: "test", FrameOrder: []string{"cam@0"}, VitGridTHW: [3]int{1, 4, 4}, TokensPerImage: 4, LMax: 16, FrameAspect: [2]float64{0.5, 2}, FrameSide: [2]int{16, 1024}},
	}
}

func (p *plugin) Init(cfg *abi.InitConfig) error { return nil }

var spinSink int

func (p *plugin) Pre(obs *pdk.Observation) ([]float32, error) {
	switch ins := obs.Instruction; {
	case ins == "hang":
		for {
			spinSink++
		}
	case ins == "grow":
		for {
			p.sink = append(p.sink, make([]byte, 8<<20))
		}
	case ins == "panic":
		panic("misbehave: asked to panic")
	case strings.HasPrefix(ins, "spin:"):
		n, _ := strconv.Atoi(ins[5:])
		for i := 0; i < n; i++ {
			spinSink += i
		}
	case ins == "logflood": // 80 MB of gw_host.log in one call
		line := strings.Repeat("x", 4096)
		for range 20000 {
			pdk.Log(abi.LogError, line)
		}
	case ins == "log":
		fmt.Println("misbehave: hello from stdout")
		pdk.Log(abi.LogWarn, "misbehave: hello from gw_host.log")
	case ins == "invalid":
		return nil, pdk.Errorf(abi.CodeInvalidState, "state.s", "expected 2 values, got 3")
	case ins == "fail":
		return nil, errors.New("misbehave: internal failure")
	}
	s := obs.StateGroup("s")
	if s == nil || len(s.Values) != 2 {
		return nil, pdk.Errorf(abi.CodeInvalidState, "state.s", "expected 2 values")
	}
	clear(p.state[:])
	p.state[0], p.state[1] = float32(s.Values[0]*0.5), float32(s.Values[1]*0.5)
	return p.state[:], nil
}

func (p *plugin) Post(in *pdk.PostInput) (*pdk.Actions, error) {
	if len(in.ActionPred) > 0 && in.ActionPred[0] == 42 {
		panic("misbehave: asked to trap in post")
	}
	if in.Horizon < 4 || in.Dim < 2 {
		return nil, pdk.Errorf(abi.CodeInvalidAction, "action_pred", "too small")
	}
	for k := 0; k < 4; k++ {
		p.act[2*k], p.act[2*k+1] = in.ActionPred[k*in.Dim], in.ActionPred[k*in.Dim+1]
	}
	return &pdk.Actions{Groups: []pdk.ActionOutput{{Key: "a", Horizon: 4, Dim: 2, Values: p.act[:]}}}, nil
}
