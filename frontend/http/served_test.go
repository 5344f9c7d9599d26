package httpfront

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/gr00tgw/gr00tgw/service"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/gr00tgw/gr00tgw/config"
)

// secondTag is a fake second embodiment with DROID's observation layout
// under another tag and slot, so the fakes' demo and golden serve it too.
const secondTag = "test_second_robot"

func secondInfo(version string) service.EmbodimentInfo {
	info := droidInfo
	info.Name, info.ID, info.Plugin, info.PluginVersion = secondTag, 7, "second", version
	return info
}

// secondBinding is the second embodiment's binding at a plugin version.
func secondBinding(tb testing.TB, version string, enc service.Encoder) *service.Binding {
	demo := fakeDemo(tb, 0)
	req, err := withEmbodiment(demo.Request, secondTag)
	require.NoError(tb, err)
	demo.Request = req
	return &service.Binding{Embodiment: &fakeEmbodiment{info: secondInfo(version)}, Encoder: enc, Demo: demo,
		SHA256: "sha-second-" + version, Layout: service.Layout{Name: "second", MaxTextTokens: 51}}
}

// untagged is the demo body without its embodiment field (routed by the
// header or to the default).
func untagged(tb testing.TB) []byte {
	return body(tb, func(m map[string]any) { delete(m, "embodiment") })
}

// withSecond adds the second embodiment to the fixture's catalog.
func withSecond(tb testing.TB, version string) fixtureOpt {
	return func(c *config.Config, o *fixtureOptions, f *fixture) {
		f.catalog.put(secondTag, secondBinding(tb, version, f.enc))
	}
}

func predictResp(t *testing.T, b []byte) service.PredictResponse {
	t.Helper()
	var pr service.PredictResponse
	require.NoError(t, json.Unmarshal(b, &pr), string(b))
	return pr
}

// Requests are routed by the body's embodiment, the X-Embodiment header,
// or to the default; conflicting or unknown tags are 400 naming the field
// and listing the served tags, and never reach the device.
func TestRouting(t *testing.T) {
	f := newFixture(t, true, withSecond(t, "1.0.0"))
	withTag := func(tag string) []byte {
		return body(t, func(m map[string]any) { m["embodiment"] = tag })
	}
	for _, tc := range []struct {
		name string
		body []byte
		hdr  map[string]string
		want string
	}{
		{"default", body(t, nil), nil, droidInfo.Name},
		{"body", withTag(secondTag), nil, secondTag},
		{"header", untagged(t), map[string]string{service.EmbodimentHeader: secondTag}, secondTag},
		{"both agree", withTag(secondTag), map[string]string{service.EmbodimentHeader: secondTag}, secondTag},
	} {
		resp, b := f.do(t, "POST", "/predict", tc.body, tc.hdr)
		require.Equal(t, 200, resp.StatusCode, "%s: %s", tc.name, b)
		pr := predictResp(t, b)
		assert.Equal(t, tc.want, pr.Embodiment, tc.name)
		if tc.want == secondTag {
			assert.Equal(t, 7, pr.EmbodimentID, tc.name)
			assert.Equal(t, "second", pr.Plugin.Name, tc.name)
			assert.Equal(t, "second", pr.Layout, tc.name)
		}
	}
	// msgpack bodies route by their embodiment field too.
	m := demoRequest(t)
	m["embodiment"] = secondTag
	mp, err := msgpack.Marshal(m)
	require.NoError(t, err)
	resp, b := f.do(t, "POST", "/predict", mp, map[string]string{"Content-Type": "application/msgpack", "Accept": "application/json"})
	require.Equal(t, 200, resp.StatusCode, string(b))
	assert.Equal(t, secondTag, predictResp(t, b).Embodiment)

	calls := f.backend.calls.Load()
	for _, tc := range []struct {
		name, contains string
		body           []byte
		hdr            map[string]string
	}{
		{"conflict", "disagree", withTag(secondTag), map[string]string{service.EmbodimentHeader: droidInfo.Name}},
		{"unknown body", `served: [oxe_droid_relative_eef_relative_joint, test_second_robot]`, withTag("no_such_robot"), nil},
		{"unknown header", `\"no_such_robot\" is not served`, untagged(t), map[string]string{service.EmbodimentHeader: "no_such_robot"}},
	} {
		resp, b := f.do(t, "POST", "/predict", tc.body, tc.hdr)
		require.Equal(t, 400, resp.StatusCode, "%s: %s", tc.name, b)
		assert.Contains(t, string(b), `"field":"embodiment"`, tc.name)
		assert.Contains(t, string(b), tc.contains, tc.name)
	}
	assert.Equal(t, calls, f.backend.calls.Load(), "no misrouted request reached the device")
}

