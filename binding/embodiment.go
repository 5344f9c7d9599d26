package binding

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/service"
)

// pluginEmbodiment adapts one loaded plugin to service.Embodiment. It never
// changes plugin: a reload binds a new pluginEmbodiment, and the gateway
// retires the old one after its requests finish, so one request's pre and
// post always run on one plugin version. Safe for concurrent use.
type pluginEmbodiment struct {
	p    *plugins.Plugin
	info service.EmbodimentInfo
}

var _ service.Embodiment = (*pluginEmbodiment)(nil)

func newPluginEmbodiment(p *plugins.Plugin) *pluginEmbodiment {
	d := p.Describe()
	info := service.EmbodimentInfo{
		Name: d.Embodiment, ID: d.ProjectorSlot, Plugin: d.Name, PluginVersion: d.Version,
		ActionHorizon: d.ActionHorizon, InstructionChars: [2]int{d.Language.MinChars, d.Language.MaxChars},
	}
	for _, c := range d.Cameras {
		info.Cameras = append(info.Cameras, c.Key)
		if info.VideoDeltaIndices == nil {
			info.VideoDeltaIndices = append([]int(nil), c.DeltaIndices...)
		}
	}
	for _, s := range d.State {
		info.StateGroups = append(info.StateGroups, service.Group{Key: s.Key, Dim: s.Dim})
	}
	for _, a := range d.Actions {
		info.ActionGroups = append(info.ActionGroups, service.Group{Key: a.Key, Dim: a.Dim})
	}
	info.ControlHz, _ = p.ControlHz()
	return &pluginEmbodiment{p: p, info: info}
}

var _ service.Reencoder = (*pluginEmbodiment)(nil)

// CanReencode reports whether the plugin exports gw_reencode.
func (e *pluginEmbodiment) CanReencode() bool { return e.p.CanReencode() }

// Reencode runs the plugin's gw_reencode (rtc.mode reencode).
func (e *pluginEmbodiment) Reencode(ctx context.Context, in *service.ReencodeInput) ([]float32, int, error) {
	out, err := e.p.Reencode(ctx, &plugins.ReencodeInput{RequestID: in.RequestID, Embodiment: in.Embodiment, StateDType: in.StateDtype,
		ActionPred: in.ActionPred, Rows: in.Rows, Dim: in.Dim, Shift: in.Shift,
		PrevState: e.stateGroups(in.PrevState), State: e.stateGroups(in.State)})
	if err != nil {
		return nil, 0, pluginErr(err)
	}
	return out.ActionPred, out.Rows, nil
}

// Describe reports the plugin's gw_describe as service.EmbodimentInfo.
func (e *pluginEmbodiment) Describe() service.EmbodimentInfo { return e.info }

// stateGroups orders st by the plugin's state groups.
func (e *pluginEmbodiment) stateGroups(st map[string][]float64) []plugins.StateGroup {
	out := make([]plugins.StateGroup, 0, len(e.info.StateGroups))
	for _, g := range e.info.StateGroups {
		out = append(out, plugins.StateGroup{Key: g.Key, Values: st[g.Key]})
	}
	return out
}

// Pre runs the plugin's pre stage.
func (e *pluginEmbodiment) Pre(ctx context.Context, in *service.PreInput) ([]float32, error) {
	cams := make([]plugins.Camera, len(in.Cameras))
	for i, c := range in.Cameras {
		cams[i] = plugins.Camera{Key: c.Key, Frames: c.Frames, Height: c.Height, Width: c.Width}
	}
	out, err := e.p.Pre(ctx, &plugins.PreInput{
		RequestID: in.RequestID, Embodiment: in.Embodiment, Instruction: in.Instruction,
		StateDType: in.StateDtype, Cameras: cams, State: e.stateGroups(in.State),
	})
	if err != nil {
		return nil, pluginErr(err)
	}
	return out.State, nil
}

// Post runs the plugin's post stage.
func (e *pluginEmbodiment) Post(ctx context.Context, in *service.PostInput) (map[string][]float32, error) {
	out, err := e.p.Post(ctx, &plugins.PostInput{
		RequestID: in.RequestID, Embodiment: e.info.Name, StateDType: in.StateDtype,
		ActionPred: in.ActionPred, Horizon: in.Horizon, Dim: in.Dim, State: e.stateGroups(in.State),
	})
	if err != nil {
		return nil, pluginErr(err)
	}
	acts := make(map[string][]float32, len(out.Actions))
	for _, a := range out.Actions {
		acts[a.Key] = a.Values
	}
	return acts, nil
}

// pluginErr maps plugin host errors onto the gateway's: guest validation
// failures → 400 naming the field, a busy pool → 503, a guest timeout →
// 504, the rest (traps, bad results, a closed plugin) → 500.
func pluginErr(err error) error {
	var ge *plugins.GuestError
	if errors.As(err, &ge) && !ge.Internal {
		field := ge.Field
		if field == "" {
			field = "state"
		}
		return &service.HandlerError{Status: http.StatusBadRequest, Code: ge.Code, Field: field, Err: errors.New(ge.Message)}
	}
	switch {
	case errors.Is(err, plugins.ErrPoolExhausted):
		return &service.HandlerError{Status: http.StatusServiceUnavailable, Code: service.CodeQueueFull, RetryAfter: 1, Err: err}
	case errors.Is(err, plugins.ErrTimeout):
		return &service.HandlerError{Status: http.StatusGatewayTimeout, Code: service.CodeTimeout, Err: err}
	}
	return err
}

// OpenEmbodiment loads the plugin in dir that serves tag, outside a
// server (offline tools such as `gr00tgw run`). The caller calls close.
func OpenEmbodiment(ctx context.Context, dir, tag string, opts ...plugins.Option) (_ service.Embodiment, close func(context.Context) error, err error) {
	reg, err := plugins.NewRegistry(dir, opts...)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			_ = reg.Close(ctx)
		}
	}()
	ents, err := reg.Scan()
	if err != nil {
		return nil, nil, err
	}
	var tags []string
	for _, e := range ents {
		if e.Tag != tag {
			tags = append(tags, e.Tag)
			continue
		}
		p, err := reg.Open(ctx, e)
		if err != nil {
			return nil, nil, err
		}
		return newPluginEmbodiment(p), func(ctx context.Context) error {
			return errors.Join(p.Close(ctx), reg.Close(ctx))
		}, nil
	}
	return nil, nil, fmt.Errorf("no plugin in %s serves embodiment %s (found: %v)", dir, tag, tags)
}
