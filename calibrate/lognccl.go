package calibrate

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

var (
	// NCCL's version line (NCCL_DEBUG=VERSION or INFO): "NCCL version
	// 2.21.5+cuda12.4"; and nccl-tests' header: "nccl-library=22105".
	versionRE = regexp.MustCompile(`\bNCCL version (\d+\.\d+(?:\.\d+)?)`)
	libraryRE = regexp.MustCompile(`\bnccl-library=(\d+)`)
	// NCCL_DEBUG=INFO's word on the environment it read: "NCCL_PROTO set
	// by environment to Simple", "NCCL_BUFFSIZE set by environment to
	// 8388608." (its integer parameters end in a full stop).
	envRE = regexp.MustCompile(`\b(NCCL_[A-Z0-9_]+) set by environment to (\S+)`)
)

// readNCCLLine takes from line, one of NCCL's own or a comment (line
// number of the log), the NCCL version, an environment variable or what it
// ran, as it states them.
//
// Each pattern runs only on a line holding its fixed words: a large job's
// NCCL_DEBUG=INFO lines are many, and the patterns ran at 6 MB/s.
func (l *Log) readNCCLLine(line string, number int) {
	if strings.Contains(line, " Bytes -> Algo ") {
		l.readRanLine(line, number)
	}
	if !strings.Contains(line, "NCCL version ") && !strings.Contains(line, "nccl-library=") && !strings.Contains(line, " set by environment to ") {
		return
	}
	if m := versionRE.FindStringSubmatch(line); m != nil {
		l.setVersion(m[1])
	}
	if m := libraryRE.FindStringSubmatch(line); m != nil {
		if code, err := strconv.Atoi(m[1]); err == nil && code > 0 {
			l.setVersion(versionOfCode(code))
		}
	}
	if m := envRE.FindStringSubmatch(line); m != nil {
		value := m[2]
		if v, ok := strings.CutSuffix(value, "."); ok && isInt(v) {
			value = v
		}
		l.setNCCLEnv(m[1], value)
	}
}

// setNCCLEnv records that NCCL read variable name as value; the first
// word on it stands (every rank says it), and another is a disagreement.
func (l *Log) setNCCLEnv(name, value string) {
	if l.NCCLEnv == nil {
		l.NCCLEnv = map[string]string{}
	}
	first, seen := l.NCCLEnv[name]
	if !seen {
		l.NCCLEnv[name] = value
	}
	l.disagree(name, first, value, seen)
}

// setVersion records the NCCL release a line names, as setNCCLEnv does
// a variable.
func (l *Log) setVersion(v string) {
	first, seen := l.NCCLVersion, l.NCCLVersion != ""
	if !seen {
		l.NCCLVersion = v
	}
	l.disagree("NCCL's release", first, v, seen)
}

// disagree notes, once each, a value of what after its first.
func (l *Log) disagree(what, first, value string, seen bool) {
	if !seen || value == first {
		return
	}
	if note := fmt.Sprintf("%s %s, then %s", what, first, value); !slices.Contains(l.Disagree, note) {
		l.Disagree = append(l.Disagree, note)
	}
}

