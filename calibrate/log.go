package calibrate

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// Sample is one size of a log.
type Sample struct {
	Bytes  int64
	TimeUS float64 // out of place, the mean of the log's rows of this size
	Line   int     // the line of its first row
	// Count is the row's count column (nccl-tests': a rank's elements
	// for all-gather, reduce-scatter, all-to-all and gather, the whole
	// buffer's for the others), 0 where the log gives none.
	Count int64
}

// row is one result row as a log states it: its sample, and what else
// the log's layout gives, zero where it gives none.
type row struct {
	Sample
	typ   string // the element type as written
	redop string // nccl-tests' redop column, lower case
	wrong int64  // the #wrong columns' sum (nccl-tests' count of wrong elements)
	// root is nccl-tests' root column (-1 for a collective without one)
	// where hasRoot says the row has one.
	root    int
	hasRoot bool
}

// Log is what an nccl-tests log says.
type Log struct {
	Format string // "nccl-tests table", "nccl-tests json", "csv" or "commsim json lines"
	// Op is commsim's name of the collective (allreduce, …), "" where the
	// log does not name it.
	Op string
	// Type is the element type as the log writes it (nccl-tests' float,
	// half, …, or commsim's f32, …), "" where it writes none.
	Type string
	// Ranks is the number of ranks, 0 where the log does not say.
	Ranks int
	// GPUsPerThread is how many GPUs each thread of the run drove
	// (nccl-tests' -g, the header's nGpus), 0 where the log does not say.
	// Past one, a thread launches each collective on its GPUs one after
	// another: host time that sets a floor under the measured time of
	// small sizes (nccl.ThreadFloorUS).
	GPUsPerThread int
	// Iters is how many runs nccl-tests launched back to back and timed
	// for each size (its -n, the header's iters; the JSON config's
	// iterations), 0 where the log does not say. See TimedRuns.
	Iters int
	// Samples are the sizes, smallest first.
	Samples []Sample
	// NCCLVersion is the NCCL release the log names ("2.21.5"): NCCL's
	// version line, or nccl-tests' nccl-library code; "" where it names
	// none. NCCLEnv is the environment NCCL says it read (NCCL_DEBUG=INFO's
	// "NCCL_PROTO set by environment to Simple"), by name. See NCCLOptions.
	// Where ranks' lines say otherwise, the first stands, and Disagree
	// says what the others said ("NCCL_PROTO Simple, then LL").
	NCCLVersion string
	Disagree    []string
	NCCLEnv     map[string]string
	// NCCLRan is what NCCL says it ran at each size (NCCL_DEBUG=INFO with
	// NCCL_DEBUG_SUBSYS=TUNING, NCCL 2.20 on), by the size in nccl-tests'
	// meaning; nil where the log does not say.
	NCCLRan  map[int64]Ran
	ranLines []ranLine
	// UnreadRan are the tuning lines that could not be read, in order
	// (DescribeUnread).
	UnreadRan []UnreadLine
	algoAt    map[int64]string // a CSV's or JSON records' algorithm at each size
	// Partial says the log is a JSON report that ends early, as a run
	// that died mid-sweep leaves it: its finished records are read.
	Partial bool
	// ShortLastRow is the line of a text table's last row where it has
	// fewer columns than the row before and nothing follows it: a log cut
	// short there. 0 where none is.
	ShortLastRow int
	// JSONLayout is a JSON report's layout version (its "version" key:
	// 1 to LatestJSONLayout are nccl-tests' to date), 0 where it has none.
	JSONLayout int
	// InPlaceOnly counts the sizes of a JSON report that has no
	// out-of-place result for them, whose in-place time is taken.
	InPlaceOnly int
	// Redop is the reduction the rows name (nccl-tests' redop column:
	// sum, …, or none for a collective that does not reduce), "" where
	// they name none.
	Redop string
	// Root is the rows' root column where HasRoot says they have one: a
	// rank for a rooted collective (broadcast, reduce, gather), -1 for
	// the others, as nccl-tests prints it.
	Root    int
	HasRoot bool
	// Repeated counts the sizes above 0 that several rows give (a rerun):
	// each such size's times are averaged.
	Repeated int
	// OtherRedops are the reductions of rows after the first one's
	// (nccl-tests' -o all), in order, and OtherRedopRows counts those rows,
	// left out: each size runs Redop.
	OtherRedops    []string
	OtherRedopRows int
	// WrongRows counts the rows whose #wrong column is above 0 (the run
	// found wrong elements in its results), and FirstWrong is the first
	// one's line: their times are read as they stand.
	WrongRows, FirstWrong int
	// counted is the first row with a count: every other row's size must
	// be as many bytes per counted element as its.
	counted row
	// stderrLines counts the lines left out as a rank's stderr.
	stderrLines int
	// Devices are the GPUs nccl-tests' "Using devices" lines name, by
	// rank (the last run's, where a log holds several), in the order the
	// log gives them; nil where it names none. A log may quote some
	// ranks' lines only.
	Devices []Device
}

