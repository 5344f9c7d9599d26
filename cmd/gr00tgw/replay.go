package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/gr00tgw/gr00tgw/client"
	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/record"
)

func init() {
	register(&command{name: "replay", summary: "client: re-send recorded predicts (record files) to a server and compare the answers bit for bit",
		run: func(ctx context.Context, args []string) error { return runReplay(ctx, args, os.Stdout) }})
}

const replayAbout = `Re-sends every recorded predict in DIR (the flight recorder's .gwrec files,
in write order) with its recorded seed or noise, and compares the answer with
the recording: per request and in total, whether the actions and the
normalised action_pred are bit-identical, their max|d| and PCC, safety
verdict changes, and the latency (recorded server total vs the replay's
server total and wall time). A table goes to stdout; --out writes the same
as JSON. Exits 1, naming the files, when any request differs beyond
--tolerance (default 0: bit-identical), fails, or cannot be replayed.

Protocols: http (POST /predict, msgpack: frames as the bytes recorded, the
seed or the explicit noise, return_normalized so action_pred is compared
too) replays every record. oip, zmq and openpi carry a seed but no explicit
noise, no options and no action_pred: a record is replayed over them only
when it has a seed, one-step state groups and no real-time-chunking
options. Without --protocol each record goes over the protocol it was
recorded on when that protocol can carry it and its endpoint is given
(oip: --url; zmq: --zmq-url; openpi: --openpi-url), else over http (the
report says why). With --protocol every record goes over that protocol, and
one it cannot carry is an error.

--inspect prints the recording as a table instead (time, protocol, session,
embodiment, plugin, checkpoint, noise, frames, state, actions, safety
verdict, server total, error) and, with --out, the same as JSON.`

// replayOptionKeys are the request options HTTP /predict accepts (the
// real-time chunking keys); other recorded option keys (a robot protocol's
// seed, embodiment, token) are carried by their own fields.
var replayOptionKeys = []string{"action_horizon", "rtc_overlap_steps", "rtc_frozen_steps", "rtc_ramp_rate"}

// replayConfig is what the replay flags select.
type replayConfig struct {
	dir, url, zmqURL, openpiURL, protocol, out string
	tolerance                                  float64
	timeout                                    time.Duration
	auth                                       *authOptions
}

func runReplay(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("replay", "DIR --url URL [--protocol http|oip|zmq|openpi] [--out FILE.json] [--tolerance X] | DIR --inspect", replayAbout)
	c := &replayConfig{}
	inspect := fs.Bool("inspect", false, "print the recording as a table (no server needed) and exit")
	fs.StringVar(&c.url, "url", "http://127.0.0.1:20000", "the gateway's HTTP API (http://HOST:PORT): http, oip and the http fallback")
	fs.StringVar(&c.protocol, "protocol", "", "replay every record over this protocol: "+strings.Join(client.Protocols, "|")+" (empty: each record's own, else http)")
	fs.StringVar(&c.zmqURL, "zmq-url", "", "the ZeroMQ endpoint (tcp://HOST:PORT) for records replayed over zmq")
	fs.StringVar(&c.openpiURL, "openpi-url", "", "the openpi endpoint (ws://HOST:PORT) for records replayed over openpi")
	fs.StringVar(&c.out, "out", "", "also write the report as JSON here")
	fs.Float64Var(&c.tolerance, "tolerance", 0, "largest |difference| accepted per value (0: bit-identical)")
	fs.DurationVar(&c.timeout, "timeout", 120*time.Second, "per-request timeout (also sent as "+client.TimeoutHeader+")")
	c.auth = addAuthFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one record directory (DIR), got %d arguments", errUsage, fs.NArg())
	}
	c.dir = fs.Arg(0)
	if math.IsNaN(c.tolerance) || c.tolerance < 0 {
		return fmt.Errorf("%w: --tolerance %v: want a number ≥ 0", errUsage, c.tolerance)
	}
	if *inspect {
		return inspectRecords(c.dir, c.out, stdout)
	}
	if c.protocol != "" && !slices.Contains(client.Protocols, c.protocol) {
		return fmt.Errorf("%w: --protocol %q: want one of %s", errUsage, c.protocol, strings.Join(client.Protocols, ", "))
	}
	if u := map[string]string{"zmq": c.zmqURL, "openpi": c.openpiURL}; c.protocol == "zmq" || c.protocol == "openpi" {
		if u[c.protocol] == "" {
			return fmt.Errorf("%w: --protocol %s needs --%s-url (--url is the gateway's HTTP API)", errUsage, c.protocol, c.protocol)
		}
	}
	rep, err := replay(ctx, c)
	if err != nil {
		return err
	}
	rep.printTable(stdout)
	if c.out != "" {
		if err := writeJSONFile(c.out, rep); err != nil {
			return fmt.Errorf("--out %s: %w", c.out, err)
		}
	}
	if len(rep.Failing) > 0 {
		return fmt.Errorf("%d of %d recorded requests differ beyond tolerance %g or could not be replayed: %s",
			len(rep.Failing), rep.Total, c.tolerance, strings.Join(rep.Failing, ", "))
	}
	return nil
}

