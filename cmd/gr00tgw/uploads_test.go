package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2EUploadsBoundMemory: 48 clients upload 30 MiB bodies at once, slowly
// (16 KiB then a pause, then the rest), and 16 more declare bodies over
// max_body_bytes. Only admitted requests (queue_depth+1 = 3) have their
// bodies read; the others are refused at once, so the server's RSS grows
// by a few bodies, not by 64 × 30 MiB.
func TestE2EUploadsBoundMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: pushes ~1.5 GB over loopback")
	}
	bin, plugins := buildGateway(t)
	g := startGateway(t, bin, copyPlugins(t, plugins), "--queue-depth", "2", "--embodiments", "oxe_droid_relative_eef_relative_joint")
	base := g.rssKiB()
	if base == 0 {
		t.Skip("no /proc/PID/status here: RSS cannot be read")
	}
	const size = 30 << 20
	chunk := []byte(strings.Repeat("x", 1<<20))
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				if r := g.rssKiB(); r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()
	var codes sync.Map
	count := func(st int) {
		v, _ := codes.LoadOrStore(st, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	var wg sync.WaitGroup
	upload := func(length int, sendAll bool) {
		defer wg.Done()
		conn, err := net.Dial("tcp", g.addr)
		if err != nil {
			count(-1)
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
		fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", length)
		_, _ = conn.Write(chunk[:16<<10])
		time.Sleep(200 * time.Millisecond)
		if sendAll {
			for sent := 16 << 10; sent < length; sent += len(chunk) {
				n := min(len(chunk), length-sent)
				if _, err := conn.Write(chunk[:n]); err != nil {
					break // refused: the server closed the connection
				}
			}
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			count(0)
			return
		}
		resp.Body.Close()
		count(resp.StatusCode)
	}
	for i := 0; i < 48; i++ {
		wg.Add(1)
		go upload(size, true)
	}
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go upload(64<<20, false)
	}
	wg.Wait()
	close(stop)
	got := map[int]int64{}
	codes.Range(func(k, v any) bool { got[k.(int)] = v.(*atomic.Int64).Load(); return true })
	growth := peak.Load() - base
	t.Logf("RSS base %d MiB, peak %d MiB (+%d MiB); answers %v", base>>10, peak.Load()>>10, growth>>10, got)
	assert.Equal(t, int64(16), got[http.StatusRequestEntityTooLarge], "every oversized body refused from its Content-Length")
	assert.Positive(t, got[http.StatusServiceUnavailable], "uploads beyond the queue refused")
	// Three admitted bodies at a time (30 MiB each, read into one buffer),
	// with room for the garbage collector's lag: far below 64 × 30 MiB.
	assert.Less(t, growth, int64(400<<10), "RSS growth %d MiB", growth>>10)
	// The server still serves.
	req, _ := demoFor(t, g, "oxe_droid_relative_eef_relative_joint")
	st, p := predict(t, &http.Client{Timeout: 60 * time.Second}, g, req)
	require.Equal(t, http.StatusOK, st, p.Error)
}