// Device is a rank's GPU as nccl-tests names it: "#  Rank  3 Group  0
// Pid 1234 on node-1 device  3 [0000:5d:00] NVIDIA H100 80GB HBM3".
type Device struct {
	Rank int
	Host string
	GPU  int    // the process's CUDA device number
	Bus  string // its PCI address, as printed ("0000:5d:00", "0x1b")
	Name string // CUDA's name of the GPU
	Line int
}

// LogError is a log that cannot be read: the line at fault, why, and its
// text. Line is 0 when the log as a whole is at fault (it has no result
// rows).
type LogError struct {
	Name   string // the log's name, as given to ParseLog
	Line   int
	Reason string
	Text   string // the line, cut to 120 characters
}

// shortLine is a log line as an error quotes it: trimmed, and cut to
// 120 characters.
func shortLine(line string) string {
	text := strings.TrimSpace(line)
	if len(text) > 120 {
		text = text[:117] + "..."
	}
	return text
}

func (e *LogError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.Name, e.Reason)
	}
	if strings.Contains(e.Text, `"`) {
		// A JSON record reads better in backquotes than with every quote
		// escaped (%#q falls back to %q where backquotes cannot hold it).
		return fmt.Sprintf("%s:%d: %s: %#q", e.Name, e.Line, e.Reason, e.Text)
	}
	return fmt.Sprintf("%s:%d: %s: %q", e.Name, e.Line, e.Reason, e.Text)
}

var (
	testOps = map[string]string{"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
		"broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall", "gather": "gather", "sendrecv": "sendrecv"}
	rankRE = regexp.MustCompile(`^#\s*Rank\s+(\d+)\s`)
	// A rank's device line, nccl-tests' "Using devices" (Group in newer
	// releases): rank, host, device, its PCI address and name.
	deviceRE  = regexp.MustCompile(`^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s+(\S.*?)\s*$`)
	startRE   = regexp.MustCompile(`Collective test starting:\s*(\w+)_perf`)
	threadsRE = regexp.MustCompile(`\bnThread\s+\d+\s+nGpus\s+(\d+)\b`)
	itersRE   = regexp.MustCompile(`\bwarmup iters:\s*\d+\s+iters:\s*(\d+)\b(?:\s+agg iters:\s*(\d+)\b)?`)
	perfRE    = regexp.MustCompile(`^(\w+)_perf`) // a test's program name
	// NCCL's own lines: its debug output, and the version line
	// NCCL_DEBUG=VERSION prints.
	noiseRE = regexp.MustCompile(`\bNCCL (INFO|WARN|TRACE)\b|^NCCL version \S`)
	// One of NCCL's lines glued onto a row: nccl-tests prints a row's
	// size columns, then times the calls (NCCL's lines for them, with
	// NCCL_DEBUG=INFO, come between), then prints their times. NCCL's
	// prefix (src/debug.cc) is [time] host:pid:tid [device], the time
	// only on warnings, and file:line or a clock before NCCL WARN or
	// TRACE; a launcher's tag may come first. A host name glued to a
	// row, with no tag before it, starts with a letter: the row's last
	// digits stay the row's.
	gluedNCCLRE = func() *regexp.Regexp {
		launcher := `(?:\[\d+(?:,\d+)*\]<\w+>:|\[[^\]\s]*\]\s?)`
		date := `\[\d{4}-\d\d-\d\d[^\]]*\]\s?`
		host := `[\w.-]*:\d+:\d+ ` // after its first character
		return regexp.MustCompile(`(?:` +
			`(?:` + launcher + `(?:` + date + `)?|` + date + `)(?:\w` + host + `)?` + // tags, then any host
			`|[A-Za-z]` + host + // a host glued to the row
			`|(?:^|\s)\d` + host + // a host of digits first, after a space
			`)?\[\d+\] (?:\S+ ){0,3}NCCL (?:INFO|WARN|TRACE)\b`)
	}()
	dateRE = regexp.MustCompile(`^\d{4}-\d\d-\d\d$`)
	// CSV header names, lower case, and the column each stands for.
	csvNames = map[string]string{"size(b)": "size", "size": "size", "bytes": "size", "time(us)": "time", "time": "time",
		"time_us": "time", "cputime": "time", "op": "op", "ranks": "ranks", "type": "type", "dtype": "type",
		"gpus_per_thread": "gpus", "iters": "iters", "algo": "algo"}
	// Element sizes of nccl-tests type names hw.ParseDType does not know.
	extraTypes = map[string]hw.DType{"int8": hw.U8, "char": hw.U8, "f8e4m3": hw.U8, "f8e5m2": hw.U8, "uint32": hw.I32, "uint64": hw.I64}
)