// A refused embodiment is reported in /info with its reason; requests for
// it are 400 with the reason and the served tags.
func TestRefusedEmbodiment(t *testing.T) {
	f := newFixture(t, true, withSecond(t, "1.0.0"), func(c *config.Config, o *fixtureOptions, f *fixture) {
		f.catalog.openErr[secondTag] = errors.New("statistics.json has no entry for it")
	})
	resp, b := f.do(t, "POST", "/predict", body(t, func(m map[string]any) { m["embodiment"] = secondTag }), nil)
	require.Equal(t, 400, resp.StatusCode, string(b))
	assert.Contains(t, string(b), "its plugin was refused: statistics.json has no entry for it")
	assert.Contains(t, string(b), "served: [oxe_droid_relative_eef_relative_joint]")
	var info struct {
		Embodiments []service.EmbodimentStatus `json:"embodiments"`
	}
	resp, b = f.do(t, "GET", "/info", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, json.Unmarshal(b, &info))
	require.Len(t, info.Embodiments, 2)
	assert.Equal(t, "ok", info.Embodiments[0].Status)
	assert.Equal(t, secondTag, info.Embodiments[1].Name)
	assert.Equal(t, "statistics.json has no entry for it", info.Embodiments[1].Status)

	// A refused default embodiment fails the start.
	g := newFixture(t, false, func(c *config.Config, o *fixtureOptions, f *fixture) {
		f.catalog.openErr[droidInfo.Name] = errors.New("plugin droid: sha256 mismatch")
	})
	err := g.core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return g.deps, nil })
	require.ErrorContains(t, err, "default embodiment oxe_droid_relative_eef_relative_joint: plugin droid: sha256 mismatch")
}

// config key embodiments limits the served set; the default is always in it,
// and a listed tag no plugin serves is refused with a reason.
func TestEmbodimentsKey(t *testing.T) {
	f := newFixture(t, true, withSecond(t, "1.0.0"), func(c *config.Config, o *fixtureOptions, f *fixture) {
		c.Embodiments = []string{"absent_robot"}
	})
	assert.Equal(t, []string{droidInfo.Name}, f.core.Served())
	assert.Contains(t, status(f, "absent_robot").Status, "no plugin serves it")
	assert.Nil(t, status(f, secondTag), "an unlisted plugin is neither served nor refused")
}

