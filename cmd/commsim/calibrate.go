package main

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/optimize"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// calibrate fits two numbers to a measured log: sα multiplies every link's
// latency, sβ every link's effective bandwidth. Scaling all links alike keeps
// the ratios between link classes (NVLink, PCIe, NIC) that the topology
// states: the times of one collective cannot tell the classes apart.
// Bandwidth and efficiency are one degree of freedom for the simulator (it
// uses BW×Efficiency), so the fit finds one effective-bandwidth scale; where
// every link has latency 0, sα sets each link's latency to sα×1µs instead.
//
// The objective is the sum over sizes of the squared relative error of the
// simulated (timing-only) time against the measured out-of-place time. A
// linear α-β-γ decomposition from three simulations gives the start, and
// Nelder-Mead on (ln sα, ln sβ) refines it on the simulator itself.

const (
	maxLogBytes   = 64 << 20
	residualWarn  = 0.10 // warn where |fitted/measured − 1| exceeds this
	plateauFlat   = 1.10 // a plateau: times within this ratio …
	plateauSpan   = 8    // … over sizes spanning at least this factor
	logScaleLimit = 13.8 // scales stay within e^±13.8 ≈ 10^±6
)

type calFlags struct{ log, topo, op, algo, out, format, minBytes, maxBytes string }

func newCalibrateCmd() *cobra.Command {
	var f calFlags
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Fit link latency and bandwidth to an nccl-tests log",
		Long: `calibrate reads nccl-tests output (the text table, old or new, or a CSV naming
size(B) and time(us) columns) and scales every link's latency by one factor and
its effective bandwidth by another, keeping the ratios between link classes, so
that the simulated collective reproduces the measured out-of-place times (least
squared relative error; Nelder-Mead from a linear α-β start). It reports both
factors, the links and, per size, measured and fitted times. Warnings (stderr,
and "warnings" in JSON) flag sizes off by over 10% and small-size plateaus. Only
--out writes the calibrated topology (YAML, for --topo FILE).`,
		Example: `  commsim calibrate --log all_reduce.txt --topo dgx-h100 --out dgx-h100-fitted.yaml
  commsim calibrate --log ag.csv --topo switch:8,bw=200GB/s --op allgather --format json
  commsim calibrate --log all_reduce.txt --topo dgx-h100 -b 16MiB   # fit above a latency plateau
  commsim bench --topo dgx-h100-fitted.yaml --algo ring --timing-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.OutOrStdout(), cmd.ErrOrStderr(), cmd.Flags().Changed("op"))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.log, "log", "", "nccl-tests output: text table or CSV (required)")
	fl.StringVar(&f.topo, "topo", "", "topology to calibrate: a spec, a preset or a YAML file (required)")
	fl.StringVar(&f.op, "op", "allreduce", "collective the log measured (default: the log's, else allreduce)")
	fl.StringVar(&f.algo, "algo", "ring", "algorithm to simulate: "+strings.Join(ops.Algorithms(), "|"))
	fl.StringVar(&f.out, "out", "", "write the calibrated topology (YAML) to this file")
	fl.StringVar(&f.format, "format", "table", "report: table|csv|json")
	fl.StringVarP(&f.minBytes, "min-bytes", "b", "0", "fit only sizes from this one up (e.g. above a latency plateau)")
	fl.StringVarP(&f.maxBytes, "max-bytes", "e", "1TiB", "fit only sizes up to this one")
	return cmd
}

// sample is one size of the log; ncclLog is what the log says.
type sample struct {
	bytes  int64
	timeUS float64
	line   int
}

type ncclLog struct {
	format, op, dtype string // op and dtype "" where the log does not name them
	ranks             int    // 0 where the log does not say
	rows              []sample
}

var (
	testOps = map[string]string{"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
		"broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall", "gather": "gather", "sendrecv": "sendrecv"}
	rankRE  = regexp.MustCompile(`^#\s*Rank\s+\d+\s`)
	startRE = regexp.MustCompile(`Collective test starting:\s*(\w+)_perf`)
	noiseRE = regexp.MustCompile(`\bNCCL (INFO|WARN|TRACE)\b`)
	dateRE  = regexp.MustCompile(`^\d{4}-\d\d-\d\d$`)
	// CSV header names, lower case, and the column each stands for.
	csvNames = map[string]string{"size(b)": "size", "size": "size", "bytes": "size", "time(us)": "time", "time": "time",
		"time_us": "time", "cputime": "time", "op": "op", "ranks": "ranks", "type": "type", "dtype": "type"}
	// Element sizes of nccl-tests type names hw.ParseDType does not know.
	extraTypes = map[string]hw.DType{"int8": hw.U8, "char": hw.U8, "f8e4m3": hw.U8, "f8e5m2": hw.U8, "uint32": hw.I32, "uint64": hw.I64}
)

