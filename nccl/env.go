package nccl

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/commsim/commsim/ops"
)

// EnvVars are the NCCL environment variables FromEnv reads: those whose
// effect on what NCCL runs commsim reproduces.
var EnvVars = []string{
	"NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
	"NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_NTHREADS", "NCCL_LL128_NTHREADS",
	"NCCL_NCHANNELS_PER_NET_PEER", "NCCL_P2P_PER_CHANNEL_NET_BW", "NCCL_MIN_P2P_NCHANNELS", "NCCL_MAX_P2P_NCHANNELS",
	"NCCL_P2P_NET_CHUNKSIZE", "NCCL_P2P_NVL_CHUNKSIZE", "NCCL_P2P_PCI_CHUNKSIZE", "NCCL_P2P_LL_THRESHOLD",
	"NCCL_NVLS_ENABLE", "NCCL_NVLS_NCHANNELS", "NCCL_NVLS_CHUNKSIZE", "NCCL_NVLSTREE_MAX_CHUNKSIZE",
	"NCCL_COLLNET_ENABLE", "NCCL_COLLNET_NODE_THRESHOLD", "NCCL_PAT_ENABLE",
}

// number is a variable that sets one number of Options (its field) and
// the values NCCL runs with: lo to hi, a multiple of step; and, where 0
// means something other than NCCL's default, the field 0 sets.
type number struct {
	name         string
	count        *int
	bytes        *int64
	lo, hi, step int64
	unit         string
	zero         *bool
}

// numbers are the variables that set o's numbers.
func (o *Options) numbers() []number {
	channels := func(name string, field *int) number {
		return number{name: name, count: field, lo: 1, hi: maxChannels, step: 1, unit: "channels"}
	}
	chunk := func(name string, field *int64) number {
		return number{name: name, bytes: field, lo: minP2PChunk, hi: MaxBuffSize / ncclSteps, step: 1, unit: "bytes"}
	}
	return []number{
		{name: "NCCL_BUFFSIZE", bytes: &o.BuffSize, lo: MinBuffSize, hi: MaxBuffSize, step: 1, unit: "bytes"},
		channels("NCCL_MIN_NCHANNELS", &o.MinChannels), channels("NCCL_MAX_NCHANNELS", &o.MaxChannels),
		channels("NCCL_MIN_CTAS", &o.MinCTAs), channels("NCCL_MAX_CTAS", &o.MaxCTAs),
		// tuning.cc, getNthreads: a multiple of a warp, up to the
		// protocol's most.
		{name: "NCCL_NTHREADS", count: &o.Threads, lo: 64, hi: 512, step: 32, unit: "threads"},
		{name: "NCCL_LL128_NTHREADS", count: &o.LL128Threads, lo: 160, hi: 640, step: 32, unit: "threads"},
		channels("NCCL_NCHANNELS_PER_NET_PEER", &o.NetPeerChannels),
		// paths.cc divides the NICs' GB/s by it, as an integer.
		{name: "NCCL_P2P_PER_CHANNEL_NET_BW", count: &o.P2PNetChannelGBps, lo: 1, hi: 10000, step: 1, unit: "GB/s"},
		channels("NCCL_MIN_P2P_NCHANNELS", &o.MinP2PChannels), channels("NCCL_MAX_P2P_NCHANNELS", &o.MaxP2PChannels),
		chunk("NCCL_P2P_NET_CHUNKSIZE", &o.P2PNetChunk), chunk("NCCL_P2P_NVL_CHUNKSIZE", &o.P2PNVLChunk),
		chunk("NCCL_P2P_PCI_CHUNKSIZE", &o.P2PPCIChunk),
		// enqueue.cc: LL while bytes <= channels x threshold; 0 never.
		{name: "NCCL_P2P_LL_THRESHOLD", bytes: &o.P2PLLThreshold, lo: 1, hi: MaxBuffSize, step: 1, unit: "bytes, or 0", zero: &o.NoP2PLL},
		channels("NCCL_NVLS_NCHANNELS", &o.NVLSChannels),
		chunk("NCCL_NVLS_CHUNKSIZE", &o.NVLSChunk), chunk("NCCL_NVLSTREE_MAX_CHUNKSIZE", &o.NVLSTreeMaxChunk),
		{name: "NCCL_COLLNET_NODE_THRESHOLD", count: &o.CollNetNodes, lo: 1, hi: math.MaxInt32, step: 1, unit: "nodes"},
	}
}

