package deploycheck

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/gr00tgw/gr00tgw/config"
	httpfront "github.com/gr00tgw/gr00tgw/frontend/http"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/tools/imagebuild"
	"github.com/gr00tgw/gr00tgw/tools/internal/repo"
)

// checkout is the server module's root (the chart, the schemas, deploy/k8s).
func checkout(t testing.TB) string {
	t.Helper()
	root, err := repo.Root()
	require.NoError(t, err)
	return root
}

var (
	renderOnce sync.Once
	rendered   []*Rendered
	renderErr  error
)

// renderedSets renders every value set once per test binary.
func renderedSets(t *testing.T) []*Rendered {
	t.Helper()
	renderOnce.Do(func() { rendered, renderErr = RenderAll(checkout(t)) })
	require.NoError(t, renderErr)
	return rendered
}

func validator(t *testing.T) *Validator {
	return NewValidator(filepath.Join(checkout(t), SchemaDir))
}

func byKind(r *Rendered, kind string) []map[string]any {
	var out []map[string]any
	for _, o := range r.Objects {
		if o.Object["kind"] == kind {
			out = append(out, o.Object)
		}
	}
	return out
}

func set(t *testing.T, name string) *Rendered {
	for _, r := range renderedSets(t) {
		if r.Set.Name == name {
			return r
		}
	}
	t.Fatalf("no value set %s", name)
	return nil
}

// path walks maps and lists: path(o, "spec", "template", "spec", "containers", 0).
func path(t *testing.T, v any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "at %q: not a map: %v", k, v)
			v = m[k]
		case int:
			l, ok := v.([]any)
			require.True(t, ok, "at %d: not a list: %v", k, v)
			require.Less(t, k, len(l))
			v = l[k]
		}
	}
	return v
}

func num(t *testing.T, v any) int {
	t.Helper()
	switch x := v.(type) {
	case float64:
		return int(x)
	case int64:
		return int(x)
	case int:
		return x
	}
	t.Fatalf("%v (%T) is not a number", v, v)
	return 0
}

// helm lint --strict passes for every value set.
func TestChartLints(t *testing.T) {
	require.NoError(t, Lint(checkout(t)))
}

// deploy/k8s holds exactly what the chart renders (make manifests).
func TestManifestsUpToDate(t *testing.T) {
	root := checkout(t)
	for _, r := range renderedSets(t) {
		b, err := os.ReadFile(filepath.Join(root, ManifestPath(r.Set)))
		require.NoError(t, err, "run make manifests")
		assert.Equal(t, string(r.Manifest), string(b), "%s is stale: run make manifests", ManifestPath(r.Set))
	}
	entries, err := os.ReadDir(filepath.Join(root, ManifestDir))
	require.NoError(t, err)
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".yaml")
		assert.True(t, slices.ContainsFunc(ValueSets, func(s ValueSet) bool { return s.Name == name }) || e.Name() == "README.md",
			"%s/%s is not the rendering of a value set", ManifestDir, e.Name())
	}
}