// replayReport is what replay prints and writes with --out.
type replayReport struct {
	Dir       string  `json:"dir"`
	URL       string  `json:"url"`
	Protocol  string  `json:"protocol,omitempty"`
	Tolerance float64 `json:"tolerance"`
	Total     int     `json:"total"`
	// BitIdentical, Within, Differ and Errors count the requests by
	// Status.
	BitIdentical int `json:"bit_identical"`
	Within       int `json:"within_tolerance"`
	Differ       int `json:"differ"`
	Errors       int `json:"errors"`
	// SafetyChanges counts the requests whose safety verdict changed.
	SafetyChanges int `json:"safety_changes"`
	// Actions and ActionPred summarise every compared request: the largest
	// max|d| and the smallest PCC.
	Actions    replaySummary `json:"actions"`
	ActionPred replaySummary `json:"action_pred"`
	// Latency is the median of each request's latencies, in ms.
	Latency replayLatency `json:"latency_ms_p50"`
	// Failing names the files (and request ids) that differ beyond the
	// tolerance or failed.
	Failing  []string         `json:"failing"`
	Requests []*replayRequest `json:"requests"`
}

// replaySummary is the worst of one kind of comparison over all requests
// (NaN, JSON null, when none was compared).
type replaySummary struct {
	Compared   int       `json:"compared"`
	MaxAbsDiff jsonFloat `json:"max_abs_diff"`
	MinPCC     jsonFloat `json:"min_pcc"`
}

// replayLatency is a request's latencies in ms: the server's total as
// recorded, and the replay's server total and client wall time; NaN
// (JSON null, "-" in the table) where not known (zmq and openpi report no
// server total; a request that was not replayed has none).
type replayLatency struct {
	Recorded jsonFloat `json:"recorded_total"`
	Replayed jsonFloat `json:"replayed_total"`
	Wall     jsonFloat `json:"replayed_wall"`
}

// replayRequest is one record's replay.
type replayRequest struct {
	File       string `json:"file"`
	RequestID  string `json:"request_id,omitempty"`
	Embodiment string `json:"embodiment,omitempty"`
	Recorded   string `json:"recorded_protocol,omitempty"`
	Protocol   string `json:"protocol,omitempty"`
	// Fallback says why the record did not go over its recorded protocol.
	Fallback string `json:"fallback,omitempty"`
	// Noise is how the noise was replayed: "seed N" or "noise [H D]".
	Noise string `json:"noise,omitempty"`
	// Status is "bit-identical", "within-tolerance", "differs" or "error".
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Diffs lists what differs beyond the tolerance.
	Diffs      []string      `json:"diffs,omitempty"`
	Actions    *tensorDiff   `json:"actions,omitempty"`
	ActionPred *tensorDiff   `json:"action_pred,omitempty"`
	Safety     *safetyChange `json:"safety,omitempty"`
	Latency    replayLatency `json:"latency_ms"`
}

// tensorDiff is how replayed values compare with recorded ones.
type tensorDiff struct {
	BitIdentical bool      `json:"bit_identical"`
	MaxAbsDiff   jsonFloat `json:"max_abs_diff"`
	PCC          jsonFloat `json:"pcc"`
	// Mismatch, when set, is a difference of groups or shapes (MaxAbsDiff
	// is then +Inf, written null).
	Mismatch string `json:"mismatch,omitempty"`
	// PerGroup compares each action group (actions only).
	PerGroup map[string]*tensorDiff `json:"per_group,omitempty"`
}

// within reports whether d is acceptable under tol: bit-identical, or
// every |difference| ≤ tol > 0 (NaN and shape mismatches never are).
func (d *tensorDiff) within(tol float64) bool {
	if d.BitIdentical {
		return true
	}
	m := float64(d.MaxAbsDiff)
	return d.Mismatch == "" && tol > 0 && !math.IsNaN(m) && m <= tol
}

// safetyVerdict is one side's safety outcome.
type safetyVerdict struct {
	Clamped  int    `json:"clamped"`
	Rejected bool   `json:"rejected"`
	First    string `json:"first,omitempty"` // group[step][dim] kind
}

// safetyChange compares the recorded and replayed verdicts; it is only
// set when both sides have one.
type safetyChange struct {
	Recorded safetyVerdict `json:"recorded"`
	Replayed safetyVerdict `json:"replayed"`
	Changed  bool          `json:"changed"`
}

// compareValues compares replayed values with recorded ones of the same
// length: bit-identical (every float64 bit pattern equal), the largest
// |difference| (NaN when a difference is NaN: a NaN on one side only) and
// the PCC.
func compareValues(got, want []float64) *tensorDiff {
	if len(got) != len(want) {
		return &tensorDiff{MaxAbsDiff: jsonFloat(math.Inf(1)), PCC: jsonFloat(math.NaN()),
			Mismatch: fmt.Sprintf("%d values, recorded %d", len(got), len(want))}
	}
	d := &tensorDiff{BitIdentical: true}
	md := 0.0
	for i := range got {
		if math.Float64bits(got[i]) == math.Float64bits(want[i]) {
			continue
		}
		d.BitIdentical = false
		x := math.Abs(got[i] - want[i])
		if math.IsNaN(x) || math.IsNaN(md) {
			md = math.NaN()
		} else {
			md = math.Max(md, x)
		}
	}
	d.MaxAbsDiff, d.PCC = jsonFloat(md), jsonFloat(tensor.PCC(got, want))
	return d
}

// compareRows compares replayed [H][D] rows with a recorded tensor,
// checking the shape first.
func compareRows(got [][]float64, want *record.Tensor) *tensorDiff {
	d, _, _ := compareRowsValues(got, want)
	return d
}