func isNum(s string) bool { _, err := strconv.ParseFloat(s, 64); return err == nil }

// tableRow parses size count type [redop] [root] time algbw busbw … [date
// time]; hasRoot is 1 or 0 from the header, -1 without one (then the
// column count decides: nccl-tests prints 4 or 8 columns per half).
func tableRow(f []string, hasRoot int) (s sample, typ, msg string) {
	if len(f) >= 2 && dateRE.MatchString(f[len(f)-2]) {
		f = f[:len(f)-2]
	}
	if _, err := strconv.ParseInt(f[min(1, len(f)-1)], 10, 64); len(f) < 6 || f[0][0] < '0' || f[0][0] > '9' || err != nil || isNum(f[2]) {
		return s, "", "want a result row (size count type [redop] [root] time algbw busbw …), a # comment or a blank line"
	}
	k := 3
	if !isNum(f[k]) { // redop: older nccl-tests leave it out for gathers
		k++
	}
	if hasRoot == 1 || (hasRoot == -1 && (len(f)-k)%2 == 1) {
		k++
	}
	if len(f) < k+3 || !isNum(f[k+1]) || !isNum(f[k+2]) {
		return s, "", "want time, algbw and busbw after the size, count, type, redop and root columns"
	}
	s, msg = sizeTime(f[0], f[k])
	return s, f[2], msg
}

func sizeTime(size, time string) (s sample, msg string) {
	var err error
	if s.bytes, err = strconv.ParseInt(size, 10, 64); err != nil {
		return s, fmt.Sprintf("size %q is not a byte count", size)
	}
	if s.timeUS, err = strconv.ParseFloat(time, 64); err != nil {
		return s, fmt.Sprintf("time %q is not a number", time)
	}
	return s, ""
}

// csvRow parses a CSV record by the header's columns.
func (lg *ncclLog) csvRow(rec []string, cols map[string]int) (s sample, typ, msg string) {
	get := func(c string) string {
		if j, ok := cols[c]; ok {
			return strings.TrimSpace(rec[j])
		}
		return ""
	}
	s, msg = sizeTime(get("size"), get("time"))
	if n, err := strconv.Atoi(get("ranks")); err == nil {
		lg.ranks = n
	}
	lg.op = cmp.Or(get("op"), lg.op)
	return s, get("type"), msg
}

