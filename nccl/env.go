package nccl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/commsim/commsim/ops"
)

// EnvVars are the NCCL environment variables FromEnv reads: those whose
// effect on what NCCL runs commsim reproduces.
var EnvVars = []string{
	"NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
	"NCCL_NCHANNELS_PER_NET_PEER", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_P2P_NVL_CHUNKSIZE", "NCCL_P2P_PCI_CHUNKSIZE",
	"NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE",
}

// FromEnv reads the options an NCCL run's environment sets, as NCCL reads
// it: NCCL_ALGO and NCCL_PROTO as lists, or as lists to leave out after
// a "^" ("^LL128" allows LL and Simple), then per collective (see
// ParseAlgos); NCCL_BUFFSIZE and the NCCL_P2P_*_CHUNKSIZE in bytes;
// NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS and NCCL_NCHANNELS_PER_NET_PEER
// as counts; NCCL_NVLS_ENABLE and NCCL_COLLNET_ENABLE as 0 or 1 (2 too
// for NVLS: NCCL's default, on where the switch reduces). Any other
// variable is refused, so that a setting commsim would ignore is not
// taken for one it follows.
func FromEnv(env map[string]string) (Options, error) {
	var o Options
	for name := range env {
		if !slices.Contains(EnvVars, name) {
			return o, fmt.Errorf("nccl: %s: not reproduced (commsim reads %s)", name, strings.Join(EnvVars, ", "))
		}
	}
	var err error
	if v, ok := env["NCCL_ALGO"]; ok {
		if o.Algos, o.OpAlgos, err = ParseAlgos(v); err != nil {
			return o, fmt.Errorf("nccl: NCCL_ALGO=%s: %w", v, err)
		}
	}
	if v, ok := env["NCCL_PROTO"]; ok {
		if o.Protos, o.OpProtos, err = ParseProtos(v); err != nil {
			return o, fmt.Errorf("nccl: NCCL_PROTO=%s: %w", v, err)
		}
	}
	for _, b := range append(o.p2pChunkVars(), byteVar{"NCCL_BUFFSIZE", &o.BuffSize}) {
		if v, ok := env[b.name]; ok {
			if *b.bytes, err = strconv.ParseInt(strings.TrimSpace(v), 0, 64); err != nil {
				return o, fmt.Errorf("nccl: %s=%s: want a count of bytes", b.name, v)
			}
		}
	}
	for _, e := range [...]struct {
		name string
		off  *bool
		on   []string
		want string
	}{{"NCCL_NVLS_ENABLE", &o.NoNVLS, []string{"1", "2"}, "0, 1 or 2"}, {"NCCL_COLLNET_ENABLE", &o.NoCollNet, []string{"1"}, "0 or 1"}} {
		v, ok := env[e.name]
		switch v = strings.TrimSpace(v); {
		case !ok:
		case v == "0":
			*e.off = true
		case !slices.Contains(e.on, v):
			return o, fmt.Errorf("nccl: %s=%s: want %s", e.name, v, e.want)
		}
	}
	for _, c := range [...]struct {
		name  string
		count *int
	}{{"NCCL_MIN_NCHANNELS", &o.MinChannels}, {"NCCL_MAX_NCHANNELS", &o.MaxChannels}, {"NCCL_NCHANNELS_PER_NET_PEER", &o.NetPeerChannels}} {
		if v, ok := env[c.name]; ok {
			if *c.count, err = strconv.Atoi(strings.TrimSpace(v)); err != nil || *c.count < 1 || *c.count > maxChannels {
				return o, fmt.Errorf("nccl: %s=%s: want 1 to %d channels", c.name, v, maxChannels)
			}
		}
	}
	return o, o.check()
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