// Every rendered object of every value set validates strictly against the
// vendored schemas, and each set renders the kinds it is meant to.
func TestRenderedObjectsValidate(t *testing.T) {
	v := validator(t)
	require.NoError(t, v.ValidateAll(renderedSets(t)))
	kinds := map[string][]string{}
	for _, r := range renderedSets(t) {
		for _, o := range r.Objects {
			kinds[r.Set.Name] = append(kinds[r.Set.Name], o.Object["kind"].(string))
		}
		slices.Sort(kinds[r.Set.Name])
	}
	assert.Equal(t, []string{"ConfigMap", "Deployment", "PodDisruptionBudget", "ScaledObject", "Service", "ServiceAccount"}, kinds["default"])
	assert.Equal(t, []string{"ConfigMap", "Deployment", "PodDisruptionBudget", "ResourceClaimTemplate", "ScaledObject", "Service", "ServiceAccount"}, kinds["tenstorrent"])
	assert.Equal(t, []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service", "ServiceAccount"}, kinds["nvidia"])
	assert.Equal(t, []string{"ConfigMap", "InferenceService", "ServiceAccount", "ServingRuntime"}, kinds["kserve"])
}

// deepCopy copies a decoded object.
func deepCopy(t *testing.T, v map[string]any) map[string]any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// A misspelt field name fails validation, at any depth and in every kind
// (built-in and custom resources): the schemas are strict.
func TestMisspeltFieldFails(t *testing.T) {
	v := validator(t)
	cases := []struct {
		set, kind string
		at        []any // the map the bad key goes into
		good, bad string
	}{
		{"default", "Deployment", []any{"spec"}, "revisionHistoryLimit", "revisionHistoryLimt"},
		{"default", "Deployment", []any{"spec", "template", "spec"}, "terminationGracePeriodSeconds", "terminationGracePeriodSecond"},
		{"default", "Deployment", []any{"spec", "template", "spec", "containers", 0}, "readinessProbe", "readinesProbe"},
		{"default", "Deployment", []any{"spec", "template", "spec", "containers", 0, "startupProbe"}, "failureThreshold", "failureTreshold"},
		{"default", "Deployment", []any{"spec", "template", "spec", "containers", 0, "lifecycle", "preStop", "sleep"}, "seconds", "second"},
		{"default", "Deployment", []any{"metadata"}, "labels", "label"},
		{"default", "Service", []any{"spec", "ports", 0}, "targetPort", "targetport"},
		{"default", "PodDisruptionBudget", []any{"spec"}, "minAvailable", "minAvailabe"},
		{"default", "ScaledObject", []any{"spec", "triggers", 0}, "metadata", "metdata"},
		{"default", "ScaledObject", []any{"spec"}, "maxReplicaCount", "maxReplicas"},
		{"nvidia", "HorizontalPodAutoscaler", []any{"spec", "metrics", 0, "pods", "target"}, "averageValue", "averagevalue"},
		{"tenstorrent", "ResourceClaimTemplate", []any{"spec", "spec", "devices", "requests", 0, "exactly"}, "deviceClassName", "deviceClass"},
		{"kserve", "ServingRuntime", []any{"spec", "containers", 0}, "livenessProbe", "livenesProbe"},
		{"kserve", "InferenceService", []any{"spec", "predictor", "model"}, "storageUri", "storageURI"},
		{"kserve", "InferenceService", []any{"metadata"}, "annotations", "anotations"},
	}
	for _, c := range cases {
		objs := byKind(set(t, c.set), c.kind)
		require.NotEmpty(t, objs, "%s has a %s", c.set, c.kind)
		obj := deepCopy(t, objs[0])
		require.NoError(t, v.Validate(obj), "%s %s validates before the change", c.set, c.kind)
		m, ok := path(t, obj, c.at...).(map[string]any)
		require.True(t, ok, "%s %v is a map", c.kind, c.at)
		val, ok := m[c.good]
		require.True(t, ok, "%s %v has %s", c.kind, c.at, c.good)
		delete(m, c.good)
		m[c.bad] = val
		err := v.Validate(obj)
		require.Error(t, err, "%s %v: %s → %s must fail", c.kind, c.at, c.good, c.bad)
		assert.Contains(t, err.Error(), c.bad, "the error names the field")
	}
	// An unknown kind or version has no schema: refused, not skipped.
	obj := deepCopy(t, byKind(set(t, "default"), "Deployment")[0])
	obj["apiVersion"] = "apps/v1beta1"
	assert.ErrorContains(t, v.Validate(obj), "no schema")
	obj["apiVersion"] = "apps/v1"
	obj["kind"] = "Deploymnet"
	assert.ErrorContains(t, v.Validate(obj), "no schema")
	// Wrong types fail too.
	obj = deepCopy(t, byKind(set(t, "default"), "Deployment")[0])
	path(t, obj, "spec", "template", "spec").(map[string]any)["terminationGracePeriodSeconds"] = "55"
	assert.Error(t, v.Validate(obj))
}

// copyChart copies the chart to a temporary checkout-shaped directory.
func copyChart(t *testing.T) string {
	root := checkout(t)
	dst := t.TempDir()
	src := filepath.Join(root, ChartDir)
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, ChartDir, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	}))
	return dst
}