// DType is a dtype of the size of the log's element type, which is what a
// size's element count depends on (uint32 is i32, f8e4m3 is u8); false
// when the log names no type or one of unknown size.
func (l *Log) DType() (hw.DType, bool) { return dtypeOf(l.Type) }

// ReduceOp is the reduction the log's rows ran: sum where they name none
// (nccl-tests' default, and its column for a collective that does not
// reduce); an error for one commsim does not model (nccl-tests' mulsum,
// NCCL's pre-multiplied sum, which NCCL runs on other algorithms than a
// sum: NVLS takes neither).
func (l *Log) ReduceOp() (hw.ReduceOp, error) {
	if l.Redop == "" || l.Redop == "none" {
		return hw.Sum, nil
	}
	o, err := hw.ParseReduceOp(l.Redop)
	if err != nil {
		return 0, fmt.Errorf("the log's redop %s is not one commsim models (sum, prod, min, max, avg)", l.Redop)
	}
	return o, nil
}

// defaultIters is nccl-tests' -n where a log does not state its own.
const defaultIters = 20

// itersTimes is the runs nccl-tests timed back to back for each size: -n
// (iters) times -m (agg iters: that many collectives a run, in a group),
// 0 where they do not read as counts above 0.
func itersTimes(iters, agg string) int {
	n, err := strconv.Atoi(iters)
	m, errAgg := strconv.Atoi(cmp.Or(agg, "1"))
	if err != nil || errAgg != nil || n < 1 || m < 1 || n > math.MaxInt32/m {
		return 0
	}
	return n * m
}

// RunsOverlap reports whether nccl-tests' back-to-back runs of op overlap
// on real machines, so that a prediction of their mean must simulate them.
// A rooted collective's do (broadcast, reduce, gather): the root starts
// its next run while the last still flows down the chain. A published
// H800 broadcast (8 GPUs, -n 100) measures 43-45 µs at 1-4 MiB, where a
// hundred runs back to back on dgx-h100 with the H800's NVLink predict
// 35-46 and one alone 93-277.
//
// The others' runs follow one another in the simulator, three of NCCL's
// plans back to back taking three times one within 3.4% (ring, tree, PAT,
// NVLS, NVLSTree, CollNet and all-to-all; 431 plans on 15 fabrics, 8 B to
// 16 MiB, most exactly), but for sendrecv across nodes, whose ranks fed
// over NVLink run ahead of those fed over the network: 15-32% faster back
// to back on dgx-h100x2 from 4 KiB to 1 MiB. The one published multi-node
// sendrecv with such sizes (2 × 8 B200, held out) does not show it: one
// run alone predicts its 32-512 KiB within 20%, twenty back to back
// 29-43% fast. Something each run pays across the network, which the
// model lacks, holds the runs apart there; a sendrecv log is predicted as
// one run alone. (commsim's own algorithms on uneven fabrics depart
// further: direct all-reduce on 2 × 8 GPUs 34% slower back to back,
// dbtree 5% faster.)
func RunsOverlap(op ops.Op) bool { return op.Rooted() }

// TimedRuns is how many runs of op a simulation times back to back
// (verify.Runner.Iters) to predict the log's times: the log's (its -n
// times -m; nccl-tests' default, 20, where the log does not say) where
// the runs overlap (RunsOverlap), else one, at a twentieth of the cost.
func (l *Log) TimedRuns(op ops.Op) int {
	if !RunsOverlap(op) {
		return 1
	}
	return cmp.Or(l.Iters, defaultIters)
}

// dtypeOf is a dtype of the size of nccl-tests' type name, or false.
func dtypeOf(name string) (hw.DType, bool) {
	if d, err := hw.ParseDType(name); err == nil {
		return d, true
	}
	d, ok := extraTypes[name]
	return d, ok
}

// redopNames are the reduction columns nccl-tests prints (its "none" for
// a collective that does not reduce); a row with another is no
// nccl-tests row.
var redopNames = []string{"sum", "prod", "max", "min", "avg", "mulsum", "premulsum", "none"}

func isNum(s string) bool { _, err := strconv.ParseFloat(s, 64); return err == nil }

func isInt(s string) bool { _, err := strconv.ParseInt(s, 10, 64); return err == nil }

