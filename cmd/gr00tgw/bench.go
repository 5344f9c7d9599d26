package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gr00tgw/gr00tgw/client"
)

func init() {
	register(&command{name: "bench", summary: "client: latency of a running server (p50/p90/p99 of every timing_ms field and the wall time)",
		run: func(ctx context.Context, args []string) error {
			var progress io.Writer
			if isTerminal(os.Stderr) {
				progress = os.Stderr
			}
			return runBench(ctx, args, os.Stdout, progress)
		}})
}

const benchAbout = `The reference's bench_http.py against a running server: posts the demo
request of the embodiment --warmup times (not counted), then --n times from
--concurrency clients, and prints mean, min, p50, p90, p99 and max of the
client's wall time and of every timing_ms field of the answers
(device_stages.* included). Percentiles interpolate linearly between the
closest ranks (numpy's default). A progress bar goes to stderr when it is a
terminal. --out writes the summary and every raw sample as JSON. A failed
request is counted and reported; any failure exits 1.`

// benchSample is one measured request.
type benchSample struct {
	Index     int                `json:"i"`
	WallMS    float64            `json:"wall_ms"`
	TimingMS  map[string]float64 `json:"timing_ms,omitempty"`
	RequestID string             `json:"request_id,omitempty"`
	Error     string             `json:"error,omitempty"`
	// model and version name what answered (for the header when there is
	// no warm-up).
	model, version string
}

// latencyStats summarises one field over the successful samples, in ms.
type latencyStats struct {
	N    int       `json:"n"`
	Mean jsonFloat `json:"mean"`
	Min  jsonFloat `json:"min"`
	P50  jsonFloat `json:"p50"`
	P90  jsonFloat `json:"p90"`
	P99  jsonFloat `json:"p99"`
	Max  jsonFloat `json:"max"`
}

// benchReport is what bench writes with --out.
type benchReport struct {
	URL           string  `json:"url"`
	Protocol      string  `json:"protocol"`
	Embodiment    string  `json:"embodiment"`
	Model         string  `json:"model,omitempty"`
	Version       string  `json:"version,omitempty"`
	N             int     `json:"n"`
	Concurrency   int     `json:"concurrency"`
	Warmup        int     `json:"warmup"`
	ElapsedS      float64 `json:"elapsed_s"`
	ThroughputRPS float64 `json:"throughput_rps"`
	Errors        int     `json:"errors"`
	// Fields is Summary's keys in report order: "wall" (the client's),
	// then the timing_ms fields.
	Fields  []string                `json:"fields"`
	Summary map[string]latencyStats `json:"summary"`
	Samples []benchSample           `json:"samples"`
}

// benchFieldOrder is the report order of the known timing_ms fields; any
// other field follows by name.
var benchFieldOrder = []string{"wall", "total", "device", "queue", "parse", "decode", "plugin_pre", "encode", "decode_actions", "plugin_post"}

// runBench runs bench; progress, when not nil, receives the progress bar.
func runBench(ctx context.Context, args []string, stdout, progress io.Writer) error {
	fs := newFlags("bench", "[--url URL] [--n 50] [--concurrency 1] [--warmup 2] [--protocol http] [--embodiment TAG] [--out FILE.json]", benchAbout)
	o := addClientFlags(fs)
	n := fs.Int("n", 50, "measured requests")
	conc := fs.Int("concurrency", 1, "requests in flight at once")
	warmup := fs.Int("warmup", 2, "requests before the measured ones (not counted)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	switch {
	case *n < 1:
		return fmt.Errorf("%w: --n %d: want at least 1", errUsage, *n)
	case *conc < 1:
		return fmt.Errorf("%w: --concurrency %d: want at least 1", errUsage, *conc)
	case *warmup < 0:
		return fmt.Errorf("%w: --warmup %d: not negative", errUsage, *warmup)
	}
	p, demo, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer p.Close()
	r := &benchReport{URL: o.url, Protocol: o.protocol, Embodiment: demo.Embodiment, N: *n, Concurrency: *conc, Warmup: *warmup}
	for i := 0; i < *warmup; i++ {
		pr, err := p.Predict(ctx, demo.Request)
		if err != nil {
			return fmt.Errorf("warm-up request %d: %w", i+1, err)
		}
		r.Model, r.Version = pr.Model, pr.Version
	}

	bar := newProgressBar(progress, *n)
	start := time.Now()
	r.Samples = benchRun(ctx, p, demo, *n, *conc, bar.tick)
	r.ElapsedS = time.Since(start).Seconds()
	bar.done()
	if err := ctx.Err(); err != nil {
		return err
	}
	r.ThroughputRPS = float64(*n) / r.ElapsedS
	var firstErr string
	for _, s := range r.Samples {
		if r.Model == "" && s.Error == "" {
			r.Model, r.Version = s.model, s.version
		}
		if s.Error != "" {
			if r.Errors++; firstErr == "" {
				firstErr = s.Error
			}
		}
	}
	r.Fields, r.Summary = summarizeSamples(r.Samples)
	printBench(stdout, r)
	if o.out != "" {
		if err := writeJSONFile(o.out, r); err != nil {
			return err
		}
	}
	if r.Errors > 0 {
		return fmt.Errorf("%d of %d requests failed; first: %s", r.Errors, r.N, firstErr)
	}
	return nil
}