// A typo in a template's field name (what a chart edit would introduce)
// fails the check; so does a misspelt values key (values.schema.json).
func TestChartTypoFails(t *testing.T) {
	v := validator(t)
	dst := copyChart(t)
	tpl := filepath.Join(dst, ChartDir, "templates", "_helpers.tpl")
	b, err := os.ReadFile(tpl)
	require.NoError(t, err)
	require.Contains(t, string(b), "  periodSeconds: {{ .Values.probes.readiness.periodSeconds }}")
	bad := strings.Replace(string(b), "  periodSeconds: {{ .Values.probes.readiness.periodSeconds }}", "  periodSecond: {{ .Values.probes.readiness.periodSeconds }}", 1)
	require.NoError(t, os.WriteFile(tpl, []byte(bad), 0o644))
	ch, err := LoadChart(dst)
	require.NoError(t, err)
	r, err := Render(ch, ValueSets[0], map[string]any{})
	require.NoError(t, err, "the typo renders: only the schema catches it")
	err = v.ValidateAll([]*Rendered{r})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "periodSecond")

	ch, err = LoadChart(checkout(t))
	require.NoError(t, err)
	_, err = Render(ch, ValueSet{Name: "typo"}, map[string]any{"drain": map[string]any{"preStopSleepSecond": 5}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "preStopSleepSecond")
	_, err = Render(ch, ValueSet{Name: "typo"}, map[string]any{"accelerator": map[string]any{"type": "tenstorent"}})
	require.Error(t, err, "an accelerator type the chart does not know")
	_, err = Render(ch, ValueSet{Name: "typo"}, map[string]any{"config": map[string]any{"addr": "0.0.0.0:1"}})
	require.ErrorContains(t, err, "config.addr is set by the chart")
	_, err = Render(ch, ValueSet{Name: "typo"}, map[string]any{"config": map[string]any{"request_timeout": "60s"}})
	require.ErrorContains(t, err, "drain.timeoutSeconds must be at least config.request_timeout")
}

// The container: the image's binary serving on $PORT with the chart's
// config file, OIP probes, a preStop sleep and a grace period that covers
// sleep + drain_timeout, non-root as the image's user.
func TestWorkloadContract(t *testing.T) {
	root := checkout(t)
	for _, r := range renderedSets(t) {
		t.Run(r.Set.Name, func(t *testing.T) {
			var pod, ctr map[string]any
			if d := byKind(r, "Deployment"); len(d) > 0 {
				pod = path(t, d[0], "spec", "template", "spec").(map[string]any)
				ctr = path(t, pod, "containers", 0).(map[string]any)
			} else {
				sr := byKind(r, "ServingRuntime")
				require.Len(t, sr, 1)
				ctr = path(t, sr[0], "spec", "containers", 0).(map[string]any)
				assert.Equal(t, "kserve-container", ctr["name"])
				pod = path(t, byKind(r, "InferenceService")[0], "spec", "predictor").(map[string]any)
			}
			assert.Equal(t, []any{"serve", "--config", "/etc/gr00tgw/config.yaml"}, ctr["args"])
			env := map[string]string{}
			for _, e := range ctr["env"].([]any) {
				m := e.(map[string]any)
				if s, ok := m["value"].(string); ok {
					env[m["name"].(string)] = s
				}
			}
			port := num(t, path(t, ctr, "ports", 0, "containerPort"))
			assert.Equal(t, imagebuild.Port, port)
			assert.Equal(t, strconv.Itoa(port), env["PORT"], "PORT is the container port")
			assert.Equal(t, "/v2/health/ready", path(t, ctr, "readinessProbe", "httpGet", "path"))
			assert.Equal(t, "/v2/health/ready", path(t, ctr, "startupProbe", "httpGet", "path"))
			assert.Equal(t, "/v2/health/live", path(t, ctr, "livenessProbe", "httpGet", "path"))
			budget := num(t, path(t, ctr, "startupProbe", "periodSeconds")) * num(t, path(t, ctr, "startupProbe", "failureThreshold"))
			assert.GreaterOrEqual(t, budget, 600, "start-up budget covers the real checkpoint's load and warm-up")
			sleep := num(t, path(t, ctr, "lifecycle", "preStop", "sleep", "seconds"))
			assert.Positive(t, sleep)
			assert.Equal(t, float64(imagebuild.UID), path(t, ctr, "securityContext", "runAsUser"))
			assert.Equal(t, true, path(t, ctr, "securityContext", "readOnlyRootFilesystem"))

			// The config file loads with this gateway's config package,
			// with the container's environment on top, as serve does.
			cms := byKind(r, "ConfigMap")
			require.Len(t, cms, 1)
			file := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(file, []byte(path(t, cms[0], "data", "config.yaml").(string)), 0o644))
			var environ []string
			for k, v := range env {
				environ = append(environ, k+"="+v)
			}
			l, err := config.Load(config.Sources{File: file, Environ: environ})
			require.NoError(t, err, "the chart's config is valid for this gateway")
			assert.Equal(t, "0.0.0.0:"+strconv.Itoa(port), l.Config.Addr)
			assert.Equal(t, config.Origin{Layer: config.LayerEnv, Name: "PORT"}, l.Provenance["addr"])
			grace := num(t, pod["terminationGracePeriodSeconds"])
			drain := int(l.Config.DrainTimeout / time.Second)
			assert.Greater(t, grace, sleep+drain, "terminationGracePeriodSeconds > preStop sleep + drain_timeout")
			assert.GreaterOrEqual(t, l.Config.DrainTimeout, l.Config.RequestTimeout, "a request admitted before SIGTERM can finish")
			if wd := env["GR00TGW_WEIGHTS_DIR"]; wd != "" {
				assert.Equal(t, wd, l.Config.WeightsDir)
				assert.True(t, strings.HasPrefix(wd, "/mnt/models"), wd)
			}
			if r.Set.Name == "default" {
				assert.Equal(t, "/mnt/models/hub/models--nvidia--GR00T-N1.7-3B/snapshots/2fc962b973bccdd5d8ce4f67cc63b264d6886495", l.Config.WeightsDir,
					"the HF cache layout at the pinned revision")
			}
		})
	}
	_ = root
}