// tableRow parses size count type [redop] [root] time algbw busbw … [date
// time]; hasRoot is 1 or 0 from the header, -1 without one (then the
// column count decides: nccl-tests prints 4 or 8 columns per half); the
// root column, where the row has one, is r's root.
func tableRow(f []string, hasRoot int) (r row, msg string) {
	if len(f) >= 2 && dateRE.MatchString(f[len(f)-2]) {
		f = f[:len(f)-2]
	}
	if len(f) < 6 || f[0][0] < '0' || f[0][0] > '9' || !isInt(f[1]) || isNum(f[2]) {
		return r, "want a result row (size count type [redop] [root] time algbw busbw …), a # comment, a date, a banner or a blank line"
	}
	k := afterRedop(f)
	if k == 4 {
		r.redop = strings.ToLower(f[3])
		if !slices.Contains(redopNames, r.redop) {
			return r, fmt.Sprintf("redop %q is none of nccl-tests' (%s)", f[3], strings.Join(redopNames, ", "))
		}
	}
	rooted := hasRoot == 1 || (hasRoot == -1 && (len(f)-k)%2 == 1)
	if rooted {
		k++
	}
	if len(f) < k+3 || !isNum(f[k+1]) || !isNum(f[k+2]) {
		return r, "want time, algbw and busbw after the size, count, type, redop and root columns"
	}
	// nccl-tests' algbw is bytes/time: where the columns taken do not
	// give it and those with the root column the other way do, the row
	// is read that way without a header, and refused against one.
	alt := k + 1 // the time one column on, past a root
	if rooted {
		alt = k - 1
	}
	if !algbwFits(f, k, false) && algbwFits(f, alt, true) {
		if hasRoot != -1 {
			return r, fmt.Sprintf("the header's columns do not fit this row: its time and algbw are columns %d and %d (algbw = bytes/time), where the header puts them at %d and %d", alt+1, alt+2, k+1, k+2)
		}
		k, rooted = alt, !rooted
	}
	if rooted {
		n, err := strconv.Atoi(f[k-1])
		if err != nil || n < -1 {
			return r, fmt.Sprintf("root %q is no rank (nccl-tests prints -1 where there is none)", f[k-1])
		}
		r.root, r.hasRoot = n, true
	}
	r.Sample, msg = sizeTime(f[0], f[k])
	r.Count, _ = strconv.ParseInt(f[1], 10, 64)
	r.typ = f[2]
	// #wrong follows each half's busbw: a count, or N/A unchecked (older
	// nccl-tests print an error instead, a float). The halves are alike,
	// per-iteration columns (i_min … i_cv%) and all.
	half := (len(f) - k) / 2
	for _, w := range []int{k + 3, k + half + 3} {
		if w < len(f) && (w == k+3 || half >= 4) {
			if n, err := strconv.ParseInt(f[w], 10, 64); err == nil && n > 0 {
				r.wrong += n
			}
		}
	}
	return r, msg
}