func (n number) get() int64 {
	if n.count != nil {
		return int64(*n.count)
	}
	return *n.bytes
}

func (n number) set(v int64) {
	if n.count != nil {
		*n.count = int(v)
	} else {
		*n.bytes = v
	}
}

func (n number) allows(v int64) bool { return v >= n.lo && v <= n.hi && v%n.step == 0 }

func (n number) want() string {
	if n.step > 1 {
		return fmt.Sprintf("a multiple of %d from %d to %d %s", n.step, n.lo, n.hi, n.unit)
	}
	return fmt.Sprintf("%d to %d %s", n.lo, n.hi, n.unit)
}

// toggle is a variable that turns an algorithm off with "0", the values
// that leave it on, and the fields it sets: off, and force where "1"
// turns it on beyond NCCL's default (nil where "1" is the default's
// behaviour).
type toggle struct {
	name       string
	off, force *bool
	on         []string
}

// toggles are the variables that turn o's algorithms off (or on).
func (o *Options) toggles() []toggle {
	return []toggle{
		{"NCCL_NVLS_ENABLE", &o.NoNVLS, nil, []string{"1", "2"}},
		{"NCCL_COLLNET_ENABLE", &o.NoCollNet, nil, []string{"1"}},
		{"NCCL_PAT_ENABLE", &o.NoPAT, &o.ForcePAT, []string{"1", "2"}},
	}
}

// FromEnv reads the options an NCCL run's environment sets, as NCCL reads
// it: NCCL_ALGO and NCCL_PROTO as lists, or as lists to leave out after
// a "^" ("^LL128" allows LL and Simple), then per collective (see
// ParseAlgos); the others as numbers (bytes, channels, threads or nodes:
// decimal, or hexadecimal after 0x) or, the *_ENABLE ones, as 0 to turn
// an algorithm off (1, and 2 where NCCL's default is 2, leave it on;
// NCCL_PAT_ENABLE=1 also runs PAT with several GPUs a node).
// Any other variable is refused, so that a setting commsim would ignore
// is not taken for one it follows.
func FromEnv(env map[string]string) (Options, error) {
	var o Options
	for _, name := range slices.Sorted(maps.Keys(env)) { // the first unknown by name, whatever the map's order
		if !slices.Contains(EnvVars, name) {
			return o, fmt.Errorf("nccl: %s: not reproduced (commsim reads %s)", name, strings.Join(EnvVars, ", "))
		}
	}
	var err error
	if v, ok := env["NCCL_ALGO"]; ok {
		if o.Algos, o.OpAlgos, err = ParseAlgos(v); err != nil {
			return o, fmt.Errorf("nccl: NCCL_ALGO=%s: %w", shown(v), err)
		}
	}
	if v, ok := env["NCCL_PROTO"]; ok {
		if o.Protos, o.OpProtos, err = ParseProtos(v); err != nil {
			return o, fmt.Errorf("nccl: NCCL_PROTO=%s: %w", shown(v), err)
		}
	}
	for _, n := range o.numbers() {
		v, ok := env[n.name]
		if !ok {
			continue
		}
		x, err := strconv.ParseInt(strings.TrimSpace(v), 0, 64)
		switch {
		case err == nil && x == 0 && n.zero != nil:
			*n.zero = true
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return o, fmt.Errorf("nccl: %s=%s: want %s, a whole number as NCCL reads one (decimal, or hexadecimal after 0x; no units)", n.name, shown(v), n.want())
		case err != nil || !n.allows(x):
			return o, fmt.Errorf("nccl: %s=%s: want %s", n.name, shown(v), n.want())
		default:
			n.set(x)
		}
	}
	for _, e := range o.toggles() {
		v, ok := env[e.name]
		switch v = strings.TrimSpace(v); {
		case !ok:
		case v == "0":
			*e.off = true
		case v == "1" && e.force != nil:
			*e.force = true
		case !slices.Contains(e.on, v):
			all := append([]string{"0"}, e.on...)
			return o, fmt.Errorf("nccl: %s=%s: want %s or %s", e.name, shown(v), strings.Join(all[:len(all)-1], ", "), all[len(all)-1])
		}
	}
	return o, o.check()
}

// shown is a variable's value as an error names it: as set, or quoted
// where it holds what would not print on one line.
func shown(v string) string {
	if q := strconv.Quote(v); q[1:len(q)-1] != v {
		return q
	}
	return v
}