// parseLog reads an nccl-tests table or a CSV (a first data line with a
// comma). Errors name the line. Repeated sizes are averaged.
func parseLog(name string, data []byte) (*ncclLog, error) {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	lg := &ncclLog{format: ""}
	hasRoot := -1
	var cols map[string]int // the CSV header's columns
	width := 0              // and its number of fields
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || noiseRE.MatchString(t) {
			continue
		}
		if t[0] == '#' {
			if m := startRE.FindStringSubmatch(t); m != nil {
				lg.op = testOps[m[1]]
			}
			if rankRE.MatchString(t) {
				lg.ranks++
			}
			if f := strings.Fields(strings.TrimPrefix(t, "#")); len(f) > 1 && f[0] == "size" && f[1] == "count" {
				hasRoot = 0
				if slices.Contains(f, "root") {
					hasRoot = 1
				}
			}
			continue
		}
		if lg.format == "" {
			lg.format = map[bool]string{true: "csv", false: "nccl-tests table"}[strings.Contains(t, ",")]
		}
		var s sample
		var typ, msg string
		if lg.format == "csv" {
			rec, err := csv.NewReader(strings.NewReader(t)).Read()
			switch {
			case err != nil:
				msg = fmt.Sprintf("not CSV (%v)", err)
			case cols == nil:
				cols, width = map[string]int{}, len(rec)
				for j, h := range rec {
					c, ok := csvNames[strings.ToLower(strings.TrimSpace(h))]
					if _, seen := cols[c]; ok && !seen {
						cols[c] = j
					}
				}
				if _, ok := cols["size"]; !ok {
					msg = "CSV header has no size column (size(B), size or bytes)"
				} else if _, ok := cols["time"]; !ok {
					msg = "CSV header has no time column (time(us), time or time_us)"
				} else {
					continue
				}
			case len(rec) != width:
				msg = fmt.Sprintf("%d fields, the header has %d", len(rec), width)
			default:
				s, typ, msg = lg.csvRow(rec, cols)
			}
		} else {
			s, typ, msg = tableRow(strings.Fields(t), hasRoot)
		}
		if msg == "" && (!(s.timeUS > 0) || math.IsInf(s.timeUS, 0) || s.bytes < 0) {
			msg = "want a size >= 0 and a time > 0 µs"
		}
		if msg == "" && typ != "" && lg.dtype != "" && typ != lg.dtype {
			msg = fmt.Sprintf("type %s after %s: calibrate one type per log", typ, lg.dtype)
		}
		if msg != "" {
			text := strings.TrimSpace(lines[i])
			if len(text) > 120 {
				text = text[:117] + "..."
			}
			return nil, usagef("%s:%d: %s: %q", name, i+1, msg, text)
		}
		s.line, lg.dtype = i+1, cmp.Or(typ, lg.dtype)
		lg.rows = append(lg.rows, s)
	}
	if len(lg.rows) == 0 {
		return nil, usagef("%s: no result rows (want nccl-tests output or a CSV with size and time columns)", name)
	}
	slices.SortStableFunc(lg.rows, func(a, b sample) int { return cmp.Compare(a.bytes, b.bytes) })
	var rows []sample
	for i := 0; i < len(lg.rows); {
		j, sum := i, 0.0
		for ; j < len(lg.rows) && lg.rows[j].bytes == lg.rows[i].bytes; j++ {
			sum += lg.rows[j].timeUS
		}
		r := lg.rows[i]
		r.timeUS = sum / float64(j-i)
		rows, i = append(rows, r), j
	}
	lg.rows = rows
	return lg, nil
}

// fitter simulates the log's sizes on scaled copies of a topology.
type fitter struct {
	base    *topology.Topology
	tmpl    sweep // op, algo, dtype and root of every run
	plans   []*ops.Plan
	moved   []int64
	rows    []sample
	zeroLat bool // every link has latency 0: sα is then in µs
	round   bool // 4 significant digits, for the written topology
	evals   int
	err     error
}

func round4(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	return r
}

// scaled returns the base topology with latency ×sa and bandwidth ×sb.
func (f *fitter) scaled(sa, sb float64) (*topology.Topology, error) {
	links := slices.Clone(f.base.Links)
	for i := range links {
		l := &links[i]
		l.Latency, l.BW = l.Latency*sa, l.BW*sb
		if f.zeroLat {
			l.Latency = sa * 1e-6
		}
		if f.round {
			l.Latency, l.BW = round4(l.Latency), round4(l.BW)
		}
	}
	return topology.New(f.base.Name+"-calibrated", f.base.Nodes, links)
}

// times simulates every size at scales (sa, sb), in seconds, sharing the
// sizes among one cluster per core.
func (f *fitter) times(sa, sb float64) ([]float64, *topology.Topology, error) {
	t, err := f.scaled(sa, sb)
	if err != nil {
		return nil, nil, err
	}
	f.evals++
	out := make([]float64, len(f.plans))
	workers := min(runtime.GOMAXPROCS(0), (len(f.plans)+7)/8)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			c, err := sim.NewCluster(t, sim.Config{TimingOnly: true})
			if err != nil {
				errs[w] = err
				return
			}
			defer c.Close()
			exec, s := ops.NewExecutor(c.World()), f.tmpl
			s.topo = t
			for i := w; i < len(f.plans) && errs[w] == nil; i += workers {
				var res result
				res, errs[w] = s.runOnce(c.World(), exec, f.plans[i], false, f.moved[i])
				out[i] = res.timeUS * 1e-6
			}
		})
	}
	wg.Wait()
	return out, t, errors.Join(errs...)
}