// /info, /demo, /v1/models and /v2/models know every embodiment.
func TestRoutesKnowEveryEmbodiment(t *testing.T) {
	f := newFixture(t, true, withSecond(t, "1.0.0"))
	var info struct {
		Embodiment  service.EmbodimentInfo     `json:"embodiment"`
		Embodiments []service.EmbodimentStatus `json:"embodiments"`
		Plugins     []service.PluginReport     `json:"plugins"`
		Layout      string                     `json:"layout"`
	}
	resp, b := f.do(t, "GET", "/info", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, json.Unmarshal(b, &info))
	assert.Equal(t, droidInfo.Name, info.Embodiment.Name, "top level: the default embodiment")
	assert.Equal(t, "droid", info.Layout)
	require.Len(t, info.Embodiments, 2)
	for i, want := range []string{droidInfo.Name, secondTag} {
		e := info.Embodiments[i]
		assert.Equal(t, want, e.Name)
		assert.Equal(t, "ok", e.Status)
		assert.NotEmpty(t, e.SHA256)
		require.NotNil(t, e.Warmup)
		assert.Equal(t, "golden", e.Warmup.Check)
		require.NotNil(t, e.Layout)
		require.NotNil(t, e.Demo)
		assert.True(t, e.Demo.Golden)
	}
	assert.True(t, info.Embodiments[0].Default)
	assert.Equal(t, 7, info.Embodiments[1].ID)
	assert.Len(t, info.Plugins, 2)

	// /demo: the default's request as shipped; ?embodiment=TAG carries the tag.
	var demo struct {
		Embodiment string          `json:"embodiment"`
		Request    json.RawMessage `json:"request"`
	}
	resp, b = f.do(t, "GET", "/demo", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, json.Unmarshal(b, &demo))
	assert.JSONEq(t, string(f.binding.Demo.Request), string(demo.Request))
	resp, b = f.do(t, "GET", "/demo?embodiment="+secondTag, nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, json.Unmarshal(b, &demo))
	assert.Equal(t, secondTag, demo.Embodiment)
	resp, b = f.do(t, "POST", "/predict", demo.Request, nil)
	require.Equal(t, 200, resp.StatusCode, string(b))
	assert.Equal(t, secondTag, predictResp(t, b).Embodiment, "the demo posted back is served by its embodiment")
	resp, b = f.do(t, "GET", "/demo?embodiment=nope", nil, nil)
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(b), `"field":"embodiment"`)

	var models struct {
		Data []struct {
			ID         string `json:"id"`
			Embodiment string `json:"embodiment"`
		} `json:"data"`
	}
	resp, b = f.do(t, "GET", "/v1/models", nil, nil)
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, json.Unmarshal(b, &models))
	require.Len(t, models.Data, 3)
	assert.Equal(t, "nvidia/GR00T-N1.7-3B", models.Data[0].ID)
	assert.Equal(t, droidInfo.Name, models.Data[1].ID)
	assert.Equal(t, secondTag, models.Data[2].ID)

	var md struct {
		Name       string         `json:"name"`
		Parameters map[string]any `json:"parameters"`
	}
	resp, b = f.do(t, "GET", "/v2/models/"+secondTag, nil, nil)
	require.Equal(t, 200, resp.StatusCode, string(b))
	require.NoError(t, json.Unmarshal(b, &md))
	assert.Equal(t, secondTag, md.Name)
	assert.Equal(t, float64(7), md.Parameters["embodiment_id"])
	resp, _ = f.do(t, "GET", "/v2/models/"+secondTag+"/ready", nil, nil)
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = f.do(t, "GET", "/v2/models/GR00T-N1.7-3B/ready", nil, nil)
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = f.do(t, "GET", "/v2/models/nope/ready", nil, nil)
	assert.Equal(t, 404, resp.StatusCode)
}

// Start-up binds the default first and reports ready; the others warm up
// in the background, answering 503 starting (with Retry-After) meanwhile.
func TestNonDefaultWarmsAfterReady(t *testing.T) {
	f := newFixture(t, false, withSecond(t, "1.0.0"))
	gate := make(chan struct{})
	second := secondBinding(t, "1.0.0", &gatedEncoder{Encoder: f.enc, gate: gate})
	f.catalog.put(secondTag, second)
	require.NoError(t, f.core.Start(context.Background(), func(context.Context) (*service.Deps, error) { return f.deps, nil }))
	_, b := f.do(t, "GET", "/health", nil, nil)
	assert.Contains(t, string(b), `"status":"ok"`)
	resp, b := f.do(t, "POST", "/predict", untagged(t), map[string]string{service.EmbodimentHeader: secondTag})
	require.Equal(t, 503, resp.StatusCode, string(b))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Contains(t, string(b), `"code":"starting"`)
	resp, _ = f.do(t, "GET", "/v2/models/"+secondTag+"/ready", nil, nil)
	assert.Equal(t, 503, resp.StatusCode)
	resp, _ = f.do(t, "POST", "/predict", body(t, nil), nil)
	assert.Equal(t, 200, resp.StatusCode, "the default serves while the others warm up")
	close(gate)
	require.True(t, f.core.WaitBound(context.Background()))
	resp, b = f.do(t, "POST", "/predict", untagged(t), map[string]string{service.EmbodimentHeader: secondTag})
	require.Equal(t, 200, resp.StatusCode, string(b))
}

// gatedEncoder blocks Encode until gate is closed.
type gatedEncoder struct {
	service.Encoder
	gate chan struct{}
}

func (g *gatedEncoder) Encode(ctx context.Context, d *service.Decoded, instruction string) (*service.Encoded, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Encoder.Encode(ctx, d, instruction)
}