// knownTests are the nccl-tests programs of testOps, sorted.
func knownTests() string {
	names := make([]string, 0, len(testOps))
	for k := range testOps {
		names = append(names, k+"_perf")
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// wholeRow reports whether a row's fields hold both its out-of-place and
// its in-place times (time, algbw and busbw of each, after size, count,
// type, redop and root): nccl-tests prints the in-place ones after the
// NCCL lines of the in-place calls, so a row that NCCL's lines cut is not
// whole before them.
func wholeRow(f []string, hasRoot int) bool {
	if len(f) < 4 {
		return false
	}
	k := afterRedop(f)
	if hasRoot == 1 {
		k++
	}
	return len(f) >= k+7
}

// afterRedop is the column after a row's size, count, type and redop
// (f holds at least four): older nccl-tests leave the redop out for
// gathers, so a number there is no redop.
func afterRedop(f []string) int {
	if !isNum(f[3]) {
		return 4
	}
	return 3
}

// algbwFits reports whether columns k and k+1 of a row are a time and
// the algbw nccl-tests prints for it: bytes/time in GB/s to two
// decimals, the time to three or four figures. A time of 0 (nccl-tests'
// for a size of 0), or one that is no number, fits unless strict.
func algbwFits(f []string, k int, strict bool) bool {
	if k < 3 || k+2 >= len(f) {
		return false
	}
	bytes, errB := strconv.ParseInt(f[0], 10, 64)
	time, errT := strconv.ParseFloat(f[k], 64)
	algbw, errA := strconv.ParseFloat(f[k+1], 64)
	if errB != nil || errT != nil || errA != nil || !(time > 0) || math.IsInf(time, 0) {
		return !strict
	}
	want := float64(bytes) / time / 1e3
	return math.Abs(want-algbw) <= 0.006+0.01*max(want, algbw)
}

// add takes r, a row on line, or says why not: a size or a time out of
// range, a type after another, or a row that belongs to another
// collective than the rows before it (its count or redop says so).
func (lg *Log) add(r row, line int) string {
	d, known := dtypeOf(r.typ)
	switch {
	case !r.Valid():
		return "want a size >= 0 and a time from 1e-6 µs to 9.2e12 µs, the simulator's 1 ps to its horizon of 106 days (or 0 for size 0)"
	case r.typ != "" && lg.Type != "" && r.typ != lg.Type:
		return fmt.Sprintf("type %s after %s: calibrate one type per log", r.typ, lg.Type)
	case known && r.Bytes%int64(d.Size()) != 0:
		return fmt.Sprintf("size %d bytes is not a whole number of %s elements (%d bytes each)", r.Bytes, r.typ, d.Size())
	}
	if msg := lg.sameRun(r); msg != "" {
		return msg
	}
	if r.redop != "" && lg.Redop != "" && r.redop != lg.Redop {
		// nccl-tests' -o all prints each reduction in turn, and NCCL may
		// run them on other algorithms (NVLS reduces no product): the
		// first one's rows are read.
		lg.OtherRedopRows++
		if !slices.Contains(lg.OtherRedops, r.redop) {
			lg.OtherRedops = append(lg.OtherRedops, r.redop)
		}
		return ""
	}
	r.Line, lg.Type, lg.Redop = line, cmp.Or(lg.Type, r.typ), cmp.Or(lg.Redop, r.redop)
	if r.hasRoot && !lg.HasRoot {
		lg.Root, lg.HasRoot = r.root, true
	}
	if r.Count > 0 && r.Bytes > 0 && lg.counted.Count == 0 {
		lg.counted = r
	}
	if r.wrong > 0 {
		lg.WrongRows++
		lg.FirstWrong = cmp.Or(lg.FirstWrong, line)
	}
	lg.Samples = append(lg.Samples, r.Sample)
	return ""
}

// sameRun says why r cannot be a row of the collective the log's rows
// so far measured, or "": nccl-tests' count is a whole number of
// elements, a rank's or the buffer's by collective, so one run's rows
// all have as many bytes per counted element; and a collective either
// reduces or prints none in every row. A log that joins two runs
// without their headers (an all-reduce's and an all-gather's, say)
// would otherwise average their times size by size. Likewise a rooted
// collective prints a rank as its root in every row, the others -1.
func (lg *Log) sameRun(r row) string {
	first := lg.counted
	switch {
	case r.Count > 0 && r.Bytes > 0 && r.Bytes%r.Count != 0:
		return fmt.Sprintf("size %d bytes is not a whole number of its count's %d elements", r.Bytes, r.Count)
	case r.Count > 0 && r.Bytes > 0 && first.Count > 0 && r.Bytes/r.Count != first.Bytes/first.Count:
		return fmt.Sprintf("%d bytes a counted element (size/count), where line %d's row has %d: a row of another collective, type or rank count (give one run per log)",
			r.Bytes/r.Count, first.Line, first.Bytes/first.Count)
	case r.redop != "" && lg.Redop != "" && (r.redop == "none") != (lg.Redop == "none"):
		return fmt.Sprintf("redop %s after rows of redop %s: a row of another collective (give one run per log)", r.redop, lg.Redop)
	case r.hasRoot && lg.HasRoot && (r.root >= 0) != (lg.Root >= 0):
		return fmt.Sprintf("root %d after rows of root %d: a row of another collective (give one run per log)", r.root, lg.Root)
	}
	return ""
}

// The times a row may state: what the simulator can tell apart (1 ps)
// and reach (2^63−1 ps, 106 days). Outside them an error is infinite or
// meaningless (a time of 1e-300 µs made every relative error overflow).
const (
	minTimeUS = 1e-6
	maxTimeUS = float64(math.MaxInt64) / 1e6
)

// Valid reports whether s is a size and a time the simulator can tell
// apart and reach, or 0 for a size of 0 bytes (commsim's reports time an
// empty call as nothing; fidelity and calibrate leave such sizes out):
// what ParseLog keeps, and fidelity checks a Log made by hand for.
func (s Sample) Valid() bool {
	return s.Bytes >= 0 && (s.TimeUS >= minTimeUS && s.TimeUS <= maxTimeUS || s.Bytes == 0 && s.TimeUS == 0)
}

func sizeTime(size, time string) (s Sample, msg string) {
	var err error
	if s.Bytes, err = strconv.ParseInt(size, 10, 64); err != nil {
		return s, fmt.Sprintf("size %q is not a byte count", size)
	}
	if s.TimeUS, err = strconv.ParseFloat(time, 64); err != nil {
		return s, fmt.Sprintf("time %q is not a number", time)
	}
	return s, ""
}

// csvRow parses a CSV record by the header's columns.
func (l *Log) csvRow(rec []string, cols map[string]int) (r row, msg string) {
	get := func(c string) string {
		if j, ok := cols[c]; ok {
			return strings.TrimSpace(rec[j])
		}
		return ""
	}
	r.Sample, msg = sizeTime(get("size"), get("time"))
	r.typ = get("type")
	if algo := get("algo"); algo != "" && msg == "" {
		// commsim bench's rows name one algorithm a size; compare's name
		// several, which averaged as reruns would be no run at all.
		if l.algoAt == nil {
			l.algoAt = map[int64]string{}
		}
		if first, seen := l.algoAt[r.Bytes]; seen && first != algo {
			return r, fmt.Sprintf("%d bytes by %s after %s (commsim compare's rows?): give one algorithm's rows", r.Bytes, algo, first)
		}
		l.algoAt[r.Bytes] = algo
	}
	if n, err := strconv.Atoi(get("ranks")); err == nil {
		if l.Ranks != 0 && n != l.Ranks {
			return r, fmt.Sprintf("%d ranks after %d: give one run per log", n, l.Ranks)
		}
		l.Ranks = n
	}
	if n, err := strconv.Atoi(get("iters")); err == nil && n > 0 {
		if l.Iters != 0 && n != l.Iters {
			return r, fmt.Sprintf("%d runs a size after %d: give one run per log", n, l.Iters)
		}
		l.Iters = n // commsim bench's CSV: its -n
	}
	if n, err := strconv.Atoi(get("gpus")); err == nil && n > 0 {
		l.GPUsPerThread = n // commsim bench's CSV: its -g
	}
	if op := get("op"); op != "" {
		if o, ok := testOps[strings.ToLower(op)]; ok {
			op = o // nccl-tests' all_reduce
		} else if o, err := ops.ParseOp(op); err == nil {
			op = o.String() // AllReduce
		}
		if l.Op != "" && op != l.Op {
			return r, fmt.Sprintf("a second collective, %s after %s: give one collective per log", op, l.Op)
		}
		l.Op = op
	}
	return r, msg
}

// ParseLog reads nccl-tests output: its text table, in the layouts of old
// and new versions (with or without the root and redop columns, with
// per-iteration columns or timestamps), among NCCL INFO lines and comments;
// nccl-tests' JSON report (-J FILE), recognised by its opening brace; or a
// CSV with a header naming size and time columns (commsim bench's CSV,
// say), recognised by its header in the first data line; or commsim
// bench's JSON records, one a line (--format json), read as its CSV is,
// recognised by the first line's bytes and time_us. Repeated sizes
// are averaged (Log.Repeated counts them). Rows must be of one run: one
// type, one collective (a count and a redop of another refuse the row,
// as a second "Collective test starting" does). name is the log's name
// for errors, which are *LogError.
//
// Logs are read as clusters print them: each line may carry rank or host
// tags ("0: ", "[1,0]<stdout>:", "[0] ", "gpu01: ") and time stamps
// ("2024-05-01 12:00:00 ", "2024-05-01T12:00:00.123Z "), and dates
// (date(1)'s "Wed May  1 12:00:00 UTC 2024", or a stamp alone) and banners
// (a rule such as "=====" or "*** all_reduce ***", a shell's "+ command")
// may stand between the rows. nccl-tests' own comment lines are read
// with or without their '#', which pages quoting a run often drop. Any
// other line that is not a row or a comment is an error naming it, as is
// a row that cannot be read.
func ParseLog(name string, data []byte) (*Log, error) {
	lg := &Log{}
	var err error
	// An editor's UTF-8 byte-order mark is no part of the first line.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	switch {
	case isJSONLines(data):
		err = parseJSONLines(name, data, lg)
	case isJSON(data):
		err = parseJSONLog(name, data, lg)
	default:
		err = parseTextLog(name, data, lg)
	}
	if err != nil {
		return nil, err
	}
	if len(lg.Samples) == 0 {
		reason := "no result rows (want nccl-tests output, its JSON report, a CSV with size and time columns or commsim bench's JSON records)"
		if lg.stderrLines > 0 {
			reason += fmt.Sprintf("; left out as a rank's stderr ([1,0]<stderr>:), where nccl-tests prints its table on stdout: %d lines", lg.stderrLines)
		}
		return nil, &LogError{Name: name, Reason: reason}
	}
	lg.averageRepeats()
	return lg, nil
}

// parseTextLog reads nccl-tests' text output or a CSV into lg.
func parseTextLog(name string, data []byte, lg *Log) error {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	hasRoot := -1
	started := 0            // the line that named the log's collective
	var cols map[string]int // the CSV header's columns
	width := 0              // and its number of fields
	// A row that NCCL's lines cut into pieces: its text so far and its
	// first line.
	piece, pieceLine := "", 0
	var widths []rowWidth   // the table rows' widths, in order (ShortLastRow)
	lastText := -1          // the last line with text, rank tags and stderr left out
	runRanks := 0           // the ranks of the log's first run, once a second starts
	var runDevices []Device // and its devices
	for i, l := range lines {
		u, stderr := untagged(l)
		if stderr {
			lg.stderrLines++
		}
		t, rowLine := commented(u), i
		if !stderr && strings.TrimSpace(t) != "" {
			lastText = i
		}
		if at := gluedNCCLRE.FindStringIndex(t); at != nil && at[0] > 0 {
			if head := strings.TrimSpace(t[:at[0]]); head != "" && head[0] >= '0' && head[0] <= '9' {
				if piece == "" {
					pieceLine = i
				}
				piece += " " + head
			}
			t = t[at[0]:]
			if piece != "" && wholeRow(strings.Fields(piece), hasRoot) {
				// A row whole before NCCL's line: it stands alone, and
				// the next line is not its rest.
				lg.readNCCLLine(t, i+1)
				t, rowLine, piece = strings.TrimSpace(piece), pieceLine, ""
			}
		}
		noise := strings.Contains(t, "NCCL ") && noiseRE.MatchString(t)
		if noise || strings.HasPrefix(t, "#") {
			lg.readNCCLLine(t, i+1)
		}
		if t == "" || noise || decoration(t) {
			continue
		}
		if piece != "" {
			if t[0] == '#' {
				return &LogError{Name: name, Line: pieceLine + 1, Text: shortLine(lines[pieceLine]),
					Reason: fmt.Sprintf("a row cut off (a comment at line %d before its times)", i+1)}
			}
			t, piece, rowLine = piece+" "+t, "", pieceLine
		}
		if t[0] == '#' {
			if m := startRE.FindStringSubmatch(t); m != nil {
				op, known := testOps[m[1]]
				switch {
				case !known:
					return &LogError{Name: name, Line: i + 1, Text: shortLine(lines[i]),
						Reason: fmt.Sprintf("%s_perf is no collective commsim models (it models nccl-tests' %s)", m[1], knownTests())}
				case lg.Op != "" && op != lg.Op:
					return &LogError{Name: name, Line: i + 1, Text: shortLine(lines[i]),
						Reason: fmt.Sprintf("a second collective, %s after %s (line %d): give one collective per log", op, lg.Op, started)}
				}
				if started > 0 {
					runRanks, lg.Ranks = lg.Ranks, 0 // a second run of it: its ranks are counted anew
					runDevices, lg.Devices = lg.Devices, nil
				}
				lg.Op, started = op, i+1
			}
			if m := threadsRE.FindStringSubmatch(t); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil {
					lg.GPUsPerThread = n
				}
			}
			if m := itersRE.FindStringSubmatch(t); m != nil {
				lg.Iters = itersTimes(m[1], m[2])
			}
			if m := rankRE.FindStringSubmatch(t); m != nil {
				// The highest rank counts them: a log may quote only
				// the last rank's line.
				r, err := strconv.Atoi(m[1])
				if err == nil && r < math.MaxInt32 {
					lg.Ranks = max(lg.Ranks, r+1)
				}
				if d := deviceRE.FindStringSubmatch(t); d != nil && err == nil && r < math.MaxInt32 {
					if gpu, err := strconv.Atoi(d[3]); err == nil {
						lg.Devices = append(lg.Devices, Device{Rank: r, Host: d[2], GPU: gpu, Bus: d[4], Name: d[5], Line: i + 1})
					}
				}
			}
			if f := strings.Fields(strings.TrimPrefix(t, "#")); len(f) > 1 && f[0] == "size" && f[1] == "count" {
				hasRoot = 0
				if slices.Contains(f, "root") {
					hasRoot = 1
				}
			}
			continue
		}
		if runRanks != 0 && lg.Ranks != 0 && lg.Ranks != runRanks {
			return &LogError{Name: name, Line: rowLine + 1, Text: shortLine(lines[rowLine]),
				Reason: fmt.Sprintf("a second run of %s on %d ranks after one on %d: give one run per log", lg.Op, lg.Ranks, runRanks)}
		}
		if lg.Format == "" {
			lg.Format = map[bool]string{true: "csv", false: "nccl-tests table"}[isCSVHeader(t)]
		}
		var r row
		var msg string
		if lg.Format == "csv" {
			rec, err := csv.NewReader(strings.NewReader(t)).Read()
			switch {
			case err != nil:
				msg = fmt.Sprintf("not CSV (%v)", err)
			case cols == nil:
				if a, b, twice := repeatedColumn(rec); twice {
					msg = fmt.Sprintf("CSV header names %q twice (fields %d and %d): keep one", rec[a], a+1, b+1)
					break
				}
				cols, width = csvColumns(rec), len(rec)
				_, commsims := cols["gpus"]
				if _, iters := cols["iters"]; commsims && !iters {
					lg.Iters = 1 // commsim's CSV before it had the column: one run a size
				}
				if _, ok := cols["time"]; !ok {
					msg = "CSV header has no time column (time(us), time or time_us)"
				} else {
					continue
				}
			case len(rec) != width:
				msg = fmt.Sprintf("%d fields, the header has %d", len(rec), width)
			default:
				r, msg = lg.csvRow(rec, cols)
			}
		} else {
			fields := strings.Fields(t)
			r, msg = tableRow(fields, hasRoot)
			if msg == "" && lg.Ranks > 0 && r.hasRoot && r.root >= lg.Ranks {
				msg = fmt.Sprintf("root %d is no rank of the log's %d", r.root, lg.Ranks)
			}
			widths = append(widths, rowWidth{rowLine + 1, len(fields)})
		}
		if msg == "" {
			msg = lg.add(r, rowLine+1)
		}
		if msg != "" {
			if lg.Format != "csv" && len(lg.Samples) == 0 && strings.Contains(t, ",") {
				msg += "; a CSV's header names its size (size(B), size or bytes) and time (time(us), time or time_us) columns"
			}
			return &LogError{Name: name, Line: rowLine + 1, Reason: msg, Text: shortLine(lines[rowLine])}
		}
	}
	if piece != "" {
		return &LogError{Name: name, Line: pieceLine + 1, Text: shortLine(lines[pieceLine]), Reason: "a row cut off by the end of the log"}
	}
	// A table whose last row is narrower than the one before it, and
	// ends the log, was cut short (a run that died, a copy cut): its
	// out-of-place time may stand, but the user should hear of it.
	if n := len(widths); n > 1 && widths[n-1].fields < widths[n-2].fields && widths[n-1].line == lastText+1 {
		lg.ShortLastRow = widths[n-1].line
	}
	lg.Ranks = cmp.Or(lg.Ranks, runRanks) // a later run that quotes no rank lines ran on the first's
	if lg.Devices == nil {
		lg.Devices = runDevices
	}
	lg.resolveRan()
	return nil
}