// The accelerator value sets claim their devices.
func TestAcceleratorSets(t *testing.T) {
	tt := byKind(set(t, "tenstorrent"), "Deployment")[0]
	pod := path(t, tt, "spec", "template", "spec").(map[string]any)
	assert.Equal(t, "tenstorrent", path(t, pod, "resourceClaims", 0, "name"))
	assert.Equal(t, "gr00tgw-tenstorrent", path(t, pod, "resourceClaims", 0, "resourceClaimTemplateName"))
	ctr := path(t, pod, "containers", 0)
	assert.Equal(t, "tenstorrent", path(t, ctr, "resources", "claims", 0, "name"))
	assert.Equal(t, "1Gi", path(t, ctr, "resources", "limits", "hugepages-1Gi"))
	assert.Equal(t, "1Gi", path(t, ctr, "resources", "requests", "hugepages-1Gi"))
	mounts, _ := json.Marshal(path(t, ctr, "volumeMounts"))
	assert.Contains(t, string(mounts), `"mountPath":"/dev/hugepages-1G"`)
	assert.Contains(t, string(mounts), `"mountPath":"/var/lib/gr00tgw/plugins"`, "plugins from a volume")
	rct := byKind(set(t, "tenstorrent"), "ResourceClaimTemplate")[0]
	assert.Equal(t, "tenstorrent.com", path(t, rct, "spec", "spec", "devices", "requests", 0, "exactly", "deviceClassName"))

	nv := byKind(set(t, "nvidia"), "Deployment")[0]
	pod = path(t, nv, "spec", "template", "spec").(map[string]any)
	ctr = path(t, pod, "containers", 0)
	assert.EqualValues(t, 1, path(t, ctr, "resources", "limits", "nvidia.com/gpu"))
	assert.Nil(t, path(t, ctr, "resources", "requests").(map[string]any)["nvidia.com/gpu"], "nvidia.com/gpu in limits only")
	tol, _ := json.Marshal(pod["tolerations"])
	assert.Contains(t, string(tol), `"key":"nvidia.com/gpu"`)
	assert.Equal(t, "download-weights", path(t, pod, "initContainers", 0, "name"))
	assert.Contains(t, path(t, pod, "volumes").([]any), map[string]any{"name": "plugins", "image": map[string]any{"reference": "ghcr.io/gr00tgw/gr00tgw-plugins:1.0.0", "pullPolicy": "IfNotPresent"}})
}