// compareRowsValues is compareRows that also returns both sides' values
// as compared (nil on a mismatch). Against a float32 recording the
// replayed values are rounded to float32 first: the gateway's answers
// carry float32 values, and an encoding that writes them as the shortest
// float32 decimal must not read as a difference.
func compareRowsValues(got [][]float64, want *record.Tensor) (d *tensorDiff, g, w []float64) {
	wv, shape, err := tensorValues(want)
	if err != nil {
		return &tensorDiff{MaxAbsDiff: jsonFloat(math.Inf(1)), PCC: jsonFloat(math.NaN()), Mismatch: err.Error()}, nil, nil
	}
	if gs := rowsShape(got); !shapeEqual(gs, shape) {
		return &tensorDiff{MaxAbsDiff: jsonFloat(math.Inf(1)), PCC: jsonFloat(math.NaN()),
			Mismatch: fmt.Sprintf("shape %v, recorded %v", gs, shape)}, nil, nil
	}
	gv := flatten(got)
	if want.DType == "float32" {
		for i, x := range gv {
			gv[i] = float64(float32(x))
		}
	}
	return compareValues(gv, wv), gv, wv
}

// compareActions compares the replayed action groups with the recorded
// ones, group by group and all together; a group missing on either side is
// a mismatch naming it.
func compareActions(got map[string][][]float64, want []record.ActionGroup) *tensorDiff {
	d := &tensorDiff{BitIdentical: true, PerGroup: map[string]*tensorDiff{}}
	var all, allWant []float64
	var mismatch []string
	for i := range want {
		k := want[i].Key
		g, ok := got[k]
		if !ok {
			mismatch = append(mismatch, "group "+k+": recorded, not in the answer")
			continue
		}
		gd, gv, wv := compareRowsValues(g, &want[i].Tensor)
		d.PerGroup[k] = gd
		if gd.Mismatch != "" {
			mismatch = append(mismatch, "group "+k+": "+gd.Mismatch)
			continue
		}
		all, allWant = append(all, gv...), append(allWant, wv...)
	}
	for _, k := range sortedKeys(got) {
		if !slices.ContainsFunc(want, func(a record.ActionGroup) bool { return a.Key == k }) {
			mismatch = append(mismatch, "group "+k+": in the answer, not recorded")
		}
	}
	tot := compareValues(all, allWant)
	d.BitIdentical, d.MaxAbsDiff, d.PCC = tot.BitIdentical, tot.MaxAbsDiff, tot.PCC
	if len(mismatch) > 0 {
		d.BitIdentical, d.MaxAbsDiff, d.Mismatch = false, jsonFloat(math.Inf(1)), strings.Join(mismatch, "; ")
	}
	return d
}

// tensorValues returns a float tensor's values as float64 (float32 values
// convert exactly) and its shape.
func tensorValues(t *record.Tensor) ([]float64, []int, error) {
	switch t.DType {
	case "float32":
		v, err := t.Float32s()
		if err != nil {
			return nil, nil, err
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out, t.Shape, nil
	case "float64":
		out := make([]float64, len(t.Data)/8)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
		return out, t.Shape, nil
	}
	return nil, nil, fmt.Errorf("dtype %s, want float32 or float64", t.DType)
}

// rowsShape is the shape of rows ([H, D]; D −1 when ragged).
func rowsShape(rows [][]float64) []int {
	if len(rows) == 0 {
		return []int{0}
	}
	d := len(rows[0])
	for _, r := range rows {
		if len(r) != d {
			d = -1
		}
	}
	return []int{len(rows), d}
}

// shapeEqual compares a replayed [H, D] shape with a recorded one, whose
// leading batch of one is dropped.
func shapeEqual(got, want []int) bool {
	for len(want) > 2 && want[0] == 1 {
		want = want[1:]
	}
	return slices.Equal(got, want)
}

// replayRecord is one loaded record file.
type replayRecord struct {
	path string
	rec  *record.Record
	err  error
}

// loadRecords lists and reads DIR; a file that does not decode is kept
// with its error (it becomes an error row naming it).
func loadRecords(dir string) ([]replayRecord, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("record directory %s: %w", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("record directory %s: not a directory", dir)
	}
	paths, err := record.List(dir)
	if err != nil {
		return nil, fmt.Errorf("record directory %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("record directory %s: no *%s files", dir, record.Ext)
	}
	out := make([]replayRecord, len(paths))
	for i, p := range paths {
		out[i].path = p
		out[i].rec, out[i].err = record.ReadFile(p)
	}
	return out, nil
}

// replayer holds the protocols of one replay run.
type replayer struct {
	c     *replayConfig
	opts  client.Options
	http  *client.HTTP
	conns map[string]client.Protocol // oip, zmq, openpi, dialled on first use
	errs  map[string]error
}

func (r *replayer) close() {
	r.http.Close()
	for _, p := range r.conns {
		_ = p.Close()
	}
}

// endpoint is the URL a protocol is replayed to ("" when not given).
func (r *replayer) endpoint(proto string) string {
	switch proto {
	case "http", "oip":
		return r.c.url
	case "zmq":
		return r.c.zmqURL
	case "openpi":
		return r.c.openpiURL
	}
	return ""
}

// robot returns the connection of a robot protocol, dialling it once.
func (r *replayer) robot(ctx context.Context, proto string) (client.Protocol, error) {
	if p, ok := r.conns[proto]; ok {
		return p, nil
	}
	if err, ok := r.errs[proto]; ok {
		return nil, err
	}
	u := r.endpoint(proto)
	if u == "" {
		err := fmt.Errorf("--protocol %s needs --%s-url", proto, proto)
		r.errs[proto] = err
		return nil, err
	}
	p, err := client.Dial(ctx, proto, u, r.opts)
	if err != nil {
		err = fmt.Errorf("%s endpoint %s: %w", proto, u, err)
		r.errs[proto] = err
		return nil, err
	}
	r.conns[proto] = p
	return p, nil
}

// replay loads DIR, checks the server is reachable and replays every
// record in order.
func replay(ctx context.Context, c *replayConfig) (*replayReport, error) {
	recs, err := loadRecords(c.dir)
	if err != nil {
		return nil, err
	}
	opts, err := c.auth.options(c.timeout)
	if err != nil {
		return nil, err
	}
	opts.DemoURL = c.url
	if err := checkReachable(ctx, c.url, opts); err != nil {
		return nil, err
	}
	r := &replayer{c: c, opts: opts, http: client.NewHTTP(c.url, opts), conns: map[string]client.Protocol{}, errs: map[string]error{}}
	defer r.close()
	rep := &replayReport{Dir: c.dir, URL: c.url, Protocol: c.protocol, Tolerance: c.tolerance, Failing: []string{}}
	for _, lr := range recs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		nan := jsonFloat(math.NaN())
		rr := &replayRequest{File: filepath.Base(lr.path), Latency: replayLatency{nan, nan, nan}}
		if lr.err != nil {
			rr.Status, rr.Error = "error", lr.err.Error()
		} else {
			r.one(ctx, lr.rec, rr)
		}
		rep.add(rr)
	}
	rep.summarise()
	return rep, nil
}

// checkReachable fails when nothing answers HTTP at url.
func checkReachable(ctx context.Context, url string, o client.Options) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/v2/health/live", nil)
	if err != nil {
		return fmt.Errorf("--url %s: %w", url, err)
	}
	resp, err := o.HTTPClient().Do(req)
	if err != nil {
		return fmt.Errorf("--url %s: the server is unreachable: %w", url, err)
	}
	resp.Body.Close()
	return nil
}