// isCSVHeader reports whether t is the header of a CSV with a size
// column: a log whose first line that is not a comment is, is a CSV.
// Any other line with a comma (a job script's "Running on 8 GPUs, 1
// node") leaves the log a text one, whose rows it checks.
func isCSVHeader(t string) bool {
	if !strings.Contains(t, ",") {
		return false
	}
	rec, err := csv.NewReader(strings.NewReader(t)).Read()
	if err != nil {
		return false
	}
	_, ok := csvColumns(rec)["size"]
	return ok
}

// repeatedColumn finds two fields of a CSV header that name the same
// column commsim reads, by the same name: which of them holds the data is
// not known.
func repeatedColumn(header []string) (a, b int, twice bool) {
	first := map[string]int{}
	for j, h := range header {
		name := strings.ToLower(strings.TrimSpace(h))
		if _, read := csvNames[name]; !read {
			continue
		}
		if i, seen := first[name]; seen {
			return i, j, true
		}
		first[name] = j
	}
	return 0, 0, false
}

// csvColumns maps the columns a CSV header names (csvNames) to their
// fields, the first of each.
func csvColumns(header []string) map[string]int {
	cols := map[string]int{}
	for j, h := range header {
		c, ok := csvNames[strings.ToLower(strings.TrimSpace(h))]
		if _, seen := cols[c]; ok && !seen {
			cols[c] = j
		}
	}
	return cols
}

// averageRepeats sorts the samples by size and averages the times of
// each size's rows.
func (lg *Log) averageRepeats() {
	slices.SortStableFunc(lg.Samples, func(a, b Sample) int { return cmp.Compare(a.Bytes, b.Bytes) })
	var rows []Sample
	for i := 0; i < len(lg.Samples); {
		j, sum := i, 0.0
		for ; j < len(lg.Samples) && lg.Samples[j].Bytes == lg.Samples[i].Bytes; j++ {
			sum += lg.Samples[j].TimeUS
		}
		r := lg.Samples[i]
		r.TimeUS = sum / float64(j-i)
		if j-i > 1 && r.Bytes > 0 {
			lg.Repeated++ // nccl-tests prints every size that holds no element a rank as 0
		}
		if math.IsInf(sum, 0) { // times near the float limit: a mean that cannot overflow
			r.TimeUS = 0
			for k := i; k < j; k++ {
				r.TimeUS += lg.Samples[k].TimeUS / float64(j-i)
			}
		}
		rows, i = append(rows, r), j
	}
	lg.Samples = rows
}

// rowWidth is a table row's line (from 1) and its number of fields.
type rowWidth struct{ line, fields int }