// The autoscalers scale on metric names the gateway really exports: a
// service.Server's /metrics lists them.
func TestScalingMetricsExist(t *testing.T) {
	mp, h, err := httpfront.NewPrometheus()
	require.NoError(t, err)
	defer func() { _ = mp.Shutdown(t.Context()) }()
	core, err := service.New(service.Options{Config: config.Default(), MeterProvider: mp})
	require.NoError(t, err)
	_, err = httpfront.New(core, httpfront.Options{MeterProvider: mp, MetricsHandler: h})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			exported[strings.Fields(name)[0]] = true
		}
	}
	require.True(t, exported["gateway_queue_depth"], "gateway_queue_depth exported:\n%s", body)
	require.True(t, exported["gateway_inflight"], "gateway_inflight exported")

	ks := byKind(set(t, "default"), "ScaledObject")[0]
	q := path(t, ks, "spec", "triggers", 0, "metadata", "query").(string)
	assert.Contains(t, q, "gateway_queue_depth{")
	hpa := byKind(set(t, "nvidia"), "HorizontalPodAutoscaler")[0]
	assert.Equal(t, "gateway_queue_depth", path(t, hpa, "spec", "metrics", 0, "pods", "metric", "name"))
	isvc := byKind(set(t, "kserve"), "InferenceService")[0]
	assert.Contains(t, path(t, isvc, "spec", "predictor", "autoScaling", "metrics", 0, "external", "metric", "query"), "gateway_queue_depth{")

	// The Prometheus-Adapter rules serve the names the HPA asks for.
	b, err := os.ReadFile(filepath.Join(checkout(t), "deploy", "prometheus-adapter", "values.yaml"))
	require.NoError(t, err)
	var pa struct {
		Rules struct {
			Custom []struct {
				SeriesQuery string `json:"seriesQuery"`
				Name        struct {
					As string `json:"as"`
				} `json:"name"`
				MetricsQuery string `json:"metricsQuery"`
			} `json:"custom"`
		} `json:"rules"`
	}
	require.NoError(t, yaml.Unmarshal(b, &pa))
	var served []string
	for _, r := range pa.Rules.Custom {
		served = append(served, r.Name.As)
		assert.True(t, exported[strings.SplitN(r.SeriesQuery, "{", 2)[0]], "%s is exported", r.SeriesQuery)
		assert.Contains(t, r.MetricsQuery, "<<.Series>>")
	}
	assert.Contains(t, served, "gateway_queue_depth")
}

// Every vendored schema compiles and is listed with its source.
func TestSchemasVendoredWithProvenance(t *testing.T) {
	root := checkout(t)
	readme, err := os.ReadFile(filepath.Join(root, SchemaDir, "README.md"))
	require.NoError(t, err)
	v := validator(t)
	n := 0
	require.NoError(t, filepath.WalkDir(filepath.Join(root, SchemaDir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(root, SchemaDir), p)
		assert.Contains(t, string(readme), "`"+filepath.ToSlash(rel)+"`", "README lists %s", rel)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		require.Len(t, parts, 3, rel)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		var doc struct {
			Schema string `json:"$schema"`
		}
		require.NoError(t, json.Unmarshal(b, &doc))
		assert.Equal(t, draft4, doc.Schema)
		// The file's kind, read back from its own apiVersion/kind enums,
		// compiles in the validator.
		k := kindOf(t, b)
		assert.Equal(t, filepath.ToSlash(k.SchemaPath()), filepath.ToSlash(rel))
		_, err = v.schema(k)
		require.NoError(t, err, rel)
		n++
		return nil
	}))
	assert.Equal(t, len(KubernetesKinds)+3, n)
}