// versionOfCode spells NCCL_VERSION_CODE: 22105 is 2.21.5 (from 2.9 on,
// major×10000 + minor×100 + patch; before, major×1000 + minor×100 +
// patch).
func versionOfCode(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// LogNCCL is the NCCL environment a log's own lines state (NCCL's
// version, and the variables NCCL_DEBUG=INFO says it read), as far as
// commsim follows it.
type LogNCCL struct {
	Options nccl.Options
	Env     map[string]string // the variables commsim follows (nccl.EnvVars), by name
	Ignored []string          // the others, as NAME=value, sorted
}

// NCCLOptions is what the log states of NCCL: its own lines, nccl-tests'
// header or JSON report. stated is false where the log states neither a
// version nor a variable commsim follows.
func (l *Log) NCCLOptions() (run LogNCCL, stated bool, err error) {
	for name, value := range l.NCCLEnv {
		if !slices.Contains(nccl.EnvVars, name) {
			run.Ignored = append(run.Ignored, name+"="+value)
			continue
		}
		if run.Env == nil {
			run.Env = map[string]string{}
		}
		run.Env[name] = value
	}
	slices.Sort(run.Ignored)
	if run.Options, err = nccl.FromEnv(run.Env); err != nil {
		return run, true, fmt.Errorf("the log's NCCL environment: %w", err)
	}
	if l.NCCLVersion != "" {
		if run.Options.Version, err = nccl.ParseVersion(l.NCCLVersion); err != nil {
			return run, true, fmt.Errorf("the log's NCCL %s: %w", l.NCCLVersion, err)
		}
	}
	return run, l.NCCLVersion != "" || len(run.Env) > 0, nil
}

// What NCCL says it ran, rank 0's word with NCCL_DEBUG=INFO and
// NCCL_DEBUG_SUBSYS=TUNING (src/enqueue.cc). From 2.24 it names them, once
// for each call: "AllReduce: 1048576 Bytes -> Algo RING proto LL128
// channel{Lo..Hi}={0..15}", the bytes of the call's count (per rank for
// all-gather and reduce-scatter). From 2.20 to 2.23 it numbers them, for
// the whole collective, with its model's time: "1048576 Bytes -> Algo 1
// proto 1 time 28.000000", and 2.23 names the collective before them
// ("AllGather: 37756928 Bytes -> Algo 1 proto 2 time 2860.208008").
var (
	ranNamedRE  = regexp.MustCompile(`\bNCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}`)
	ranNumberRE = regexp.MustCompile(`\bNCCL INFO (?:(\w+): )?(\d+) Bytes -> Algo (\d+) proto (\d+) time (\S*)`)
	// Either's start: a line that has it and neither's rest is one that
	// cannot be read.
	ranLikeRE     = regexp.MustCompile(`\bNCCL INFO (?:\w+: )?\d+ Bytes -> Algo `)
	ncclFuncNames = map[string]string{"AllReduce": "allreduce", "AllGather": "allgather", "ReduceScatter": "reducescatter",
		"Broadcast": "broadcast", "Reduce": "reduce"}
	// NCCL's numbers for its algorithms (NCCL_ALGO_TREE = 0, …, src/include/device.h).
	ncclAlgoNumbers = []string{"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}
)

// Ran is what NCCL ran for one size of a log, as its tuning lines say.
type Ran struct {
	Algo  nccl.Algo
	Proto ops.Protocol
	// Channels is the channels it ran on, 0 where its lines do not say
	// (before 2.24).
	Channels int
	// Varies says the size's lines disagree (out of place and in place,
	// say); Ran is the first.
	Varies bool
}

// String writes r as commsim labels NCCL's plans: ring/LL128/16ch, or
// ring/LL128 without a channel count.
func (r Ran) String() string {
	s := r.Algo.String() + "/" + r.Proto.String()
	if r.Channels > 0 {
		s += fmt.Sprintf("/%dch", r.Channels)
	}
	return s
}

// Tuner is a tuner like t that runs r for spec: r's algorithm and
// protocol, and r's channels where they differ from those NCCL would
// launch for spec itself, set as NCCL_MIN_NCHANNELS and
// NCCL_MAX_NCHANNELS (NCCL_NVLS_NCHANNELS for NVLS and NVLSTree) would
// set them; CollNet and PAT keep NCCL's own. An error says t's fabric
// cannot run r, or NCCL's options cannot say it.
func (r Ran) Tuner(t *nccl.Tuner, spec ops.Spec) (*nccl.Tuner, error) {
	o := t.Options
	o.Algos, o.Protos, o.OpAlgos, o.OpProtos = []nccl.Algo{r.Algo}, []ops.Protocol{r.Proto}, nil, nil
	forced, err := t.With(o)
	if err != nil || r.Channels == 0 {
		return forced, err
	}
	c, err := forced.Choose(spec)
	if err != nil || c.Channels == r.Channels {
		return forced, err
	}
	switch r.Algo {
	case nccl.Ring, nccl.Tree:
		o.Channels, o.MinChannels, o.MaxChannels = r.Channels, 0, 0
	case nccl.NVLS, nccl.NVLSTree:
		o.NVLSChannels = r.Channels
	default:
		return forced, nil
	}
	return t.With(o)
}

// ranLine is one of NCCL's tuning lines, its size as NCCL writes it.
type ranLine struct {
	op      string // commsim's name of the collective, "" where unnamed
	bytes   int64
	perRank bool // bytes are a rank's share of an all-gather or reduce-scatter
	ran     Ran
	timeUS  float64 // NCCL's model's time, where the line gives it (2.21-2.23)
}

// readRanLine takes from t, one of NCCL's lines (the log's line number
// line), what it says it ran, or notes why it cannot.
func (l *Log) readRanLine(t string, line int) {
	r, ok, why := parseRanLine(t)
	switch {
	case ok:
		l.ranLines = append(l.ranLines, r)
	case why != "":
		l.UnreadRan = append(l.UnreadRan, UnreadLine{Line: line, Reason: why})
	}
}

// UnreadLine is a line commsim recognised and could not read (line 1 is
// the log's first), and why.
type UnreadLine struct {
	Line   int
	Reason string
}

// DescribeUnread is a # comment line on a log's tuning lines that could
// not be read, naming the first (nil: "").
func DescribeUnread(unread []UnreadLine) string {
	if len(unread) == 0 {
		return ""
	}
	return fmt.Sprintf("# NCCL's tuning lines (Bytes -> Algo) that could not be read, left out: %d, the first at line %d: %s\n",
		len(unread), unread[0].Line, unread[0].Reason)
}

// parseRanLine reads t where it is one of NCCL's tuning lines of a size
// above 0 (ok). Where it is an INFO line of that kind that cannot be read
// (an algorithm, protocol or collective commsim does not know, a
// malformed field, a form NCCL 2.20-2.30 do not print), why says what;
// a line of another kind, or of a size of 0, gives neither.
func parseRanLine(t string) (r ranLine, ok bool, why string) {
	if m := ranNamedRE.FindStringSubmatch(t); m != nil {
		if r.bytes, _ = strconv.ParseInt(m[2], 10, 64); r.bytes <= 0 {
			return r, false, "" // a call of nothing says nothing
		}
		algo, errA := nccl.ParseAlgo(m[3])
		proto, errP := ops.ParseProtocol(m[4])
		lo, errL := strconv.Atoi(m[5])
		hi, errC := strconv.Atoi(m[6])
		op, known := ncclFuncNames[m[1]]
		switch {
		case errA != nil:
			return r, false, fmt.Sprintf("algorithm %q is none commsim models", m[3])
		case errP != nil:
			return r, false, fmt.Sprintf("protocol %q is none commsim models", m[4])
		case !known:
			return r, false, fmt.Sprintf("%s is no collective NCCL's tuner chooses for in commsim's model", m[1])
		// hi−lo+1 channels, held to an int32 so that it cannot overflow
		// (a line of channels 0..2^63−1 counted −2^63).
		case errL != nil || errC != nil || hi < lo || hi-lo >= math.MaxInt32:
			return r, false, fmt.Sprintf("channels {%s..%s} are no range of channels", m[5], m[6])
		}
		r = ranLine{op: op, bytes: r.bytes, perRank: op == "allgather" || op == "reducescatter", ran: Ran{Algo: algo, Proto: proto, Channels: hi - lo + 1}}
	} else if m := ranNumberRE.FindStringSubmatch(t); m != nil {
		if r.bytes, _ = strconv.ParseInt(m[2], 10, 64); r.bytes <= 0 {
			return r, false, ""
		}
		number, errA := strconv.Atoi(m[3])
		proto, errP := strconv.Atoi(m[4]) // NCCL_PROTO_LL = 0, LL128, Simple
		if errA != nil || number < 0 || number >= len(ncclAlgoNumbers) {
			return r, false, fmt.Sprintf("algorithm %s is none of NCCL's numbers 0-%d", m[3], len(ncclAlgoNumbers)-1)
		}
		if errP != nil || proto < 0 || proto > 2 {
			return r, false, fmt.Sprintf("protocol %s is none of NCCL's numbers 0-2", m[4])
		}
		algo, err := nccl.ParseAlgo(ncclAlgoNumbers[number])
		if err != nil {
			return r, false, fmt.Sprintf("algorithm %s (%s) is none commsim models", m[3], ncclAlgoNumbers[number])
		}
		if m[1] != "" {
			op, known := ncclFuncNames[m[1]]
			if !known {
				return r, false, fmt.Sprintf("%s is no collective NCCL's tuner chooses for in commsim's model", m[1])
			}
			r.op = op
		}
		r.ran = Ran{Algo: algo, Proto: ops.ProtoLL + ops.Protocol(proto)}
		if us, err := strconv.ParseFloat(m[5], 64); err == nil && us >= 0 && !math.IsInf(us, 0) {
			r.timeUS = us
		}
	} else {
		if strings.Contains(t, "NCCL INFO ") && ranLikeRE.MatchString(t) {
			return r, false, "not in either form NCCL 2.20-2.30 print"
		}
		return r, false, ""
	}
	return r, true, ""
}

// resolveRan sets NCCLRan from the tuning lines read, by the size in
// nccl-tests' meaning: a rank's share of an all-gather or reduce-scatter
// times the ranks (where the log names them), lines of another
// collective left out.
func (l *Log) resolveRan() {
	for _, r := range l.ranLines {
		if r.op != "" && l.Op != "" && r.op != l.Op {
			continue
		}
		size := r.bytes
		if r.perRank {
			if l.Ranks == 0 || size > math.MaxInt64/int64(l.Ranks) {
				continue
			}
			size *= int64(l.Ranks)
		}
		if l.NCCLRan == nil {
			l.NCCLRan = map[int64]Ran{}
		}
		first, seen := l.NCCLRan[size]
		switch {
		case !seen:
			l.NCCLRan[size] = r.ran
		case first.Algo != r.ran.Algo || first.Proto != r.ran.Proto || first.Channels != r.ran.Channels:
			first.Varies = true
			l.NCCLRan[size] = first
		}
	}
	l.ranLines = nil
}