// canCarry says why proto cannot replay rec ("" when it can).
func canCarry(proto string, rec *record.Record) string {
	if proto == "http" {
		return ""
	}
	if !slices.Contains(client.Protocols, proto) {
		return fmt.Sprintf("protocol %q is not one replay speaks", proto)
	}
	if rec.Seed == nil {
		return proto + " carries a seed, not explicit noise"
	}
	for _, k := range replayOptionKeys {
		if _, ok := rec.Request.Options[k]; ok {
			return proto + " carries no option " + k
		}
	}
	for _, s := range rec.Request.State {
		if s.Key == "" || s.Steps > 1 {
			return proto + " carries state as one-step groups only"
		}
	}
	return ""
}

// pick chooses the protocol of one record: --protocol, else the recorded
// one when it can carry the record and its endpoint is given, else http.
func (r *replayer) pick(rec *record.Record, rr *replayRequest) error {
	if r.c.protocol != "" {
		rr.Protocol = r.c.protocol
		if why := canCarry(r.c.protocol, rec); why != "" {
			return fmt.Errorf("--protocol %s cannot replay this record: %s", r.c.protocol, why)
		}
		return nil
	}
	rr.Protocol = "http"
	proto := rec.Protocol
	if proto == "" || proto == "http" {
		return nil
	}
	if why := canCarry(proto, rec); why != "" {
		rr.Fallback = why
	} else if r.endpoint(proto) == "" {
		rr.Fallback = fmt.Sprintf("no --%s-url given", proto)
	} else {
		rr.Protocol = proto
	}
	return nil
}

// replayAnswer is what a replayed request returned.
type replayAnswer struct {
	actions    map[string][][]float64
	pred       [][][]float64 // candidate action_pred arrays (normalized, valid_hd)
	total      float64
	wall       time.Duration
	safety     *safetyVerdict
	hasSafety  bool
	rejected   bool
	errMessage string
}

// one replays one record into rr.
func (r *replayer) one(ctx context.Context, rec *record.Record, rr *replayRequest) {
	rr.RequestID, rr.Embodiment, rr.Recorded = rec.RequestID, rec.Embodiment, rec.Protocol
	rr.Latency.Recorded = jsonFloat(math.NaN())
	if t, ok := rec.TimingMS["total"]; ok {
		rr.Latency.Recorded = jsonFloat(t)
	}
	fail := func(err error) { rr.Status, rr.Error = "error", err.Error() }
	if err := r.pick(rec, rr); err != nil {
		fail(err)
		return
	}
	if rec.Request.InstructionRedacted {
		fail(errors.New("the instruction was redacted when recorded: the request cannot be replayed"))
		return
	}
	switch {
	case rec.Seed != nil:
		rr.Noise = fmt.Sprintf("seed %d", *rec.Seed)
	case rec.Noise != nil:
		rr.Noise = fmt.Sprintf("noise %v", rec.Noise.Shape)
	default:
		fail(fmt.Errorf("no seed or noise recorded (noise source %q): the answer cannot be reproduced", rec.NoiseSource))
		return
	}
	var ans *replayAnswer
	var err error
	if rr.Protocol == "http" {
		ans, err = r.sendHTTP(ctx, rec)
	} else {
		ans, err = r.sendRobot(ctx, rr.Protocol, rec)
	}
	if err != nil {
		fail(err)
		return
	}
	rr.Latency.Replayed, rr.Latency.Wall = jsonFloat(ans.total), jsonFloat(float64(ans.wall.Microseconds())/1e3)
	r.compare(rec, ans, rr)
}