// objective is the loss at scales (e^x0, e^x1), with a penalty outside the
// box where links stay valid.
func (f *fitter) objective(x []float64) float64 {
	hiA := logScaleLimit
	for _, l := range f.base.Links {
		hiA = min(hiA, math.Log(topology.MaxLatency/max(l.Latency, 1e-6)))
	}
	if out := max(x[0]-hiA, -logScaleLimit-x[0], math.Abs(x[1])-logScaleLimit); out > 0 {
		return 1e6 * (1 + out)
	}
	ts, _, err := f.times(math.Exp(x[0]), math.Exp(x[1]))
	if err != nil {
		f.err = cmp.Or(f.err, err)
		return 1e6
	}
	sum := 0.0
	for i, t := range ts {
		r := t/(f.rows[i].timeUS*1e-6) - 1
		sum += r * r
	}
	return sum
}

// start fits T = sα·A + B/sβ + G by linear least squares in relative error,
// with A (latency), B (bandwidth) and G (reduction) from three simulations.
// tooSlow reports a size where G alone exceeds the measured time.
func (f *fitter) start() (x []float64, tooSlow bool, err error) {
	var t [3][]float64
	for k, sc := range [3][2]float64{{1, 1}, {2, 1}, {1, 2}} {
		if t[k], _, err = f.times(sc[0], sc[1]); err != nil {
			return nil, false, err
		}
	}
	var aa, ab, bb, am, bm float64
	for i, r := range f.rows {
		m := r.timeUS * 1e-6
		A, B := (t[1][i]-t[0][i])/m, 2*(t[0][i]-t[2][i])/m
		g := max(t[0][i]/m-A-B, 0)
		tooSlow = tooSlow || g > 1
		aa, ab, bb, am, bm = aa+A*A, ab+A*B, bb+B*B, am+A*(1-g), bm+B*(1-g)
	}
	a, u := 1.0, 1.0 // sα and 1/sβ
	if det := aa*bb - ab*ab; det > 1e-12*aa*bb {
		a, u = (am*bb-ab*bm)/det, (aa*bm-ab*am)/det
	}
	const tiny = 1e-6
	if a <= tiny && bb > 0 {
		a, u = tiny, (bm-tiny*ab)/bb
	}
	if u <= tiny && aa > 0 {
		a, u = (am-tiny*ab)/aa, tiny
	}
	a, u = min(max(a, tiny), 1/tiny), min(max(u, tiny), 1/tiny)
	return []float64{math.Log(a), -math.Log(u)}, tooSlow, nil
}

// calReport is the fit, as JSON and for the table.
type calReport struct {
	Op           string    `json:"op"`
	Algo         string    `json:"algo"`
	Topology     string    `json:"topology"`
	Ranks        int       `json:"ranks"`
	Log          string    `json:"log"`
	LogFormat    string    `json:"log_format"`
	LatencyScale float64   `json:"latency_scale"`
	BWScale      float64   `json:"bandwidth_scale"`
	Links        []calLink `json:"links"`
	RMSRelError  float64   `json:"rms_rel_error"`
	MaxRelError  float64   `json:"max_rel_error"`
	Simulations  int       `json:"simulations"`
	Sizes        []calSize `json:"sizes"`
	Warnings     []string  `json:"warnings"`
	Out          string    `json:"out,omitempty"`
}

type calSize struct {
	Bytes       int64   `json:"bytes"`
	MeasuredUS  float64 `json:"measured_us"`
	FittedUS    float64 `json:"fitted_us"`
	RelError    float64 `json:"rel_error"`
	MeasuredBus float64 `json:"measured_busbw_gbps"`
	FittedBus   float64 `json:"fitted_busbw_gbps"`
}