func kindOf(t *testing.T, schema []byte) GVK {
	var doc map[string]any
	require.NoError(t, json.Unmarshal(schema, &doc))
	root := doc
	if ref, ok := doc["$ref"].(string); ok {
		root = doc["definitions"].(map[string]any)[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
	av := path(t, root, "properties", "apiVersion", "enum", 0).(string)
	kind := path(t, root, "properties", "kind", "enum", 0).(string)
	k, err := ParseGVK(map[string]any{"apiVersion": av, "kind": kind})
	require.NoError(t, err)
	return k
}

// The schema generator's transformations, on a small swagger document.
func TestKubernetesSchemasStrict(t *testing.T) {
	swagger := []byte(`{"definitions": {
	  "io.k8s.api.x.v1.Thing": {"type": "object", "description": "d",
	    "x-kubernetes-group-version-kind": [{"group": "x", "version": "v1", "kind": "Thing"}],
	    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
	      "spec": {"$ref": "#/definitions/io.k8s.api.x.v1.Spec"}}},
	  "io.k8s.api.x.v1.Spec": {"type": "object", "properties": {
	      "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
	      "mem": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
	      "labels": {"type": "object", "additionalProperties": {"type": "string"}},
	      "raw": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.runtime.RawExtension"}}},
	  "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
	  "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
	  "io.k8s.apimachinery.pkg.runtime.RawExtension": {"type": "object"},
	  "io.k8s.api.x.v1.Unused": {"type": "object"}
	}}`)
	k := GVK{"x", "v1", "Thing"}
	out, err := KubernetesSchemas(swagger, []GVK{k})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "x", "v1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, k.SchemaPath()), out[k], 0o644))
	assert.NotContains(t, string(out[k]), "Unused", "only the closure")
	assert.NotContains(t, string(out[k]), `"description": "d"`)
	v := NewValidator(dir)
	ok := func(spec string) error {
		var s any
		require.NoError(t, json.Unmarshal([]byte(spec), &s))
		return v.Validate(map[string]any{"apiVersion": "x/v1", "kind": "Thing", "spec": s})
	}
	require.NoError(t, ok(`{"port": 80, "mem": "1Gi", "labels": {"a": "b"}, "raw": {"any": [1]}}`))
	require.NoError(t, ok(`{"port": "http", "mem": 1.5}`))
	assert.Error(t, ok(`{"prot": 80}`))
	assert.Error(t, ok(`{"port": 1.5}`))
	assert.Error(t, ok(`{"labels": {"a": 1}}`))
	assert.Error(t, v.Validate(map[string]any{"apiVersion": "x/v1", "kind": "Thing", "extra": 1}))
	assert.Error(t, v.Validate(map[string]any{"apiVersion": "x/v1"}))

	crd := []byte(`
spec:
  group: y.io
  names: {kind: Widget}
  versions:
  - name: v1
    served: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            properties:
              size: {anyOf: [{type: integer}, {type: string}], x-kubernetes-int-or-string: true}
              note: {type: string, nullable: true}
              free: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {a: {type: string}}}
`)
	meta := []byte(`{"definitions": {"` + objectMetaDef + `": {"type": "object", "properties": {"name": {"type": "string"}}}}}`)
	ck, cs, err := CRDSchema(crd, meta, "v1")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "y.io", "v1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ck.SchemaPath()), cs, 0o644))
	w := func(s string) error {
		var o map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &o))
		return v.Validate(o)
	}
	require.NoError(t, w(`{"apiVersion": "y.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "2", "note": null, "free": {"b": 1}}}`))
	assert.Error(t, w(`{"apiVersion": "y.io/v1", "kind": "Widget", "metadata": {"nmae": "w"}}`), "metadata is ObjectMeta, strict")
	assert.Error(t, w(`{"apiVersion": "y.io/v1", "kind": "Widget", "spec": {"szie": 1}}`))
	assert.Error(t, w(`{"apiVersion": "y.io/v1", "kind": "Widget", "spec": {"size": true}}`))
}

// WriteManifests is byte-for-byte what RenderAll renders (the render
// command and the check agree).
func TestRenderDeterministic(t *testing.T) {
	a, err := RenderAll(checkout(t))
	require.NoError(t, err)
	for i, r := range renderedSets(t) {
		assert.True(t, bytes.Equal(a[i].Manifest, r.Manifest), r.Set.Name)
	}
}