// compare fills rr's comparisons and status from the answer.
func (r *replayer) compare(rec *record.Record, ans *replayAnswer, rr *replayRequest) {
	tol := r.c.tolerance
	identical := true
	note := func(what string, d *tensorDiff) {
		identical = identical && d.BitIdentical
		if d.within(tol) {
			return
		}
		if d.Mismatch != "" {
			rr.Diffs = append(rr.Diffs, what+": "+d.Mismatch)
		} else {
			rr.Diffs = append(rr.Diffs, fmt.Sprintf("%s: max|d| %s", what, fmtFloat(float64(d.MaxAbsDiff))))
		}
	}
	// The outcome: a recorded failure must fail again (a safety rejection
	// as a rejection), a recorded answer must be answered.
	switch {
	case rec.Error != "" && ans.errMessage == "":
		rr.Diffs = append(rr.Diffs, "recorded as failed ("+rec.Error+"), answered on replay")
	case rec.Error == "" && ans.errMessage != "":
		rr.Diffs = append(rr.Diffs, "answered when recorded, failed on replay: "+ans.errMessage)
	}
	if rec.Error == "" && ans.errMessage == "" {
		rr.Actions = compareActions(ans.actions, rec.Actions)
		note("actions", rr.Actions)
		if rec.ActionPred != nil && len(ans.pred) > 0 {
			rr.ActionPred = compareRows(ans.pred[0], rec.ActionPred)
			for _, p := range ans.pred[1:] { // the candidate of the recorded shape
				if rr.ActionPred.Mismatch == "" {
					break
				}
				rr.ActionPred = compareRows(p, rec.ActionPred)
			}
			note("action_pred", rr.ActionPred)
		}
	}
	if rec.Safety != nil && (ans.hasSafety || ans.rejected || rec.Safety.Rejected) {
		sc := &safetyChange{Recorded: recordedVerdict(rec.Safety)}
		if ans.safety != nil {
			sc.Replayed = *ans.safety
		}
		sc.Replayed.Rejected = ans.rejected
		sc.Changed = sc.Recorded != sc.Replayed
		rr.Safety = sc
		if sc.Changed {
			rr.Diffs = append(rr.Diffs, fmt.Sprintf("safety verdict %s → %s", sc.Recorded, sc.Replayed))
		}
	}
	switch {
	case len(rr.Diffs) > 0:
		rr.Status = "differs"
	case identical:
		rr.Status = "bit-identical"
	default:
		rr.Status = "within-tolerance"
	}
}

func (v safetyVerdict) String() string {
	s := fmt.Sprintf("clamped %d", v.Clamped)
	if v.Rejected {
		s = "rejected"
	}
	if v.First != "" {
		s += " (" + v.First + ")"
	}
	return s
}

func recordedVerdict(s *record.Safety) safetyVerdict {
	v := safetyVerdict{Clamped: s.Clamped, Rejected: s.Rejected}
	if f := s.First; f != nil {
		v.First = fmt.Sprintf("%s[%d][%d] %s", f.Group, f.Step, f.Dim, f.Kind)
	}
	return v
}

// httpBody is the /predict msgpack body that replays rec: frames as the
// recorded bytes (raw frames as {data, shape}), the state, instruction,
// embodiment and real-time-chunking options as recorded, the seed (or, when
// none was recorded, the noise) and return_normalized.
func httpBody(rec *record.Record) ([]byte, error) {
	q := &rec.Request
	images := map[string][]any{}
	frames := slices.Clone(q.Frames)
	sort.SliceStable(frames, func(i, j int) bool { return frames[i].Step < frames[j].Step })
	for _, f := range frames {
		switch f.Encoding {
		case "raw":
			images[f.Camera] = append(images[f.Camera], map[string]any{"data": f.Data, "shape": f.Shape})
		case "base64", "b64":
			images[f.Camera] = append(images[f.Camera], string(f.Data))
		default:
			images[f.Camera] = append(images[f.Camera], f.Data)
		}
	}
	var state any
	if len(q.State) == 1 && q.State[0].Key == "" {
		state = stateRows(q.State[0])
	} else {
		m := map[string]any{}
		for _, s := range q.State {
			m[s.Key] = stateRows(s)
		}
		state = m
	}
	body := map[string]any{"images": images, "state": state, "instruction": q.Instruction, "return_normalized": true}
	if rec.Embodiment != "" {
		body["embodiment"] = rec.Embodiment
	}
	opts := map[string]any{}
	for _, k := range replayOptionKeys {
		if v, ok := q.Options[k]; ok {
			opts[k] = v
		}
	}
	if len(opts) > 0 {
		body["options"] = opts
	}
	switch {
	case rec.Seed != nil:
		body["seed"] = *rec.Seed
	case rec.Noise != nil:
		n, err := nested(rec.Noise)
		if err != nil {
			return nil, fmt.Errorf("recorded noise: %w", err)
		}
		body["noise"] = n
	}
	b, err := msgpack.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	return b, nil
}

// stateRows is a state group as sent: flat, or Steps rows.
func stateRows(s record.State) any {
	if s.Steps == 0 {
		return s.Values
	}
	d := len(s.Values) / s.Steps
	out := make([][]float64, s.Steps)
	for i := range out {
		out[i] = s.Values[i*d : (i+1)*d]
	}
	return out
}