// calLink is a class of links (same end kinds, bandwidth and latency).
type calLink struct {
	Class       string  `json:"class"`
	Links       int     `json:"links"`
	BW          float64 `json:"bw_gbps"` // nominal, as written
	Eff         float64 `json:"eff"`     // as written
	EffBW       float64 `json:"effective_bw_gbps"`
	LatUS       float64 `json:"lat_us"`
	BeforeEffBW float64 `json:"effective_bw_gbps_before"`
	BeforeLatUS float64 `json:"lat_us_before"`
	text        string
}

func (f *calFlags) run(stdout, stderr io.Writer, opSet bool) error {
	switch {
	case f.log == "":
		return usagef("calibrate needs --log FILE (nccl-tests output)")
	case f.topo == "":
		return usagef("calibrate needs --topo SPEC|FILE (the fabric the log was measured on)")
	case f.format != "table" && f.format != "json" && f.format != "csv":
		return usagef("unknown format %q (want table, csv or json)", f.format)
	case f.algo == "auto" || f.algo == "native":
		return usagef("calibrate needs a fixed algorithm, not %s (the log does not say which one NCCL ran); ring is the default", f.algo)
	}
	lo, err1 := parseBytes(f.minBytes)
	hi, err2 := parseBytes(f.maxBytes)
	if err := cmp.Or(err1, err2); err != nil {
		return usagef("--min-bytes/--max-bytes: %v", err)
	}
	fi, err := os.Stat(f.log)
	if err == nil && fi.Size() > maxLogBytes {
		err = fmt.Errorf("%s is %d bytes, over the limit of %d", f.log, fi.Size(), maxLogBytes)
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(f.log)
	}
	if err != nil {
		return usagef("--log: %v", err)
	}
	lg, err := parseLog(f.log, data)
	if err != nil {
		return err
	}
	if lg.op != "" && !opSet {
		f.op = lg.op
	}
	bf := benchFlags{topo: f.topo, op: f.op, algo: f.algo, dtype: "f32", redop: "sum", format: "table", backendFlags: backendFlags{backend: "sim"},
		minBytes: "8", maxBytes: "8", factor: 2, timingOnly: true}
	s, err := bf.parse()
	if err != nil {
		return err
	}
	p := s.topo.NumGPUs()
	if lg.op != "" && lg.op != s.op.String() {
		return usagef("--op %s, but %s measured %s", f.op, f.log, lg.op)
	}
	if lg.ranks > 0 && lg.ranks != p {
		return usagef("%s has %d ranks, but topology %s has %d GPUs", f.log, lg.ranks, f.topo, p)
	}
	if d, err := hw.ParseDType(lg.dtype); err == nil {
		s.dtype = d
	} else if d, ok := extraTypes[lg.dtype]; ok {
		s.dtype = d
	}
	ft := &fitter{base: s.topo, tmpl: *s, zeroLat: !slices.ContainsFunc(s.topo.Links, func(l topology.Link) bool { return l.Latency > 0 })}
	if spec, _ := ft.tmpl.spec(lg.rows[len(lg.rows)-1].bytes); spec.Validate() != nil {
		ft.tmpl.dtype = hw.F64 // over the element limit: the same bytes in wider elements
	}
	var warnings []string
	skipped := 0
	for _, r := range lg.rows {
		spec, moved := ft.tmpl.spec(r.bytes)
		if spec.Count == 0 || s.op == ops.Barrier {
			skipped++
		}
		if r.bytes < lo || r.bytes > hi || spec.Count == 0 || s.op == ops.Barrier {
			continue
		}
		plan, err := ops.Compile(spec)
		if err != nil {
			return usagef("%s:%d: %v", f.log, r.line, err)
		}
		ft.plans, ft.moved, ft.rows = append(ft.plans, plan), append(ft.moved, moved), append(ft.rows, r)
	}
	if skipped > 0 {
		warnings = append(warnings, fmt.Sprintf("skipped %d sizes that hold no element per rank", skipped))
	}
	if len(ft.rows) < 2 {
		return usagef("%s: %d usable sizes; the fit needs at least 2", f.log, len(ft.rows))
	}
	x0, tooSlow, err := ft.start()
	if err != nil {
		return err
	}
	res, err := optimize.Minimize(optimize.Problem{Func: ft.objective}, x0, &optimize.Settings{FuncEvaluations: 300,
		Converger: &optimize.FunctionConverge{Absolute: 1e-12, Relative: 1e-7, Iterations: 8}}, &optimize.NelderMead{SimplexSize: 0.05})
	if err = cmp.Or(ft.err, err); err != nil {
		return fmt.Errorf("calibrate: fit: %w", err)
	}
	sa, sb := math.Exp(res.X[0]), math.Exp(res.X[1])
	ft.round = true
	ts, fitted, err := ft.times(sa, sb)
	if err != nil {
		return err
	}
	rep := calReport{Op: s.op.String(), Algo: s.algo, Topology: f.topo, Ranks: p, Log: f.log, LogFormat: lg.format,
		LatencyScale: sa, BWScale: sb, Links: linkClasses(s.topo, fitted), Simulations: ft.evals}
	bus := busFactor(s.op, p)
	for i, r := range ft.rows {
		m := r.timeUS * 1e-6
		e := ts[i]/m - 1
		rep.Sizes = append(rep.Sizes, calSize{r.bytes, r.timeUS, ts[i] * 1e6, e,
			float64(r.bytes) / m / 1e9 * bus, float64(r.bytes) / ts[i] / 1e9 * bus})
		rep.RMSRelError += e * e / float64(len(ft.rows))
		rep.MaxRelError = max(rep.MaxRelError, math.Abs(e))
	}
	rep.RMSRelError = math.Sqrt(rep.RMSRelError)
	rep.Warnings = append(warnings, fitWarnings(rep.Sizes, sb, tooSlow)...)
	if f.out != "" {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "# calibrated by commsim calibrate from %s: %s %s on %s, latency ×%.4g, bandwidth ×%.4g, rms error %.2f%%\n",
			f.log, rep.Op, rep.Algo, f.topo, sa, sb, 100*rep.RMSRelError)
		if err := fitted.WriteYAML(&buf); err != nil {
			return err
		}
		if err := os.WriteFile(f.out, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		rep.Out = f.out
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "commsim: warning: %s\n", w)
	}
	if f.format == "json" {
		if rep.Warnings == nil {
			rep.Warnings = []string{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if f.format == "csv" {
		// One row per size; the fitted scales repeat on every row.
		rows := [][]string{{"bytes", "measured_us", "fitted_us", "rel_error", "measured_busbw_gbps", "fitted_busbw_gbps", "latency_scale", "bandwidth_scale"}}
		for _, z := range rep.Sizes {
			rows = append(rows, []string{strconv.FormatInt(z.Bytes, 10), fmtFloat(z.MeasuredUS), fmtFloat(z.FittedUS), fmtFloat(z.RelError),
				fmtFloat(z.MeasuredBus), fmtFloat(z.FittedBus), fmtFloat(rep.LatencyScale), fmtFloat(rep.BWScale)})
		}
		return writeCSVRows(stdout, rows)
	}
	return writeCalTable(stdout, &rep)
}

// linkClasses groups links by end kinds, bandwidth and latency, with their
// fitted values.
func linkClasses(base, fitted *topology.Topology) []calLink {
	var out []calLink
	idx := map[string]int{}
	for i, l := range base.Links {
		n := fitted.Links[i]
		kinds := []string{base.Nodes[l.A].Kind.String(), base.Nodes[l.B].Kind.String()}
		slices.Sort(kinds)
		class := strings.Join(kinds, "-")
		key := fmt.Sprint(class, l.BW, l.Latency)
		if j, ok := idx[key]; ok {
			out[j].Links++
			continue
		}
		idx[key] = len(out)
		out = append(out, calLink{Class: class, Links: 1, BW: n.BW / 1e9, Eff: 1, EffBW: n.BW / 1e9, LatUS: n.Latency * 1e6,
			BeforeEffBW: l.BW / 1e9, BeforeLatUS: l.Latency * 1e6,
			text: fmt.Sprintf("bw %s → %s, lat %s → %s", topology.FormatBandwidth(l.BW), topology.FormatBandwidth(n.BW),
				topology.FormatLatency(l.Latency), topology.FormatLatency(n.Latency))})
	}
	return out
}

// fitWarnings flags what the fitted model does not explain.
func fitWarnings(sz []calSize, sb float64, tooSlow bool) []string {
	var w, off []string
	for _, s := range sz {
		if math.Abs(s.RelError) > residualWarn {
			off = append(off, fmt.Sprintf("%s (%+.1f%%)", formatBytes(s.Bytes), 100*s.RelError))
		}
	}
	if n := len(off); n > 0 {
		if n > 6 {
			off = append(off[:6], fmt.Sprintf("and %d more", n-6))
		}
		w = append(w, fmt.Sprintf("the fit is off by more than %.0f%% at %d of %d sizes: %s", 100*residualWarn, n, len(sz), strings.Join(off, ", ")))
	}
	// A plateau: measured times flat over sizes where the fitted model,
	// latency included, already rises.
	for i := 0; i < len(sz); {
		j, lo, hi := i, sz[i].MeasuredUS, sz[i].MeasuredUS
		for j+1 < len(sz) && max(hi, sz[j+1].MeasuredUS) <= plateauFlat*min(lo, sz[j+1].MeasuredUS) {
			j++
			lo, hi = min(lo, sz[j].MeasuredUS), max(hi, sz[j].MeasuredUS)
		}
		rise := sz[j].FittedUS / sz[i].FittedUS
		if j > i+1 && sz[j].Bytes >= plateauSpan*max(sz[i].Bytes, 1) && rise > plateauFlat*sz[j].MeasuredUS/sz[i].MeasuredUS {
			w = append(w, fmt.Sprintf("latency plateau: measured times stay within %.1f–%.1f µs from %s to %s, but the fitted α-β model rises %.2f× over that range: a fixed per-call cost (launch, protocol) that link latency cannot express; -b %s fits the sizes above it",
				lo, hi, formatBytes(sz[i].Bytes), formatBytes(sz[j].Bytes), rise, formatBytes(sz[min(j+1, len(sz)-1)].Bytes)))
		}
		i = j + 1
	}
	if sb > 1.05 {
		w = append(w, fmt.Sprintf("fitted bandwidth is %.3g× the topology's: the log is faster than its links allow (check --topo)", sb))
	}
	if tooSlow {
		w = append(w, "the topology's GPU reduce bandwidth alone takes longer than some measured times (raise reduce= in --topo)")
	}
	return w
}

func writeCalTable(w io.Writer, r *calReport) error {
	fmt.Fprintf(w, "# commsim calibrate: %s, algorithm %s, on %s (%d ranks)\n", r.Op, r.Algo, r.Topology, r.Ranks)
	fmt.Fprintf(w, "# log: %s (%s), %d sizes, out-of-place times\n", r.Log, r.LogFormat, len(r.Sizes))
	fmt.Fprintf(w, "# fit: latency ×%.4g, bandwidth ×%.4g (Nelder-Mead on log scales; %d simulations of every size)\n",
		r.LatencyScale, r.BWScale, r.Simulations)
	for _, l := range r.Links {
		fmt.Fprintf(w, "#   %s (%d links): %s\n", l.Class, l.Links, l.text)
	}
	fmt.Fprintf(w, "# relative error: rms %.2f%%, max %.2f%%\n", 100*r.RMSRelError, 100*r.MaxRelError)
	fmt.Fprintf(w, "%12s %13s %13s %9s %14s %14s\n", "size(B)", "measured(us)", "fitted(us)", "error(%)", "busbw(GB/s)", "fit busbw")
	for _, s := range r.Sizes {
		fmt.Fprintf(w, "%12d %13.2f %13.2f %+9.2f %14.2f %14.2f\n", s.Bytes, s.MeasuredUS, s.FittedUS, 100*s.RelError, s.MeasuredBus, s.FittedBus)
	}
	if r.Out != "" {
		_, err := fmt.Fprintf(w, "# wrote the calibrated topology to %s (use --topo %s)\n", r.Out, r.Out)
		return err
	}
	_, err := fmt.Fprintf(w, "# add --out FILE to write the calibrated topology\n")
	return err
}
