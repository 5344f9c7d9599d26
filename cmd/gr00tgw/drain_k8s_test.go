package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2EDrainKubernetesOrder replays what Kubernetes does to a pod of the
// chart (deploy/helm/gr00tgw) when it is deleted, against the real binary,
// and requires that no request fails:
//
//  1. The pod serves: clients reach it through a "Service" (the harness's
//     endpoint list) on keep-alive connections, and a kubelet-like prober
//     polls /v2/health/ready.
//  2. The pod is deleted: its endpoint turns not-ready and leaves the
//     Service (the readiness the Service sees fails first); in the same
//     moment preStop starts sleeping. Requests already sent — here a burst
//     queued on the device lock — are still in flight.
//  3. After the preStop sleep, SIGTERM: the gateway turns readiness 503,
//     lets every request in flight finish and exits 0 inside the grace
//     period.
//
// The sleep is shorter than the chart's (10 s): what matters is the order,
// and that the endpoint is gone before SIGTERM.
func TestE2EDrainKubernetesOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the binary")
	}
	bin, plugins := buildGateway(t)
	// One thread: each prediction takes long enough for a queue to form.
	g := startGateway(t, bin, plugins, "--threads", "1", "--queue-depth", "8")
	demo := getDemo(t, g)

	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: e2eDrainTimeout + 30*time.Second}

	type result struct {
		status int
		body   []byte
		err    error
		sentAt time.Time
		doneAt time.Time
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	var inRotation atomic.Bool // the pod's endpoint is in the Service
	inRotation.Store(true)
	var inflight atomic.Int64 // client-side: sent, not answered
	send := func() {
		defer wg.Done()
		r := result{sentAt: time.Now()}
		inflight.Add(1)
		req, err := http.NewRequest(http.MethodPost, g.base+"/predict", bytes.NewReader(demo.Request))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			var resp *http.Response
			resp, err = client.Do(req)
			if err == nil {
				r.status = resp.StatusCode
				r.body, err = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
		}
		inflight.Add(-1)
		r.err, r.doneAt = err, time.Now()
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
	}

	// The kubelet's readiness probe, every 50 ms (own connection each time).
	type probe struct {
		at time.Time
		ok bool
	}
	var probes []probe
	var probeMu sync.Mutex
	stopProbe := make(chan struct{})
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		pc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for {
			ok, at := false, time.Now()
			if resp, err := pc.Get(g.base + "/v2/health/ready"); err == nil {
				ok = resp.StatusCode == http.StatusOK
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			probeMu.Lock()
			probes = append(probes, probe{at, ok})
			probeMu.Unlock()
			select {
			case <-stopProbe:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// 1. Steady traffic through the Service: two clients, one request at a
	// time each, while the endpoint is listed.
	var steady sync.WaitGroup
	for c := 0; c < 2; c++ {
		steady.Add(1)
		go func() {
			defer steady.Done()
			for inRotation.Load() {
				wg.Add(1)
				send()
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(results)
		mu.Unlock()
		if n >= 6 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The last requests routed before the endpoint goes: a burst that
	// queues on the device (batch 1), so some are still in flight when
	// SIGTERM comes.
	const burst = 7
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go send()
	}
	for inflight.Load() < burst && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}

	// 2. Pod deleted: endpoint out of the Service (no new requests), preStop
	// sleep running.
	deletedAt := time.Now()
	inRotation.Store(false)
	steady.Wait()
	const preStop = 150 * time.Millisecond
	time.Sleep(preStop - time.Since(deletedAt))

	// 3. SIGTERM with requests in flight.
	atSIGTERM := inflight.Load()
	srvInflight, _ := scrapeGauge(&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, g.base, "gateway_inflight")
	sigAt := time.Now()
	exitErr := g.stop(t)
	exitAfter := time.Since(sigAt)
	wg.Wait()
	close(stopProbe)
	<-probeDone
	t.Logf("SIGTERM %v after the endpoint left, %d requests in flight (server gauge %d); exited %v later (err %v)",
		sigAt.Sub(deletedAt).Round(time.Millisecond), atSIGTERM, srvInflight, exitAfter.Round(time.Millisecond), exitErr)
	require.NoError(t, exitErr, "exit status 0 after SIGTERM; stderr:\n%s", fileTail(g.stderr, 3000))
	require.Positive(t, atSIGTERM, "the drain must be tested with requests in flight (the burst finished before SIGTERM)")
	assert.Less(t, exitAfter, e2eDrainTimeout, "drained inside drain_timeout")

	// Zero failed requests: every one got 200 and the golden actions.
	mu.Lock()
	defer mu.Unlock()
	ok := 0
	for i, r := range results {
		if !assert.NoError(t, r.err, "request %d (sent %v before SIGTERM)", i, sigAt.Sub(r.sentAt)) {
			continue
		}
		if !assert.Equal(t, http.StatusOK, r.status, "request %d: %s", i, r.body) {
			continue
		}
		var resp struct {
			Actions map[string][][]float64 `json:"actions"`
		}
		require.NoError(t, json.Unmarshal(r.body, &resp))
		md, err := maxActionDiff(resp.Actions, demo.Expected.Actions)
		require.NoError(t, err)
		assert.LessOrEqual(t, md, 1e-3, "request %d", i)
		assert.True(t, r.sentAt.Before(deletedAt), "request %d was sent after the endpoint left", i)
		ok++
	}
	finishedAfterSIGTERM := 0
	for _, r := range results {
		if r.doneAt.After(sigAt) {
			finishedAfterSIGTERM++
		}
	}
	t.Logf("%d requests, %d ok, %d of them answered after SIGTERM", len(results), ok, finishedAfterSIGTERM)
	assert.Equal(t, len(results), ok, "zero failed requests")
	assert.Positive(t, finishedAfterSIGTERM, "requests in flight at SIGTERM were answered")

	// Readiness: ready while serving; a probe started after SIGTERM is
	// never ready (503 while draining, then nothing listens).
	probeMu.Lock()
	defer probeMu.Unlock()
	readyBefore := false
	for _, p := range probes {
		if p.at.Before(deletedAt) && p.ok {
			readyBefore = true
		}
		if p.at.After(sigAt.Add(20*time.Millisecond)) && p.ok {
			t.Errorf("readiness 200 at %v after SIGTERM", p.at.Sub(sigAt))
		}
	}
	assert.True(t, readyBefore, "ready before the pod was deleted")
	logs := fileTail(g.stderr, 1<<20)
	assert.Contains(t, logs, "draining")
	assert.Contains(t, logs, "Releasing backend")
}