// nested turns a float tensor of shape [H, D] or [1, H, D] into nested
// rows.
func nested(t *record.Tensor) (any, error) {
	v, shape, err := tensorValues(t)
	if err != nil {
		return nil, err
	}
	batch := len(shape) == 3 && shape[0] == 1
	if batch {
		shape = shape[1:]
	}
	if len(shape) != 2 {
		return nil, fmt.Errorf("shape %v, want [H, D] or [1, H, D]", t.Shape)
	}
	rows := make([][]float64, shape[0])
	for i := range rows {
		rows[i] = v[i*shape[1] : (i+1)*shape[1]]
	}
	if batch {
		return [][][]float64{rows}, nil
	}
	return rows, nil
}

// httpAnswer is the part of the /predict answer replay compares.
type httpAnswer struct {
	Actions  map[string][][]float64 `json:"actions"`
	Timing   map[string]any         `json:"timing_ms"`
	PredNorm [][]float64            `json:"action_pred_normalized"`
	PredHD   [][]float64            `json:"action_pred_valid_hd"`
	Safety   *struct {
		Clamped int `json:"clamped"`
		First   *struct {
			Group string `json:"group"`
			Step  int    `json:"step"`
			Dim   int    `json:"dim"`
			Kind  string `json:"kind"`
		} `json:"first"`
	} `json:"safety"`
}

// sendHTTP replays rec over POST /predict (msgpack). A refusal (an HTTP
// error status) is an answer with errMessage set, not an error; a
// transport failure is an error.
func (r *replayer) sendHTTP(ctx context.Context, rec *record.Record) (*replayAnswer, error) {
	body, err := httpBody(rec)
	if err != nil {
		return nil, err
	}
	rb, hdr, wall, err := r.http.Post(ctx, body, client.MIMEMsgpack, rec.RequestID)
	if err != nil {
		if hdr == nil { // no answer at all
			return nil, err
		}
		return &replayAnswer{wall: wall, errMessage: err.Error(), rejected: isRejection(err.Error())}, nil
	}
	var a httpAnswer
	if err := json.Unmarshal(rb, &a); err != nil {
		return nil, fmt.Errorf("the answer: %w", err)
	}
	ans := &replayAnswer{actions: a.Actions, wall: wall, total: math.NaN()}
	if t, ok := a.Timing["total"].(float64); ok {
		ans.total = t
	}
	if a.PredNorm != nil {
		ans.pred = append(ans.pred, a.PredNorm)
	}
	if a.PredHD != nil {
		ans.pred = append(ans.pred, a.PredHD)
	}
	if s := a.Safety; s != nil {
		ans.hasSafety = true
		ans.safety = &safetyVerdict{Clamped: s.Clamped}
		if f := s.First; f != nil {
			ans.safety.First = fmt.Sprintf("%s[%d][%d] %s", f.Group, f.Step, f.Dim, f.Kind)
		}
	}
	return ans, nil
}

// isRejection reports whether an error answer is the safety gate's
// refusal (code unsafe_action, docs/recording.md).
func isRejection(msg string) bool {
	return strings.Contains(msg, "unsafe_action") || strings.Contains(msg, "unsafe action")
}

// robotBody is the /predict JSON body client's robot protocols translate:
// frames base64 (raw frames as PNG, which the client decodes back to the
// very same pixels), the one-step state groups, instruction, embodiment
// and seed.
func robotBody(rec *record.Record) ([]byte, error) {
	q := &rec.Request
	images := map[string][]string{}
	frames := slices.Clone(q.Frames)
	sort.SliceStable(frames, func(i, j int) bool { return frames[i].Step < frames[j].Step })
	for i, f := range frames {
		data := f.Data
		switch f.Encoding {
		case "raw":
			p, err := rawToPNG(f)
			if err != nil {
				return nil, fmt.Errorf("request.frames[%d] (%s): %w", i, f.Camera, err)
			}
			data = p
		case "base64", "b64":
			images[f.Camera] = append(images[f.Camera], string(f.Data))
			continue
		}
		images[f.Camera] = append(images[f.Camera], base64.StdEncoding.EncodeToString(data))
	}
	state := map[string][]float64{}
	for _, s := range q.State {
		state[s.Key] = s.Values
	}
	return json.Marshal(map[string]any{"images": images, "state": state, "instruction": q.Instruction,
		"embodiment": rec.Embodiment, "seed": *rec.Seed})
}