// Reload adds, replaces and retires embodiments one by one; a candidate
// that fails to open or to warm up is refused and the serving version
// stays; the old binding closes after its in-flight requests.
func TestReloadChanges(t *testing.T) {
	f := newFixture(t, true)
	reload := func() ([]service.Change, error) { return f.core.Reload(context.Background()) }
	changeOf := func(chs []service.Change, tag string) service.Change {
		for _, c := range chs {
			if c.Embodiment == tag {
				return c
			}
		}
		return service.Change{}
	}
	servedVersion := func() string {
		resp, b := f.do(t, "POST", "/predict", untagged(t), map[string]string{service.EmbodimentHeader: secondTag})
		if resp.StatusCode != 200 {
			return resp.Status
		}
		return predictResp(t, b).Plugin.Version
	}

	// Added.
	f.catalog.put(secondTag, secondBinding(t, "1.0.0", f.enc))
	chs, err := reload()
	require.NoError(t, err)
	assert.Equal(t, "added", changeOf(chs, secondTag).Change)
	assert.Equal(t, "unchanged", changeOf(chs, droidInfo.Name).Change)
	assert.Equal(t, "1.0.0", servedVersion())

	// Replaced, with a request in flight on the old version: it finishes
	// on the old binding, which closes only then.
	f.backend.gate = make(chan struct{})
	f.backend.started = make(chan struct{}, 16)
	inflight := make(chan service.PredictResponse, 1)
	go func() {
		_, b := f.do(t, "POST", "/predict", untagged(t), map[string]string{service.EmbodimentHeader: secondTag})
		inflight <- predictResp(t, b)
	}()
	<-f.backend.started
	closedBefore := f.catalog.closed.Load()
	f.catalog.put(secondTag, secondBinding(t, "1.1.0", f.enc))
	reloaded := make(chan []service.Change, 1)
	go func() { chs, _ := reload(); reloaded <- chs }()
	// The candidate's warm-up waits behind the held device; release it.
	time.Sleep(20 * time.Millisecond)
	close(f.backend.gate)
	chs = <-reloaded
	assert.Equal(t, "replaced", changeOf(chs, secondTag).Change)
	old := <-inflight
	assert.Equal(t, "1.0.0", old.Plugin.Version, "the in-flight request finished on its version")
	require.Eventually(t, func() bool { return f.catalog.closed.Load() == closedBefore+1 }, 5*time.Second, time.Millisecond,
		"the replaced binding is closed once idle")
	f.backend.gate, f.backend.started = nil, nil
	assert.Equal(t, "1.1.0", servedVersion())

	// Refused: an open failure, then a failing warm-up; 1.1.0 keeps serving.
	f.catalog.put(secondTag, secondBinding(t, "1.2.0", f.enc))
	f.catalog.openErr[secondTag] = errors.New("wasm: plugin[second] sha256 mismatch")
	chs, err = reload()
	require.ErrorContains(t, err, "refused "+secondTag)
	assert.Equal(t, "refused", changeOf(chs, secondTag).Change)
	assert.Equal(t, "1.1.0", servedVersion())
	delete(f.catalog.openErr, secondTag)
	bad := secondBinding(t, "1.2.0", f.enc)
	bad.Demo.Golden = fakeDemo(t, 0.5).Golden
	f.catalog.put(secondTag, bad)
	chs, err = reload()
	require.Error(t, err)
	assert.Contains(t, changeOf(chs, secondTag).Reason, "PCC")
	assert.Equal(t, "1.1.0", servedVersion())
	var info struct {
		Embodiments []service.EmbodimentStatus `json:"embodiments"`
	}
	_, b := f.do(t, "GET", "/info", nil, nil)
	require.NoError(t, json.Unmarshal(b, &info))
	require.NotNil(t, info.Embodiments[1].LastError, "/info shows the refused revision next to the serving one")
	assert.Equal(t, "ok", info.Embodiments[1].Status)
	assert.Equal(t, "1.1.0", info.Embodiments[1].PluginVersion)

	// Retired: requests for it are 400; the default never notices.
	f.catalog.put(secondTag, nil)
	chs, err = reload()
	require.NoError(t, err)
	assert.Equal(t, "retired", changeOf(chs, secondTag).Change)
	resp, b := f.do(t, "POST", "/predict", untagged(t), map[string]string{service.EmbodimentHeader: secondTag})
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(b), `"field":"embodiment"`)
	resp, _ = f.do(t, "POST", "/predict", body(t, nil), nil)
	assert.Equal(t, 200, resp.StatusCode)

	// The default is never retired by a reload: its plugin gone is a
	// refusal, and the loaded version keeps serving.
	f.catalog.put(droidInfo.Name, nil)
	chs, err = reload()
	require.Error(t, err)
	assert.Equal(t, "refused", changeOf(chs, droidInfo.Name).Change)
	assert.Contains(t, changeOf(chs, droidInfo.Name).Reason, "no plugin serves it")
	resp, _ = f.do(t, "POST", "/predict", body(t, nil), nil)
	assert.Equal(t, 200, resp.StatusCode)
}