// benchRun posts demo's request n times from conc workers; tick is called
// after each answer.
func benchRun(ctx context.Context, p client.Protocol, demo *client.Demo, n, conc int, tick func()) []benchSample {
	samples := make([]benchSample, n)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(conc, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				pr, err := p.Predict(ctx, demo.Request)
				s := benchSample{Index: i, WallMS: ms(time.Since(t0))}
				if err != nil {
					s.Error = err.Error()
				} else {
					s.WallMS, s.TimingMS, s.RequestID = ms(pr.Wall), pr.Timing, pr.RequestID
					s.model, s.version = pr.Model, pr.Version
				}
				samples[i] = s
				tick()
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return samples
}

// summarizeSamples returns the fields in report order and each field's
// statistics over the samples without an error.
func summarizeSamples(samples []benchSample) ([]string, map[string]latencyStats) {
	values := map[string][]float64{}
	for _, s := range samples {
		if s.Error != "" {
			continue
		}
		values["wall"] = append(values["wall"], s.WallMS)
		for k, v := range s.TimingMS {
			values[k] = append(values[k], v)
		}
	}
	fields := reportOrder(values, benchFieldOrder)
	sum := make(map[string]latencyStats, len(fields))
	for _, k := range fields {
		sum[k] = summarize(values[k])
	}
	return fields, sum
}

// summarize returns the statistics of xs (NaN for everything but N when
// xs is empty).
func summarize(xs []float64) latencyStats {
	s := slices.Clone(xs)
	slices.Sort(s)
	st := latencyStats{N: len(s)}
	nan := jsonFloat(math.NaN())
	if len(s) == 0 {
		st.Mean, st.Min, st.P50, st.P90, st.P99, st.Max = nan, nan, nan, nan, nan, nan
		return st
	}
	var sum float64
	for _, v := range s {
		sum += v
	}
	st.Mean = jsonFloat(sum / float64(len(s)))
	st.Min, st.Max = jsonFloat(s[0]), jsonFloat(s[len(s)-1])
	st.P50, st.P90, st.P99 = jsonFloat(percentile(s, 50)), jsonFloat(percentile(s, 90)), jsonFloat(percentile(s, 99))
	return st
}

// percentile is the q-th percentile (0 ≤ q ≤ 100) of sorted, interpolated
// linearly between the closest ranks (numpy.percentile's default): rank
// q/100·(n−1). NaN for an empty slice.
func percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	q = math.Min(math.Max(q, 0), 100)
	rank := q / 100 * float64(n-1)
	lo := int(math.Floor(rank))
	hi := min(lo+1, n-1)
	frac := rank - float64(lo)
	return sorted[lo] + frac*(sorted[hi]-sorted[lo])
}

// printBench writes the one-line header and the table.
func printBench(w io.Writer, r *benchReport) {
	name := strings.TrimSpace(strings.Join([]string{r.Model, r.Version, r.Embodiment}, " "))
	fmt.Fprintf(w, "bench %s (%s) %s: %d requests, concurrency %d, warm-up %d: %.2f s, %.1f req/s, %d errors\n",
		r.URL, r.Protocol, name, r.N, r.Concurrency, r.Warmup, r.ElapsedS, r.ThroughputRPS, r.Errors)
	fmt.Fprintf(w, "%-24s %5s %9s %9s %9s %9s %9s %9s\n", "field (ms)", "n", "mean", "min", "p50", "p90", "p99", "max")
	for _, k := range r.Fields {
		s := r.Summary[k]
		fmt.Fprintf(w, "%-24s %5d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", k, s.N, s.Mean, s.Min, s.P50, s.P90, s.P99, s.Max)
	}
}

// progressBar draws "[#####.....] 23/50" on a terminal; with a nil
// writer it draws nothing.
type progressBar struct {
	w     io.Writer
	total int
	mu    sync.Mutex
	count int
}

func newProgressBar(w io.Writer, total int) *progressBar { return &progressBar{w: w, total: total} }

// tick counts one finished request and redraws.
func (b *progressBar) tick() {
	if b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.count++
	const width = 40
	fill := b.count * width / b.total
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d", strings.Repeat("#", fill), strings.Repeat(".", width-fill), b.count, b.total)
}

// done erases the bar.
func (b *progressBar) done() {
	if b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprint(b.w, "\r\033[K")
}