// rawToPNG encodes a raw [H, W, 3] uint8 frame losslessly.
func rawToPNG(f record.Frame) ([]byte, error) {
	if len(f.Shape) != 3 || f.Shape[2] != 3 || len(f.Data) != f.Shape[0]*f.Shape[1]*3 {
		return nil, fmt.Errorf("raw frame of shape %v with %d bytes, want [H, W, 3]", f.Shape, len(f.Data))
	}
	h, w := f.Shape[0], f.Shape[1]
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < h*w; i++ {
		copy(img.Pix[4*i:4*i+3], f.Data[3*i:3*i+3])
		img.Pix[4*i+3] = 0xff
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// sendRobot replays rec over a robot protocol (oip, zmq, openpi). Their
// clients return no action_pred and no safety verdict; an error reply is
// an answer with errMessage set.
func (r *replayer) sendRobot(ctx context.Context, proto string, rec *record.Record) (*replayAnswer, error) {
	p, err := r.robot(ctx, proto)
	if err != nil {
		return nil, err
	}
	body, err := robotBody(rec)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	pr, err := p.Predict(ctx, body)
	if err != nil {
		if ctx.Err() != nil || isTransport(err) {
			return nil, err
		}
		return &replayAnswer{wall: time.Since(t0), errMessage: err.Error(), rejected: isRejection(err.Error())}, nil
	}
	total, ok := pr.Timing["total"]
	if !ok {
		total = math.NaN() // zmq and openpi report no server total
	}
	return &replayAnswer{actions: pr.Actions, total: total, wall: pr.Wall}, nil
}

// isTransport reports whether err means the endpoint did not answer.
func isTransport(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "timeout") || strings.Contains(s, "deadline exceeded") ||
		strings.Contains(s, "EOF") || strings.Contains(s, "closed")
}

// add counts one request into the report.
func (rep *replayReport) add(rr *replayRequest) {
	rep.Total++
	rep.Requests = append(rep.Requests, rr)
	switch rr.Status {
	case "bit-identical":
		rep.BitIdentical++
	case "within-tolerance":
		rep.Within++
	case "differs":
		rep.Differ++
	default:
		rep.Errors++
	}
	if rr.Safety != nil && rr.Safety.Changed {
		rep.SafetyChanges++
	}
	if rr.Status == "differs" || rr.Status == "error" {
		name := rr.File
		if rr.RequestID != "" {
			name += " (request " + rr.RequestID + ")"
		}
		rep.Failing = append(rep.Failing, name)
	}
}

// summarise fills the totals: the worst diffs and the median latencies.
func (rep *replayReport) summarise() {
	worst := func(s *replaySummary, d *tensorDiff) {
		if d == nil {
			return
		}
		if s.Compared++; s.Compared == 1 {
			s.MaxAbsDiff, s.MinPCC = d.MaxAbsDiff, d.PCC
			return
		}
		m, w := float64(d.MaxAbsDiff), float64(s.MaxAbsDiff)
		if math.IsNaN(m) || math.IsNaN(w) {
			s.MaxAbsDiff = jsonFloat(math.NaN())
		} else {
			s.MaxAbsDiff = jsonFloat(math.Max(m, w))
		}
		if p := float64(d.PCC); p < float64(s.MinPCC) || math.IsNaN(p) {
			s.MinPCC = d.PCC
		}
	}
	nan := jsonFloat(math.NaN()) // null in JSON until a request is compared
	rep.Actions = replaySummary{MaxAbsDiff: nan, MinPCC: nan}
	rep.ActionPred = rep.Actions
	var rec, rpl, wall []float64
	for _, rr := range rep.Requests {
		worst(&rep.Actions, rr.Actions)
		worst(&rep.ActionPred, rr.ActionPred)
		if rr.Status != "error" {
			rec, rpl, wall = append(rec, float64(rr.Latency.Recorded)), append(rpl, float64(rr.Latency.Replayed)), append(wall, float64(rr.Latency.Wall))
		}
	}
	rep.Latency = replayLatency{Recorded: jsonFloat(median(rec)), Replayed: jsonFloat(median(rpl)), Wall: jsonFloat(median(wall))}
}

// median is the median of v's numbers (NaN when it has none).
func median(v []float64) float64 {
	s := slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// fmtFloat prints a difference compactly ("0", "3.1e-05", "NaN", "+Inf").
func fmtFloat(x float64) string {
	switch {
	case x == 0:
		return "0"
	case math.IsNaN(x) || math.IsInf(x, 0):
		return fmt.Sprint(x)
	}
	return fmt.Sprintf("%.2g", x)
}

// printTable writes one row per request and the totals.
func (rep *replayReport) printTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tEMBODIMENT\tPROTOCOL\tNOISE\tACTIONS max|d|\tPCC\tACTION_PRED max|d|\tPCC\tSAFETY\tTOTAL_MS rec/rep\tWALL_MS\tSTATUS")
	for _, rr := range rep.Requests {
		cell := func(d *tensorDiff) (string, string) {
			if d == nil {
				return "-", "-"
			}
			if d.Mismatch != "" {
				return "mismatch", "-"
			}
			return fmtFloat(float64(d.MaxAbsDiff)), fmt.Sprintf("%.6f", float64(d.PCC))
		}
		am, ap := cell(rr.Actions)
		pm, pp := cell(rr.ActionPred)
		safety := "-"
		if rr.Safety != nil {
			safety = "same"
			if rr.Safety.Changed {
				safety = rr.Safety.Recorded.String() + " → " + rr.Safety.Replayed.String()
			}
		}
		proto := rr.Protocol
		if rr.Fallback != "" {
			proto += " (from " + rr.Recorded + ")"
		}
		status := rr.Status
		if rr.Error != "" {
			status += ": " + rr.Error
		} else if len(rr.Diffs) > 0 {
			status += ": " + strings.Join(rr.Diffs, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\n", rr.File, orDash(rr.Embodiment), orDash(proto), orDash(rr.Noise),
			am, ap, pm, pp, safety, fmtMS(rr.Latency.Recorded), fmtMS(rr.Latency.Replayed), fmtMS(rr.Latency.Wall), status)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nreplay %s → %s: %d requests: %d bit-identical, %d within tolerance %g, %d differ, %d errors; safety verdict changes %d\n",
		rep.Dir, rep.URL, rep.Total, rep.BitIdentical, rep.Within, rep.Tolerance, rep.Differ, rep.Errors, rep.SafetyChanges)
	fmt.Fprintf(w, "actions: %s; action_pred: %s; p50 total_ms recorded=%s replayed=%s wall_ms=%s\n",
		rep.Actions, rep.ActionPred, fmtMS(rep.Latency.Recorded), fmtMS(rep.Latency.Replayed), fmtMS(rep.Latency.Wall))
	for _, rr := range rep.Requests {
		if rr.Fallback != "" {
			fmt.Fprintf(w, "note: %s went over http, not %s: %s\n", rr.File, rr.Recorded, rr.Fallback)
		}
	}
}

func (s replaySummary) String() string {
	if s.Compared == 0 {
		return "none compared"
	}
	return fmt.Sprintf("%d compared, max|d|=%s min PCC=%.6f", s.Compared, fmtFloat(float64(s.MaxAbsDiff)), float64(s.MinPCC))
}

// fmtMS prints milliseconds, "-" when not reported (NaN).
func fmtMS(x jsonFloat) string {
	if math.IsNaN(float64(x)) {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(x))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// inspectRow is one record as --inspect shows it.
type inspectRow struct {
	File       string    `json:"file"`
	Time       string    `json:"time,omitempty"`
	RequestID  string    `json:"request_id,omitempty"`
	Protocol   string    `json:"protocol,omitempty"`
	Session    string    `json:"session,omitempty"`
	Embodiment string    `json:"embodiment,omitempty"`
	Plugin     string    `json:"plugin,omitempty"`
	Checkpoint string    `json:"checkpoint,omitempty"`
	Noise      string    `json:"noise,omitempty"`
	Frames     string    `json:"frames,omitempty"`
	State      string    `json:"state,omitempty"`
	Actions    string    `json:"actions,omitempty"`
	Safety     string    `json:"safety,omitempty"`
	TotalMS    jsonFloat `json:"total_ms"`
	Error      string    `json:"error,omitempty"`
}

// inspectRecords prints DIR's records as a table (and writes them as JSON
// to out when set); a file that does not decode is a row naming its error,
// and makes the command fail after printing.
func inspectRecords(dir, out string, w io.Writer) error {
	recs, err := loadRecords(dir)
	if err != nil {
		return err
	}
	rows := make([]inspectRow, 0, len(recs))
	var bad []string
	for _, lr := range recs {
		row := inspectRow{File: filepath.Base(lr.path), TotalMS: jsonFloat(math.NaN())}
		if lr.err != nil {
			row.Error = lr.err.Error()
			bad = append(bad, row.File)
			rows = append(rows, row)
			continue
		}
		r := lr.rec
		if r.TimeUnixNS != 0 {
			row.Time = time.Unix(0, r.TimeUnixNS).UTC().Format("2006-01-02T15:04:05.000Z")
		}
		row.RequestID, row.Protocol, row.Session, row.Embodiment = r.RequestID, r.Protocol, r.Session, r.Embodiment
		if r.Plugin.Name != "" {
			row.Plugin = r.Plugin.Name + "@" + r.Plugin.Version
		}
		row.Checkpoint = r.Checkpoint
		if len(row.Checkpoint) > 19 {
			row.Checkpoint = row.Checkpoint[:19] + "…"
		}
		switch {
		case r.Seed != nil:
			row.Noise = fmt.Sprintf("seed %d", *r.Seed)
		case r.Noise != nil:
			row.Noise = fmt.Sprintf("noise %v", r.Noise.Shape)
		default:
			row.Noise = r.NoiseSource
		}
		cams := map[string]int{}
		size := 0
		for _, f := range r.Request.Frames {
			cams[f.Camera]++
			size += len(f.Data)
		}
		var fr []string
		for _, k := range sortedKeys(cams) {
			fr = append(fr, fmt.Sprintf("%s×%d", k, cams[k]))
		}
		if len(fr) > 0 {
			row.Frames = fmt.Sprintf("%s (%d KB)", strings.Join(fr, " "), (size+1023)/1024)
		}
		var st []string
		for _, g := range r.Request.State {
			st = append(st, fmt.Sprintf("%s[%d]", orDash(g.Key), len(g.Values)))
		}
		row.State = strings.Join(st, " ")
		var ac []string
		for _, a := range r.Actions {
			ac = append(ac, fmt.Sprintf("%s%v", a.Key, a.Tensor.Shape))
		}
		row.Actions = strings.Join(ac, " ")
		if r.Safety != nil {
			row.Safety = r.Safety.Policy + ": " + recordedVerdict(r.Safety).String()
		}
		if t, ok := r.TimingMS["total"]; ok {
			row.TotalMS = jsonFloat(t)
		}
		row.Error = r.Error
		rows = append(rows, row)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tTIME\tPROTOCOL\tSESSION\tEMBODIMENT\tPLUGIN\tCHECKPOINT\tNOISE\tFRAMES\tSTATE\tACTIONS\tSAFETY\tTOTAL_MS\tERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.File, orDash(r.Time), orDash(r.Protocol), orDash(r.Session),
			orDash(r.Embodiment), orDash(r.Plugin), orDash(r.Checkpoint), orDash(r.Noise), orDash(r.Frames), orDash(r.State), orDash(r.Actions),
			orDash(r.Safety), fmtMS(r.TotalMS), orDash(r.Error))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%s: %d records\n", dir, len(rows))
	if out != "" {
		if err := writeJSONFile(out, rows); err != nil {
			return fmt.Errorf("--out %s: %w", out, err)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d record files do not decode: %s", len(bad), len(rows), strings.Join(bad, ", "))
	}
	return nil
}