// Env is the environment that sets o's numbers and switches, as FromEnv
// reads them: NAME=VALUE for each such variable o sets, in EnvVars'
// order. NCCL_ALGO and NCCL_PROTO (lists, per collective too), and
// Options.Channels, which sets both NCCL_MIN_NCHANNELS and
// NCCL_MAX_NCHANNELS, are left to the caller to spell; the release is
// not a variable.
func (o Options) Env() []string {
	var out []string
	for _, name := range EnvVars {
		for _, n := range o.numbers() {
			switch {
			case n.name != name:
			case n.get() != 0:
				out = append(out, name+"="+strconv.FormatInt(n.get(), 10))
			case n.zero != nil && *n.zero:
				out = append(out, name+"=0")
			}
		}
		for _, e := range o.toggles() {
			switch {
			case e.name != name:
			case *e.off:
				out = append(out, name+"=0")
			case e.force != nil && *e.force:
				out = append(out, name+"=1")
			}
		}
	}
	return out
}

// ParseAlgos reads algorithms as NCCL_ALGO spells them (tuning.cc,
// parseList): a list for every collective, "ring,tree", or "^nvls" for
// all but NVLS; then, separated by ";", entries such as "allreduce:tree"
// that replace it for one collective (broadcast, reduce, allgather,
// reducescatter or allreduce). A list for every collective may be left
// out; the per-collective lists are nil where none is given.
func ParseAlgos(s string) ([]Algo, map[ops.Op][]Algo, error) {
	all := make([]Algo, numAlgos)
	for a := range all {
		all[a] = Algo(a)
	}
	return parseEnvMap(s, ParseAlgo, all)
}

// ParseProtos reads protocols as NCCL_PROTO spells them: "LL,Simple",
// "^LL128" for all but LL128, and per collective as ParseAlgos reads.
func ParseProtos(s string) ([]ops.Protocol, map[ops.Op][]ops.Protocol, error) {
	return parseEnvMap(s, ops.ParseProtocol, protocols[:])
}

// tunedOps are the collectives NCCL's lists name, in NCCL's order.
var tunedOps = []ops.Op{ops.Broadcast, ops.Reduce, ops.AllGather, ops.ReduceScatter, ops.AllReduce}

// parseEnvMap reads NCCL's list syntax: an optional list for every
// collective first, then ";"-separated "collective:list" entries.
func parseEnvMap[T comparable](s string, parse func(string) (T, error), all []T) ([]T, map[ops.Op][]T, error) {
	var every []T
	var perOp map[ops.Op][]T
	for i, entry := range strings.Split(s, ";") {
		if strings.TrimSpace(entry) == "" && (i > 0 || strings.Contains(s, ";")) {
			continue
		}
		name, list, named := strings.Cut(entry, ":")
		if !named {
			if i > 0 {
				return nil, nil, fmt.Errorf("%q: every entry but the first names its collective (allreduce:...)", entry)
			}
			l, err := parseEnvList(entry, parse, all)
			if err != nil {
				return nil, nil, err
			}
			every = l
			continue
		}
		k := slices.IndexFunc(tunedOps, func(op ops.Op) bool { return strings.EqualFold(strings.TrimSpace(name), op.String()) })
		if k < 0 {
			return nil, nil, fmt.Errorf("unknown collective %q (want broadcast, reduce, allgather, reducescatter or allreduce)", strings.TrimSpace(name))
		}
		l, err := parseEnvList(list, parse, all)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", tunedOps[k], err)
		}
		if perOp == nil {
			perOp = map[ops.Op][]T{}
		}
		perOp[tunedOps[k]] = l
	}
	return every, perOp, nil
}

// parseEnvList reads a comma-separated list of names, or after a leading
// "^" the names to leave out of all.
func parseEnvList[T comparable](s string, parse func(string) (T, error), all []T) ([]T, error) {
	s = strings.TrimSpace(s)
	except := strings.HasPrefix(s, "^")
	var named []T
	for _, name := range strings.Split(strings.TrimPrefix(s, "^"), ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		v, err := parse(name)
		if err != nil {
			return nil, err
		}
		named = append(named, v)
	}
	if !except {
		if len(named) == 0 {
			return nil, fmt.Errorf("names nothing")
		}
		return named, nil
	}
	var out []T
	for _, v := range all {
		if !slices.Contains(named, v) {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("leaves nothing")
	}
	return out, nil
}