// Reloads run one at a time and not at all during shutdown; shutdown with
// a reload in flight waits for it and closes every binding it made.
func TestReloadDuringShutdown(t *testing.T) {
	f := newFixture(t, true)
	f.catalog.put(secondTag, secondBinding(t, "1.0.0", f.enc))
	f.backend.gate = make(chan struct{})
	f.backend.started = make(chan struct{}, 4)
	var wg sync.WaitGroup
	var reloadErr atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := f.core.Reload(context.Background())
		if err != nil {
			reloadErr.Store(err)
		}
	}()
	<-f.backend.started // the candidate's warm-up holds the device
	done := make(chan error, 1)
	go func() { done <- f.shutdown(context.Background()) }()
	time.Sleep(20 * time.Millisecond)
	close(f.backend.gate)
	require.NoError(t, <-done)
	wg.Wait()
	assert.Equal(t, f.catalog.opened.Load(), f.catalog.closed.Load(), "every opened binding is closed")
	assert.True(t, f.backend.closed.Load())
	_, err := f.core.Reload(context.Background())
	assert.Error(t, err)
}

// Concurrent requests for two embodiments interleaved with reloads: no
// failures, and each response is what that embodiment answers alone.
func TestInterleavedEmbodimentsWithReloads(t *testing.T) {
	f := newFixture(t, true, withSecond(t, "1.0.0"), func(c *config.Config, o *fixtureOptions, f *fixture) { c.QueueDepth = 64 })
	ref := map[string]map[string][][]float64{}
	for _, tag := range []string{droidInfo.Name, secondTag} {
		resp, b := f.do(t, "POST", "/predict", untagged(t), map[string]string{service.EmbodimentHeader: tag})
		require.Equal(t, 200, resp.StatusCode)
		ref[tag] = predictResp(t, b).Actions
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tag := []string{droidInfo.Name, secondTag}[(w+i)%2]
				resp, b := f.do(t, "POST", "/predict", untagged(t), map[string]string{service.EmbodimentHeader: tag})
				if resp.StatusCode != http.StatusOK {
					failures.Add(1)
					t.Errorf("%s: %d %s", tag, resp.StatusCode, b)
					continue
				}
				assert.Equal(t, ref[tag], predictResp(t, b).Actions)
			}
		}()
	}
	for i := 0; i < 10; i++ {
		f.catalog.put(secondTag, secondBinding(t, "1.0."+string(rune('1'+i)), f.enc))
		_, err := f.core.Reload(context.Background())
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, failures.Load())
}

// The instruction length limits come from the embodiment's plugin.
func TestInstructionLimitsFromPlugin(t *testing.T) {
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, f *fixture) {
		b := secondBinding(t, "1.0.0", f.enc)
		info := secondInfo("1.0.0")
		info.InstructionChars = [2]int{1, 5}
		b.Embodiment = &fakeEmbodiment{info: info}
		b.Demo.Request, _ = json.Marshal(func() map[string]any {
			m := demoRequest(t)
			m["embodiment"], m["instruction"] = secondTag, "go"
			return m
		}())
		b.Demo.Golden = nil
		f.catalog.put(secondTag, b)
	})
	resp, b := f.do(t, "POST", "/predict", body(t, func(m map[string]any) { m["embodiment"] = secondTag; m["instruction"] = "pick up the cup" }), nil)
	require.Equal(t, 400, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"field":"instruction"`)
	assert.Contains(t, string(b), "at most 5")
	resp, _ = f.do(t, "POST", "/predict", body(t, func(m map[string]any) { m["instruction"] = "pick up the cup" }), nil)
	assert.Equal(t, 200, resp.StatusCode, "the default embodiment keeps its own limit")
}

// TestLookupAfterClose: once closeAll retired every entry (Shutdown), a
// lookup and GET /demo (a connection still open past the HTTP drain)
// answer 503; lookup used to spin on the retired snapshot forever.
func TestLookupAfterClose(t *testing.T) {
	f := newFixture(t, true)
	require.NoError(t, f.shutdown(context.Background()))
	e, err := f.core.Demo("")
	require.Nil(t, e)
	var he *service.HandlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, http.StatusServiceUnavailable, he.Status)
	resp, err := f.srv.App().Test(httptest.NewRequest("GET", "/demo", nil), 5000)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}
